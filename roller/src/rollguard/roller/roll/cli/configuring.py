"""The desired configurations, for `plan` and `roll` (issue 41): each node's file (an
inventory's `config:`, or what its `config-command:` prints; on Kubernetes, for `plan
--compare-config`, the ConfigMap its pod will mount: `rollguard.roller.roll.configs.kubernetes`)
read before Kafka is asked (a bad one is exit 2), compared with what Kafka says each broker
runs, and the roll's plan for them (`configs/plan.py`: live where Kafka allows, a restart
only for a key read at start).

What the roll cannot do with them is its first look's to say (`node.taking.take`), for the
roll and its plan alike: a broker Kafka cannot describe now fails the roll (exit 1: it would not
know which of its changes need a restart), and a dynamic value that would shadow the file across
a restart is refused (exit 2), naming it and how to remove it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from rollguard.roller.inventory import load_inventory
from rollguard.roller.kafka_admin import KafkaObserver
from rollguard.roller.model import Node
from rollguard.roller.platform import Platform
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.roller.roll.configs.controller import ControllerConfigs, controller_listener
from rollguard.roller.roll.configs.desired import has_desired, read_all_desired
from rollguard.roller.roll.configs.kafka import KafkaConfigs
from rollguard.roller.roll.configs.live import (
    ConfigReader,
    LiveConfigs,
    NodeConfig,
    desired_values,
    node_configs,
)
from rollguard.roller.roll.configs.plan import ConfigPlan, plan_configs, refused_by_node
from rollguard.roller.roll.configs.values import DesiredValue
from rollguard.roller.roll.planning import PlanEntry
from rollguard.shared.javaprops import Property
from rollguard.shared.logs import PROGRESS

__all__ = ["Configs", "compare", "read_desired", "with_configs"]

progress = logging.getLogger(PROGRESS)


@dataclass(frozen=True, slots=True)
class Configs:
    compared: dict[str, NodeConfig]  # node name -> its changes, or why not compared
    plan: ConfigPlan
    desired: dict[str, dict[str, DesiredValue]]
    reader: KafkaConfigs
    controllers: Mapping[str, ConfigReader] = field(default_factory=dict)

    def live(
        self,
        nodes: Sequence[Node] = (),
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> LiveConfigs:
        """The roll's live steps, and what its first look refuses (`nodes`: their ids name the
        brokers in the commands a refusal gives)."""
        ids = {n.name: n.node_id for n in nodes}
        changes = {name: c.changes for name, c in self.compared.items() if not c.note}
        refused = {name: "; ".join(found) for name, found in refused_by_node(changes, ids).items()}
        unknown = {name: c.note for name, c in self.compared.items() if c.note}
        return LiveConfigs(
            self.reader,
            self.plan,
            clock=clock,
            sleep=sleep,
            readers=self.controllers,
            refused=refused,
            unknown=unknown,
        )


@dataclass(frozen=True, slots=True)
class Desired:
    """Each node's desired properties, and the keys its start sets (not compared)."""

    properties: Mapping[str, Sequence[Property]]
    unchecked: Mapping[str, Collection[str]]


async def read_desired(
    options: RollOptions, platform: Platform, nodes: Sequence[Node]
) -> Desired | None:
    """Each node's desired configuration (None: none is given): an inventory's `config` or
    `config-command`, or with --compare-config each pod's ConfigMap. ConfigError (exit 2) for
    one that cannot be read, before Kafka is asked anything."""
    if options.inventory is not None:
        entries = load_inventory(options.inventory)
        if not has_desired(entries):
            return None
        return Desired(await read_all_desired(entries), {})
    if not options.compare_config:
        return None
    from rollguard.roller.kubernetes import KubernetesPlatform
    from rollguard.roller.roll.configs.kubernetes import read_pod_configs

    assert isinstance(platform, KubernetesPlatform)
    found = await read_pod_configs(
        platform.client,
        platform.settings.namespace,
        nodes,
        file=options.config_key,
        set_at_start=options.config_set_at_start,
    )
    read = Counter((c.configmap, c.key) for c in found.values() if c.configmap)
    for (configmap, key), pods in read.items():  # names only: a file holds passwords
        progress.info(
            "plan: desired configuration from ConfigMap %s key %s (%d pod%s)",
            configmap,
            key,
            pods,
            "" if pods == 1 else "s",
        )
    return Desired(
        {n: c.properties for n, c in found.items()}, {n: c.unchecked for n, c in found.items()}
    )


async def compare(
    given: Desired | None, nodes: Sequence[Node], kafka: KafkaObserver
) -> Configs | None:
    """The desired configurations against what Kafka says (None: none is given)."""
    if given is None:
        return None
    reader = KafkaConfigs(kafka)
    # A controller-only node is asked on its own listener, found in its desired file.
    controllers: dict[str, ConfigReader | str] = {}
    for node in nodes:
        properties = given.properties.get(node.name)
        if node.is_broker or properties is None:
            continue
        agent = urlsplit(node.agent_url).hostname if node.agent_url else None
        listener = controller_listener(properties, agent)
        controllers[node.name] = (
            listener if isinstance(listener, str) else ControllerConfigs(*listener, kafka.settings)
        )
    compared = await node_configs(
        nodes, given.properties, reader, unchecked=given.unchecked, controllers=controllers
    )
    desired = {}
    for name, found in given.properties.items():
        # the keys a pod's start sets are neither compared nor the roll's to change
        skipped = compared[name].unchecked if name in compared else ()
        desired[name] = {k: v for k, v in desired_values(found).items() if k not in skipped}
    changes = {name: c.changes for name, c in compared.items() if not c.note}
    brokers = [n.name for n in nodes if n.is_broker]
    readers = {n: r for n, r in controllers.items() if not isinstance(r, str)}
    return Configs(compared, plan_configs(changes, desired, brokers), desired, reader, readers)


def with_configs(entries: list[PlanEntry], configs: Mapping[str, NodeConfig]) -> list[PlanEntry]:
    """The plan's entries with each node's configuration changes, to show (None for a node
    without any): what the roll does with them is its own first look's."""
    return [replace(e, configs=configs.get(e.node.name)) for e in entries]

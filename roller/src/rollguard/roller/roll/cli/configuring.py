"""The desired configurations, for `plan` and `roll` (issue 41): each node's file (an
inventory's `config:`, or what its `config-command:` prints; on Kubernetes, for `plan
--compare-config`, the ConfigMap its pod will mount: `rollguard.roller.roll.configs.kubernetes`)
read before Kafka is asked (a bad one is exit 2), compared with what Kafka says each broker
runs, and the roll's plan for them (`configs/plan.py`: live where Kafka allows, a restart
only for a key read at start).

Before a roll's first action (`check_for_roll`): every broker with a desired file must have
been compared (a broker Kafka cannot describe now fails the roll, exit 1: the roll would not
know which of its changes need a restart), and a dynamic value that would shadow the file
across a restart is refused, exit 2, naming it and how to remove it.
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
from rollguard.roller.roll.configs.plan import ConfigPlan, plan_configs, refusals
from rollguard.roller.roll.configs.values import DesiredValue
from rollguard.roller.roll.planning import PlanEntry, numbered
from rollguard.roller.roll.rules.settings import RollFailed
from rollguard.roller.roll.rules.taking import NO_REVISION, UP_TO_DATE
from rollguard.shared.errors import ConfigError
from rollguard.shared.javaprops import Property
from rollguard.shared.logs import PROGRESS

__all__ = ["Configs", "check_for_roll", "compare", "read_desired"]

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
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> LiveConfigs:
        return LiveConfigs(
            self.reader, self.plan, clock=clock, sleep=sleep, readers=self.controllers
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


def check_for_roll(configs: Configs, nodes: Sequence[Node]) -> None:
    """Before the roll's first action (see the module)."""
    for node in nodes:
        found = configs.compared.get(node.name)
        if node.is_broker and found is not None and found.note:
            raise RollFailed(
                f"{node.name}: its desired configuration cannot be compared with what it runs "
                f"({found.note}); not rolling: which of its changes need a restart is not known"
            )
    ids = {n.name: n.node_id for n in nodes}
    changes = {name: c.changes for name, c in configs.compared.items() if not c.note}
    refused = refusals(changes, ids)
    if refused:
        raise ConfigError(
            "the desired configuration cannot take effect by a roll: " + "; ".join(refused)
        )


def with_configs(
    entries: list[PlanEntry], configs: Mapping[str, NodeConfig], plan: ConfigPlan | None = None
) -> list[PlanEntry]:
    """The entries with each node's configuration changes (None for a node without any). With
    the roll's plan for them (`configs.plan`), a node an inventory would restart for want of
    a revision, or a pod up to date, is taken for its configuration, as the roll takes it:
    restarted for a key read at start only, changed live (`configure`), or left out when nothing
    changes."""
    found = []
    for e in entries:
        e = replace(e, configs=configs.get(e.node.name))
        node = plan.node(e.node.name) if plan is not None else None
        if node is not None and e.why == UP_TO_DATE and node.changes:
            # An up-to-date pod whose ConfigMap changed in place: taken for it (what would hold
            # its restart now is the roll's to find: the plan left it out before)
            action = "restart" if node.restart else "configure"
            e = replace(e, action=action, reason=node.why(), why=node.why())
        elif node is not None and e.why == NO_REVISION:
            if not node.changes:
                e = replace(e, action="skip", reason=node.why(), order="", hold=None)
            elif not node.restart and e.action == "restart":
                e = replace(e, action="configure")
            e = replace(e, why=node.why())
        found.append(e)
    return numbered([replace(e, position=None) for e in found])

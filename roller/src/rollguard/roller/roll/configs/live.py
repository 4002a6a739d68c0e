"""A roll's configuration changes: each node's desired file against what Kafka says it runs
(`node_configs`, for `plan` and `roll`), and the live steps of a roll (`LiveConfigs`): a key
Kafka takes live is set with IncrementalAlterConfigs and read back, a node restarts only for
the others (the plan: `configs/plan.py`; the comparison: `configs/diff.py`).

A live step, one broker at a time, in the roll's order and through its safety (`restarts.py`
calls it in place of a restart): the cluster-wide keys once, at the cluster default, at the
first step; then the broker's own keys at its resource; then every key it was to change read
back from the broker (DescribeConfigs) until it is in force (Kafka writes a change to the
metadata log and each broker takes it as it replays it), within `READ_BACK` seconds. A change
Kafka refuses, or does not take, fails the roll naming the key. Values never leave the step but
to Kafka: names only in events, logs and the journal.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rollguard.roller.kafka_admin import AdminApiError
from rollguard.roller.model import Node
from rollguard.roller.roll.configs.diff import changes, to_validate
from rollguard.roller.roll.configs.plan import ConfigPlan, NodePlan
from rollguard.roller.roll.configs.values import (
    DERIVED,
    ConfigChange,
    DesiredValue,
    How,
    LiveAnswer,
    RunningConfig,
    Source,
    running_from_answer,
    same_value,
)
from rollguard.roller.roll.rules.settings import RollFailed
from rollguard.shared.javaprops import Property

__all__ = ["ConfigReader", "LiveConfigs", "NodeConfig", "desired_values", "node_configs"]

READ_BACK = 60.0  # seconds for a change to be in force on the broker
DYNAMIC = (Source.DYNAMIC_BROKER, Source.DYNAMIC_DEFAULT)


class ConfigReader(Protocol):
    """Kafka's answers about one node's configuration: the brokers' (`configs.kafka`), or a
    controller's own (`configs.controller`). Each raises AdminApiError when it cannot ask."""

    async def running(self, broker: int) -> dict[str, dict[str, Any]]: ...

    async def live_answers(
        self, broker: int, changes: Mapping[str, str | None]
    ) -> dict[str, tuple[str | None, str | None]]: ...

    async def alter(self, broker: int | None, configs: Mapping[str, str | None]) -> str | None: ...


def desired_values(properties: Sequence[Property]) -> dict[str, DesiredValue]:
    return {p.key: DesiredValue(p.key, p.value, p.line) for p in properties}


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """A node's desired configuration against what Kafka says it runs: each changing key
    (`configs.diff.changes`), or why it could not be compared (`note`); `unchecked`: the keys
    set at the pod's start (Kubernetes), not compared, their values never shown."""

    changes: tuple[ConfigChange, ...] = ()
    note: str = ""  # "": compared
    unchecked: tuple[str, ...] = ()

    def summary(self) -> str:
        if self.note:
            return self.note
        text = self._changed()
        if self.unchecked:
            text += f"; not compared (set at the pod's start): {', '.join(self.unchecked)}"
        return text

    def _changed(self) -> str:
        if not self.changes:
            return "no change"
        counts = Counter("restart" if c.how is How.RESTART else "live" for c in self.changes)
        shadowed = sum(1 for c in self.changes if c.shadowing is not None)
        parts = [f"{counts[k]} {k}" for k in ("restart", "live") if counts[k]]
        if shadowed:
            parts.append(f"{shadowed} shadowed by a dynamic value")
        keys = len(self.changes)
        return f"{keys} key{'s' if keys != 1 else ''} change: {', '.join(parts)}"

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "changes": [c.to_json() for c in self.changes],
            "note": self.note or None,
        }
        if self.unchecked:  # only on Kubernetes: an inventory's output as before
            found["notCompared"] = list(self.unchecked)
        return found


async def node_configs(
    nodes: Sequence[Node],
    desired: Mapping[str, Sequence[Property]],
    reader: ConfigReader,
    *,
    unchecked: Mapping[str, Collection[str]] | None = None,
    controllers: Mapping[str, ConfigReader | str] | None = None,
) -> dict[str, NodeConfig]:
    """Each node's desired configuration (node name -> its properties) against what Kafka says
    it runs: DescribeConfigs of its broker id, Kafka's validation of each changing dynamic key
    (`configs.diff.to_validate`), then `configs.diff.changes`. A node Kafka cannot be asked
    about now says why instead; nothing is changed (validate_only). `unchecked`: per node name,
    the keys its start sets (a placeholder a start script fills, on Kubernetes), left out of the
    comparison with the keys Kafka derives from them (`configs.diff.DERIVED`): neither a
    change nor a key dropped from the file. `controllers`: per controller-only node, the reader
    of its own listener (`configs.controller`), or why there is none (it is then not compared)."""
    found = {}
    for node in nodes:
        properties = desired.get(node.name)
        if properties is None:
            continue
        own: ConfigReader | str | None = reader
        if not node.is_broker:
            own = (controllers or {}).get(node.name, "its listener is not known")
        if isinstance(own, str) or own is None:
            found[node.name] = NodeConfig(note=f"a controller-only node: not compared ({own})")
            continue
        skipped = set((unchecked or {}).get(node.name, ()))
        skipped |= {key for key, source in DERIVED.items() if source in skipped}
        wanted = {k: v for k, v in desired_values(properties).items() if k not in skipped}
        try:
            running = running_from_answer(await own.running(node.node_id))
            if not running:
                found[node.name] = NodeConfig(note="Kafka described no configuration for it")
                continue
            for key in skipped:
                running.pop(key, None)
            said = await own.live_answers(node.node_id, to_validate(wanted, running))
        except AdminApiError as exc:
            found[node.name] = NodeConfig(note=f"not compared: {exc}")
            continue
        answers = {key: LiveAnswer(*answer) for key, answer in said.items()}
        found[node.name] = NodeConfig(
            tuple(changes(wanted, running, answers)), unchecked=tuple(sorted(skipped))
        )
    return found


class LiveConfigs:
    """The live steps of one roll (see the module)."""

    def __init__(
        self,
        reader: ConfigReader,
        plan: ConfigPlan,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        poll: float = 0.5,
        readers: Mapping[str, ConfigReader] | None = None,
        refused: Mapping[str, str] | None = None,
        unknown: Mapping[str, str] | None = None,
    ) -> None:
        self.reader = reader
        # Why the roll refuses a node's desired configuration (a dynamic value that would
        # shadow the file across a restart), and why one could not be compared: the roll's
        # first look stops on them, its plan says them.
        self.refused = dict(refused or {})
        self.unknown = dict(unknown or {})
        self.readers = dict(readers or {})  # a controller-only node's own (`configs.controller`)
        self.plan = plan  # its values are the desired files' (`configs.plan`)
        self._cluster_done = not plan.cluster
        self._clock = clock
        self._sleep = sleep
        self._poll = poll

    def keys(self, name: str) -> tuple[list[str], list[str], list[str]]:
        """The keys a live step of `name` sets at its broker, those it sets at the cluster
        default (at the first step only), and every key it reads back (its own and its
        cluster-wide ones)."""
        node = self.plan.node(name) or NodePlan()
        cluster = [] if self._cluster_done else sorted(self.plan.cluster)
        return sorted(node.live), cluster, sorted({*node.live, *node.cluster})

    async def apply(self, node: Node) -> list[str]:
        """The live step of `node` (see the module): the keys it changed, in force on it.
        RollFailed naming the node and the key when Kafka refuses or does not take one."""
        plan = self.plan.node(node.name) or NodePlan()
        before = ""
        if not self._cluster_done:
            await self._alter(node, None, self.plan.cluster)
            self._cluster_done = True
            keys = ", ".join(sorted(self.plan.cluster))
            before = f"; {keys} was set at the cluster default just before, and stays"
        if plan.live:
            await self._alter(node, node.node_id, plan.live, before)
        wanted = dict(plan.live) | {k: self.plan.cluster[k] for k in plan.cluster}
        await self._read_back(node, wanted)
        return sorted(wanted)

    async def _alter(
        self, node: Node, broker: int | None, configs: Mapping[str, str], before: str = ""
    ) -> None:
        where = "the cluster default" if broker is None else f"broker {broker}"
        try:
            # The cluster default through the brokers; a node's own keys through its reader.
            reader = self.reader if broker is None else self.readers.get(node.name, self.reader)
            refused = await reader.alter(broker, configs)
        except AdminApiError as exc:
            raise RollFailed(
                f"{node.name}: the live change of {', '.join(sorted(configs))} at {where} "
                f"could not be sent ({exc}); whether Kafka took it is not known: read it back "
                f"with kafka-configs --describe before resuming{before}"
            ) from exc
        if refused is not None:
            raise RollFailed(
                f"{node.name}: Kafka refused the live change of {', '.join(sorted(configs))} "
                f"at {where}: {refused}; nothing of it was changed there{before}"
            )

    async def _read_back(self, node: Node, wanted: Mapping[str, str]) -> None:
        """Until every key of `wanted` is in force on `node` (a sensitive one: set dynamically,
        its value not returned), within READ_BACK seconds."""
        deadline = self._clock() + READ_BACK
        while True:
            try:
                reader = self.readers.get(node.name, self.reader)
                running = running_from_answer(await reader.running(node.node_id))
                left = {
                    k: _in_force(running.get(k))
                    for k, v in wanted.items()
                    if not _taken(running.get(k), v)
                }
            except AdminApiError as exc:
                left = dict.fromkeys(wanted, f"not read back ({exc})")
            if not left:
                return
            if self._clock() >= deadline:
                said = "; ".join(f"{k}: it runs {v}" for k, v in sorted(left.items()))
                raise RollFailed(
                    f"{node.name}: Kafka did not take the live change of "
                    f"{', '.join(sorted(left))} within {READ_BACK:g}s ({said})"
                )
            await self._sleep(self._poll)


def _taken(now: RunningConfig | None, value: str) -> bool:
    if now is None:
        return False
    if now.sensitive:
        return now.source in DYNAMIC  # its value is never returned
    return same_value(now.value, value, now.type)


def _in_force(now: RunningConfig | None) -> str:
    if now is None:
        return "(not listed)"
    if now.sensitive:
        return f"(sensitive, {now.source.said})"
    return f"{now.value if now.value is not None else '(unset)'} ({now.source.said})"

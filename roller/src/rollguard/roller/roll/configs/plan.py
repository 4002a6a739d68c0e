"""What a roll does with each node's configuration change (pure): the fewest restarts.

From each compared node's changes (`configs.changes`) and its desired values:
- every key Kafka takes live is applied live, with IncrementalAlterConfigs: at this broker's
  resource, one broker at a time; a cluster-wide key once, at the cluster default, when every
  broker of the cluster changes it to the same value and none holds a value of its own for it
  (a broker's own dynamic value outranks the default);
- a node restarts only for a key Kafka reads at start only (read-only, refused live, or not
  listed by the broker); its live keys are applied live before its restart, so that a dynamic
  value of its own never shadows the file after it;
- a node with nothing to change is not restarted;
- a sensitive key set both in force and in the file is left as it is: Kafka never returns its
  value, so whether it changed cannot be told (plan says "may have changed"); setting it again
  at every roll, or restarting for it, would make every roll of a cluster with a password in
  its files restart or reconfigure every broker. Rotate it live, or restart with --only.

A key dropped from the file is set live to Kafka's default (a delete would leave the file's old
value in force until the next restart); without a default known, it restarts the node.

The trap a restart cannot cure is refused before the first action (`refusals`): a change
shadowed by a dynamic value of another key of higher precedence (`log.retention.ms` set live
over `log.retention.hours` in the file), or by a dynamic value of a key only a restart reads.
The operator deals with it (deletes it, or moves the file to the key in force) and runs again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rollguard.roller.roll.configs.values import (
    ConfigChange,
    DesiredValue,
    How,
    Shadow,
    Source,
)

__all__ = ["ConfigPlan", "NodePlan", "plan_configs", "refusals", "refused_by_node"]


@dataclass(frozen=True, slots=True)
class NodePlan:
    """One node: the keys applied live at its broker resource (key -> value), those only a
    restart applies, and which keys are sensitive (their values never shown)."""

    live: Mapping[str, str] = field(default_factory=dict)
    restart: tuple[str, ...] = ()
    sensitive: frozenset[str] = frozenset()
    cluster: tuple[str, ...] = ()  # its keys applied once at the cluster default

    @property
    def changes(self) -> bool:
        return bool(self.live or self.restart or self.cluster)

    def why(self) -> str:
        """Why the roll takes it, or leaves it out, in the words of plan and the events."""
        if self.restart:
            return f"configuration: {_keys(self.restart)} need a restart"
        if self.live or self.cluster:
            return f"configuration: {_keys([*self.cluster, *self.live])} applied live"
        return "configuration unchanged"


@dataclass(frozen=True, slots=True)
class ConfigPlan:
    nodes: Mapping[str, NodePlan]  # each compared node (a node not in it: not compared)
    cluster: Mapping[str, str] = field(default_factory=dict)  # set once at the default
    sensitive: frozenset[str] = frozenset()  # of the cluster's keys

    def node(self, name: str) -> NodePlan | None:
        return self.nodes.get(name)


def _keys(keys: Iterable[str]) -> str:
    found = sorted(set(keys))
    return ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")


def _live_value(change: ConfigChange, desired: Mapping[str, DesiredValue]) -> str | None:
    """The value set live for `change` (a sensitive one from the desired file); None when only
    a restart can apply it (a dropped key whose default is not known)."""
    wanted = desired.get(change.key)
    if wanted is not None:
        return wanted.value
    return change.to if change.removed and change.to is not None else None


def refusals(changes: Mapping[str, tuple[ConfigChange, ...]], ids: Mapping[str, int]) -> list[str]:
    """Why the roll cannot bring these changes about (empty: it can), each naming the node, the
    key, the dynamic value in the way and how to remove it."""
    return [text for found in refused_by_node(changes, ids).values() for text in found]


def refused_by_node(
    changes: Mapping[str, tuple[ConfigChange, ...]], ids: Mapping[str, int]
) -> dict[str, list[str]]:
    """`refusals`, by node: a node's record says why the roll refuses it."""
    by_node: dict[str, list[str]] = {}
    for name, node_changes in changes.items():
        found = by_node.setdefault(name, [])
        for change in node_changes:
            shadow = change.shadowing  # one set live over is the file's value once set
            if shadow is None:
                continue
            found.append(f"{name}: {change.key} {_shadowed(change, shadow, ids.get(name))}")
    return {name: found for name, found in by_node.items() if found}


def _shadowed(change: ConfigChange, shadow: Shadow, broker: int | None) -> str:
    default = shadow.source is Source.DYNAMIC_DEFAULT
    entity = "--entity-default" if default else f"--entity-name {broker}"
    return (
        f"is shadowed by {shadow.text(change.sensitive)}, which stays in force over the file "
        f"across a restart; delete it (kafka-configs --alter --entity-type brokers {entity} "
        f"--delete-config {shadow.key}) or change {shadow.key} in the file instead, then run "
        "the roll again"
    )


def plan_configs(
    changes: Mapping[str, tuple[ConfigChange, ...]],
    desired: Mapping[str, Mapping[str, DesiredValue]],
    brokers: Iterable[str],
) -> ConfigPlan:
    """The plan for every compared node (`changes`: node name -> its changes; `desired`: its
    desired file). `brokers`: every broker of the cluster, by name: a key goes to the cluster
    default only when each of them changes it the same way."""
    brokers = list(brokers)
    cluster = _cluster_keys(changes, desired, brokers)
    nodes = {}
    for name, node_changes in changes.items():
        live: dict[str, str] = {}
        restart: list[str] = []
        mine: list[str] = []
        for change in node_changes:
            if not change.known:  # a sensitive value Kafka never returns, set on both sides
                continue
            value = _live_value(change, desired.get(name, {}))
            if change.how is How.RESTART or value is None:
                restart.append(change.key)
            elif change.key in cluster:
                mine.append(change.key)
            else:
                live[change.key] = value
        sensitive = frozenset(c.key for c in node_changes if c.sensitive)
        nodes[name] = NodePlan(live, tuple(restart), sensitive, tuple(mine))
    secret = frozenset(
        c.key for cs in changes.values() for c in cs if c.sensitive and c.key in cluster
    )
    return ConfigPlan(nodes, cluster, secret)


def _cluster_keys(
    changes: Mapping[str, tuple[ConfigChange, ...]],
    desired: Mapping[str, Mapping[str, DesiredValue]],
    brokers: list[str],
) -> dict[str, str]:
    """The cluster-wide keys every broker changes to the same value, none of them holding a
    dynamic value of its own for it."""
    if not brokers or any(b not in changes for b in brokers):
        return {}
    per_broker: list[dict[str, str | None]] = []
    for b in brokers:
        mine: dict[str, str | None] = {}
        for c in changes[b]:
            own = c.shadowed_by is not None and c.shadowed_by.source is Source.DYNAMIC_BROKER
            if c.how is How.LIVE_CLUSTER and not own and c.known:
                mine[c.key] = _live_value(c, desired.get(b, {}))
        per_broker.append(mine)
    first, *others = per_broker
    return {
        key: value
        for key, value in first.items()
        if value is not None and all(key in o and o[key] == value for o in others)
    }

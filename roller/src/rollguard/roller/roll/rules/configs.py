"""A node's configuration change, key by key: what it runs, what its file will say at its next
start, and how Kafka can take the difference (pure: no network, no Kafka library).

What a broker runs comes from Kafka itself (DescribeConfigs on its BROKER resource, with
synonyms; read by `rollguard.roller.kafka_configs`): each key's value now and where it comes
from, in Kafka's order of precedence:

    DYNAMIC_BROKER_CONFIG          set live for this broker (kafka-configs --entity-name N)
    DYNAMIC_DEFAULT_BROKER_CONFIG  set live as the cluster-wide default (--entity-default)
    STATIC_BROKER_CONFIG           the broker's server.properties, as read at its start
    DEFAULT_CONFIG                 Kafka's built-in default

How a change can be made is the broker's own answer, never a table of ours: a `read_only` key
is read at start only (RESTART); any other is asked of Kafka's own validation (an
IncrementalAlterConfigs with validate_only): taken as the cluster default (LIVE_CLUSTER: a
cluster-wide key), taken for this broker only (LIVE_BROKER: a per-broker key such as
`listeners`), or refused live (RESTART, with Kafka's words). A key the broker does not list (a
listener-prefixed or plugin key, a misspelling) is classified RESTART: Kafka validates unknown
keys as custom ones and accepts them.

The trap: a dynamic value shadows the file's, across restarts. A key changed in server.properties
while a dynamic value of it (or of a synonym: `log.retention.ms` over `log.retention.hours`)
is set keeps the dynamic value after the restart, silently. Each such change names its shadow
(`ConfigChange.shadowed_by`).

Sensitive values (PASSWORD keys) are never returned by Kafka and never shown here: such a change
says whether it is certain (set where there was none, removed from the file) or not (both set:
`known` False, "may have changed").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "ConfigChange",
    "DesiredValue",
    "How",
    "LiveAnswer",
    "RunningConfig",
    "Shadow",
    "Source",
    "Synonym",
    "changes",
    "running_from_answer",
    "to_validate",
]

# Keys Kafka sets at start from another when a file leaves them out, so a file without them
# still shows them as STATIC_BROKER_CONFIG (seen on 4.4.0: KRaft's KafkaConfig copies node.id
# into broker.id): such a key left out takes the other's desired value, not the default.
DERIVED = {"broker.id": "node.id"}
HIDDEN = "(sensitive: not shown)"
UNLISTED = "(not listed by the broker: not shown)"
UNSET = "(unset)"


class Source(StrEnum):
    """Where a running value comes from (Kafka's ConfigSource names)."""

    DYNAMIC_BROKER = "DYNAMIC_BROKER_CONFIG"
    DYNAMIC_DEFAULT = "DYNAMIC_DEFAULT_BROKER_CONFIG"
    STATIC = "STATIC_BROKER_CONFIG"
    DEFAULT = "DEFAULT_CONFIG"
    OTHER = "UNKNOWN"  # a source a BROKER resource does not use

    @classmethod
    def of(cls, name: object) -> Source:
        try:
            return cls(str(name))
        except ValueError:
            return cls.OTHER

    @property
    def dynamic(self) -> bool:
        return self in (Source.DYNAMIC_BROKER, Source.DYNAMIC_DEFAULT)

    @property
    def said(self) -> str:
        return {
            Source.DYNAMIC_BROKER: "set dynamically for this broker",
            Source.DYNAMIC_DEFAULT: "set dynamically as the cluster-wide default",
            Source.STATIC: "from the broker's file",
            Source.DEFAULT: "Kafka's default",
            Source.OTHER: "from an unknown source",
        }[self]


class How(StrEnum):
    """How Kafka can take a change of a key on this node."""

    LIVE_BROKER = "live-broker"  # IncrementalAlterConfigs on this broker's resource
    LIVE_CLUSTER = "live-cluster"  # also as the cluster default (a cluster-wide key)
    RESTART = "restart"  # read at start only, or refused live


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None  # None: unset, or sensitive
    source: Source


@dataclass(frozen=True, slots=True)
class RunningConfig:
    """One key of a broker's DescribeConfigs answer."""

    key: str
    value: str | None  # in force now; None: unset, or sensitive
    source: Source
    read_only: bool
    sensitive: bool
    synonyms: tuple[Synonym, ...] = ()  # Kafka's order: the one in force first
    type: str = "STRING"  # Kafka's ConfigType name: INT, LONG, LIST, PASSWORD...

    def synonym(self, source: Source) -> Synonym | None:
        """This key's own value from `source`, if it has one."""
        return next((s for s in self.synonyms if s.source is source and s.name == self.key), None)

    @property
    def in_file(self) -> bool:
        return self.synonym(Source.STATIC) is not None

    @property
    def default(self) -> str | None:
        """Kafka's default (what a key dropped from the file becomes); None: unset."""
        if self.source is Source.DEFAULT:
            return self.value
        found = next((s for s in self.synonyms if s.source is Source.DEFAULT), None)
        return found.value if found is not None else None


@dataclass(frozen=True, slots=True)
class DesiredValue:
    """A key of the node's configuration as it will be at its next start."""

    key: str
    value: str
    line: int = 0  # in the file or the command's output, from 1; 0: unknown


@dataclass(frozen=True, slots=True)
class LiveAnswer:
    """What Kafka's validation (validate_only) said of a change: None accepted, else its
    refusal; at the cluster-default resource and at this broker's."""

    at_default: str | None
    at_broker: str | None


@dataclass(frozen=True, slots=True)
class Shadow:
    """A dynamic value that stays in force over the file's across a restart."""

    key: str  # the key itself, or a synonym of higher precedence (log.retention.ms)
    source: Source  # DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG
    value: str | None  # None when sensitive

    def text(self, sensitive: bool) -> str:
        value = HIDDEN if sensitive or self.value is None else self.value
        return f"{self.key}={value} {self.source.said}"

    def to_json(self, sensitive: bool) -> dict[str, Any]:
        hidden = sensitive or self.value is None
        return {
            "key": self.key,
            "source": self.source.value,
            "value": None if hidden else self.value,
        }


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One key of one node that the desired configuration changes. `from_` and `to` are never a
    sensitive value (None then, with `sensitive`); `known` False: whether it changes cannot be
    told (both sensitive values set)."""

    key: str
    from_: str | None  # in force now (None: unset, or not shown)
    to: str | None  # in the desired file (None: dropped from it and Kafka has no default)
    how: How
    why: str
    shadowed_by: Shadow | None = None
    sensitive: bool = False
    listed: bool = True  # the broker lists the key
    known: bool = True
    source: Source | None = None  # where `from_` comes from
    removed: bool = False  # the desired file no longer sets it: Kafka's default applies

    def values(self) -> str:
        """`from -> to`, or why they are not shown."""
        if not self.listed:
            return UNLISTED
        if self.sensitive:
            return HIDDEN if self.known else f"{HIDDEN}, may have changed"
        to = self.to if self.to is not None else UNSET
        if self.removed:
            to = f"{to} (Kafka's default: dropped from the file)"
        return f"{self.from_ if self.from_ is not None else UNSET} -> {to}"

    def text(self) -> str:
        return f"{self.key}: {self.values()}; {self.how.value}: {self.why}"

    def to_json(self) -> dict[str, Any]:
        shown = self.listed and not self.sensitive
        return {
            "key": self.key,
            "from": self.from_ if shown else None,
            "fromSource": self.source.value if self.source is not None else None,
            "to": self.to if shown else None,
            "removed": self.removed,
            "how": self.how.value,
            "why": self.why,
            "shadowedBy": (
                self.shadowed_by.to_json(self.sensitive) if self.shadowed_by is not None else None
            ),
            "sensitive": self.sensitive,
            "listed": self.listed,
            "known": self.known,
        }


def running_from_answer(answer: Mapping[str, Mapping[str, Any]]) -> dict[str, RunningConfig]:
    """A broker's configuration from kafka-python's DescribeConfigs answer for its resource
    (`describe_configs(..., include_synonyms=True, config_filter="all")["broker"][id]`): key ->
    {value, read_only, config_source, is_sensitive, synonyms [{name, value, source}],
    config_type}. A sensitive value is dropped here even if one were returned."""
    running = {}
    for key, entry in answer.items():
        sensitive = bool(entry.get("is_sensitive"))
        synonyms = tuple(
            Synonym(
                str(s.get("name")),
                None if sensitive or s.get("value") is None else str(s.get("value")),
                Source.of(s.get("source")),
            )
            for s in entry.get("synonyms") or ()
        )
        value = entry.get("value")
        running[key] = RunningConfig(
            key,
            None if sensitive or value is None else str(value),
            Source.of(entry.get("config_source")),
            bool(entry.get("read_only")),
            sensitive,
            synonyms,
            str(entry.get("config_type") or "STRING"),
        )
    return running


@dataclass(frozen=True, slots=True)
class _Difference:
    key: str
    running: RunningConfig | None
    to: str | None
    removed: bool
    shadow: Shadow | None
    known: bool


def _differences(
    desired: Mapping[str, DesiredValue], running: Mapping[str, RunningConfig]
) -> list[_Difference]:
    """Every key whose value in force would differ once the desired file is the node's: set in
    it, or dropped from it (a key the running file set), in key order."""
    keys = set(desired) | {k for k, r in running.items() if r.in_file}
    found = []
    for key in sorted(keys):
        wanted = desired.get(key)
        now = running.get(key)
        if now is None:  # the broker does not list it: nothing to compare with
            assert wanted is not None
            found.append(_Difference(key, None, wanted.value, False, None, False))
            continue
        if wanted is None and key in DERIVED and DERIVED[key] in desired:
            wanted = desired[DERIVED[key]]  # what Kafka will copy into it
        removed = wanted is None
        to = now.default if wanted is None else wanted.value
        shadow = _shadow(key, running)
        if now.sensitive:
            # No value to compare: set where there was none, or dropped, is certain.
            was_set = now.in_file or now.source is not Source.DEFAULT
            if removed or not was_set:
                found.append(_Difference(key, now, None, removed, shadow, True))
            else:
                found.append(_Difference(key, now, None, removed, shadow, False))
            continue
        in_force = shadow.value if shadow is not None else now.value
        if shadow is not None and _same(to, shadow.value, now.type):
            continue  # the dynamic value is what the file asks: nothing changes
        if shadow is None and _same(to, in_force, now.type):
            continue
        found.append(_Difference(key, now, to, removed, shadow, True))
    return found


def _shadow(key: str, running: Mapping[str, RunningConfig]) -> Shadow | None:
    """The dynamic value that outranks `key`'s file value: its own dynamic value, or one of a
    synonym of higher precedence (a key whose synonyms list `key` after a dynamic one)."""
    own = running[key]
    if own.source.dynamic:
        return Shadow(key, own.source, own.value)
    for other in running.values():
        names = [s.name for s in other.synonyms]
        if other.key == key or key not in names:
            continue
        ahead = other.synonyms[: names.index(key)]
        dynamic = next((s for s in ahead if s.source.dynamic), None)
        if dynamic is not None:
            return Shadow(dynamic.name, dynamic.source, dynamic.value)
    return None


def _same(a: str | None, b: str | None, kind: str) -> bool:
    """Equal as Kafka reads them: trimmed; a LIST item by item; a BOOLEAN in any case; numbers
    by value."""
    if a is None or b is None:
        return a is None and b is None
    a, b = a.strip(), b.strip()
    if kind == "LIST":
        return [x.strip() for x in a.split(",") if x.strip()] == [
            x.strip() for x in b.split(",") if x.strip()
        ]
    if kind == "BOOLEAN":
        return a.lower() == b.lower()
    if kind in ("INT", "SHORT", "LONG"):
        try:
            return int(a) == int(b)
        except ValueError:
            return a == b
    if kind == "DOUBLE":
        try:
            return float(a) == float(b)
        except ValueError:
            return a == b
    return a == b


def to_validate(
    desired: Mapping[str, DesiredValue], running: Mapping[str, RunningConfig]
) -> dict[str, str | None]:
    """The changes to put to Kafka's validation (validate_only), key -> the desired value (None:
    a delete, the key dropped from the file): every changing key the broker lists and does not
    call read-only. A sensitive one carries its desired value: it goes to Kafka only."""
    asked: dict[str, str | None] = {}
    for found in _differences(desired, running):
        if found.running is None or found.running.read_only:
            continue
        wanted = desired.get(found.key)
        asked[found.key] = wanted.value if wanted is not None else None
    return asked


def changes(
    desired: Mapping[str, DesiredValue],
    running: Mapping[str, RunningConfig],
    answers: Mapping[str, LiveAnswer] | None = None,
) -> list[ConfigChange]:
    """Each key of one node that the desired configuration changes, with how Kafka can take it
    (`answers`: its validation of each key of `to_validate`; a key it was not asked about is a
    RESTART) and the dynamic value that would shadow it."""
    answers = answers or {}
    result = []
    for found in _differences(desired, running):
        now = found.running
        if now is None:
            why = (
                "the broker does not list this key (a listener- or plugin-prefixed key, or a "
                "misspelling): only a restart reads it"
            )
            result.append(ConfigChange(found.key, None, None, How.RESTART, why, listed=False))
            continue
        how, why = _how(now, answers.get(found.key))
        if found.shadow is not None:
            why += (
                f"; but {found.shadow.text(now.sensitive)} outranks the file: after a restart "
                "it stays in force; change it or delete it live"
            )
        if now.sensitive:
            why = (
                "sensitive: Kafka does not return its value, "
                + ("so it may have changed; " if not found.known else "")
                + why
            )
        result.append(
            ConfigChange(
                found.key,
                None if now.sensitive else now.value,
                None if now.sensitive else found.to,
                how,
                why,
                shadowed_by=found.shadow,
                sensitive=now.sensitive,
                known=found.known,
                source=now.source,
                removed=found.removed,
            )
        )
    return result


def _how(now: RunningConfig, answer: LiveAnswer | None) -> tuple[How, str]:
    if now.read_only:
        return How.RESTART, "read-only: Kafka reads it at start only"
    if answer is None:
        return How.RESTART, "Kafka was not asked whether it takes it live"
    if answer.at_default is None:
        return How.LIVE_CLUSTER, "cluster-wide: Kafka takes it live, for a broker or as the default"
    if answer.at_broker is None:
        return (
            How.LIVE_BROKER,
            f"per broker: Kafka takes it live for this broker only ({answer.at_default})",
        )
    return How.RESTART, f"Kafka refuses it live: {answer.at_broker}"

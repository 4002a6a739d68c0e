"""The values of a node's configuration change (pure): where a running value comes from
(`Source`), how Kafka can take a change (`How`), a broker's DescribeConfigs answer
(`RunningConfig`, `running_from_answer`), a desired key, Kafka's validation of a change, a
dynamic value that shadows the file (`Shadow`), and one change (`ConfigChange`). The comparison
is `configs.py`; the module docstring there says what each means.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "DERIVED",
    "ConfigChange",
    "DesiredValue",
    "How",
    "LiveAnswer",
    "RunningConfig",
    "Shadow",
    "Source",
    "Synonym",
    "running_from_answer",
    "same_value",
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

    @property
    def shadowing(self) -> Shadow | None:
        """The dynamic value that stays in force over the file's after the roll: `shadowed_by`,
        unless it is the key's own and the roll sets the key live over it (`set_over`)."""
        return None if self.set_over is not None else self.shadowed_by

    @property
    def set_over(self) -> Shadow | None:
        """The key's own dynamic value, which the roll sets live over (the file's value is then
        the one in force)."""
        shadow = self.shadowed_by
        if shadow is not None and shadow.key == self.key and self.how is not How.RESTART:
            return shadow
        return None

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
                self.shadowing.to_json(self.sensitive) if self.shadowing is not None else None
            ),
            "setOver": self.set_over.to_json(self.sensitive) if self.set_over else None,
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


def same_value(a: str | None, b: str | None, kind: str) -> bool:
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

"""The shape of an offsets file, checked before anything is sent (pure: no I/O).

Connect checks little of a `PATCH /connectors/{c}/offsets` body itself: a file without its
`offsets` list once stopped the connector and then got a 500, and a MirrorMaker 2 partition with
a misspelt key would be written as a new partition that nothing ever reads. So every file is
checked here first, and a bad one is exit 2 with nothing sent:

- KIP-875: an object whose `offsets` is a non-empty list of objects, each with a `partition`
  object and an `offset` that is an object or null (null removes the partition's offset).
  The same partition may not appear twice (which entry would win is not said anywhere).
- MirrorMaker 2 (Strimzi proposal 083; Kafka's MirrorUtils): the partition keys of each
  connector type, exactly: MirrorSourceConnector `cluster`, `topic` (strings), `partition`
  (a whole number >= 0), offset `{"offset": N}` with N >= 0; MirrorCheckpointConnector `group`,
  `topic`, `partition`, and offset 0 only (Kafka refuses any other: a checkpoint can only be
  reset); MirrorHeartbeatConnector `sourceClusterAlias`, `targetClusterAlias`, offset 0 only.

Errors name the entry (`offsets[2].partition.topic`); JSON syntax errors, line and column.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rollguard.shared.errors import ConfigError

SOURCE, CHECKPOINT, HEARTBEAT = (
    "MirrorSourceConnector",
    "MirrorCheckpointConnector",
    ("MirrorHeartbeatConnector"),
)


@dataclass(frozen=True, slots=True)
class Mm2Shape:
    """One MirrorMaker 2 connector type's partition: its keys (name -> kind) and whether the
    only offset it takes is 0."""

    keys: tuple[tuple[str, type], ...]
    zero_only: bool


MM2_SHAPES = {
    SOURCE: Mm2Shape((("cluster", str), ("topic", str), ("partition", int)), zero_only=False),
    CHECKPOINT: Mm2Shape((("group", str), ("topic", str), ("partition", int)), zero_only=True),
    HEARTBEAT: Mm2Shape((("sourceClusterAlias", str), ("targetClusterAlias", str)), True),
}


def mm2_type(connector: str) -> str:
    """The MirrorMaker 2 connector type in a connector's name (`east->west.MirrorSourceConnector`
    -> `MirrorSourceConnector`); ConfigError when the name has none."""
    kind = connector.rpartition(".")[2]
    if kind not in MM2_SHAPES:
        raise ConfigError(
            f"--connector {connector!r} is not a MirrorMaker 2 connector name (SOURCE->TARGET."
            f"{SOURCE}, .{CHECKPOINT} or .{HEARTBEAT}); `rollguard connect offsets` takes any "
            "connector"
        )
    return kind


def check_connector_name(connector: str) -> None:
    if not connector.strip() or any(ord(c) < 32 or ord(c) == 127 for c in connector):
        raise ConfigError(f"--connector {connector!r} is not a connector name")


def parse_offsets(text: str, where: str) -> Any:
    """The JSON of an offsets key; ConfigError with line and column when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None


def check_offsets(body: Any, where: str, mm2: str | None = None) -> list[dict[str, Any]]:
    """The entries of a KIP-875 body, each checked (and, for MirrorMaker 2 type `mm2`, its
    partition keys and offset); ConfigError naming `where` and the entry otherwise."""

    def bad(path: str, problem: str) -> ConfigError:
        return ConfigError(f"{where}: {path} {problem}; nothing was sent")

    if not isinstance(body, dict) or "offsets" not in body:
        raise bad("the body", 'is not an object with an "offsets" list (KIP-875)')
    entries = body["offsets"]
    if not isinstance(entries, list) or not entries:
        raise bad("offsets", "is not a non-empty list (KIP-875)")
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        at = f"offsets[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"partition", "offset"}:
            raise bad(at, 'is not an object with exactly "partition" and "offset"')
        partition, offset = entry["partition"], entry["offset"]
        if not isinstance(partition, dict) or not partition:
            raise bad(f"{at}.partition", "is not a non-empty object")
        if offset is not None and not isinstance(offset, dict):
            raise bad(f"{at}.offset", "is not an object or null")
        if mm2 is not None:
            _check_mm2(MM2_SHAPES[mm2], mm2, partition, offset, at, bad)
        key = json.dumps(partition, sort_keys=True)
        if key in seen:
            raise bad(at, f"repeats the partition of offsets[{seen[key]}]")
        seen[key] = i
    return entries


def _check_mm2(
    shape: Mm2Shape, kind: str, partition: dict[str, Any], offset: Any, at: str, bad: Any
) -> None:
    wanted = dict(shape.keys)
    if set(partition) != set(wanted):
        keys = ", ".join(k for k, _ in shape.keys)
        raise bad(
            f"{at}.partition",
            f"has keys {', '.join(sorted(partition))}; a {kind} partition has exactly {keys}",
        )
    for name, kind_of in shape.keys:
        value = partition[name]
        if kind_of is int:
            if not _whole(value):
                raise bad(f"{at}.partition.{name}", f"is {value!r}, not a whole number >= 0")
        elif not isinstance(value, str) or not value:
            raise bad(f"{at}.partition.{name}", f"is {value!r}, not a non-empty string")
    if offset is None:
        return  # a tombstone: removes the partition's offset
    if set(offset) != {"offset"} or not _whole(offset["offset"]):
        raise bad(f"{at}.offset", 'is not {"offset": N} with N a whole number >= 0')
    if shape.zero_only and offset["offset"] != 0:
        raise bad(
            f"{at}.offset.offset",
            f"is {offset['offset']}; a {kind} takes 0 only (its offsets can be reset, not moved)",
        )


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0

"""Reading the roller's event logs (`events-<rollId>.jsonl`,
rollguard.roller.roll.stores.journal): the complete lines after each file's cursor, each a row
of the dataset's events table
(rollguard.shared.dataset). Events are copied as the roller wrote them: an action this
collector does not know (a newer roller's) is kept."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollguard.shared.dataset import CANARY_COLUMNS, ColumnType
from rollguard.shared.errors import ConfigError
from rollguard.shared.wire import parse_time


@dataclass
class FileCursor:
    offset: int = 0
    inode: int = 0


@dataclass
class EventsResult:
    files: int = 0
    events: int = 0
    malformed: list[str] = field(default_factory=list)  # "file:line: why"
    other_clusters: dict[str, int] = field(default_factory=dict)  # cluster -> events left


def event_files(paths: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(path.glob("events-*.jsonl")))
        elif path.is_file():
            found.append(path)
        else:
            raise ConfigError(f"--events {path}: no such file or folder")
    return found


def read_events(
    files: Iterable[Path],
    cursors: dict[str, FileCursor],
    rows: list[dict[str, Any]],
    cluster: str | None = None,
) -> EventsResult:
    """Complete lines after each file's cursor in `cursors` (keyed by the resolved path, moved
    past what was read); a file replaced or cut short is read again. An event that names
    another cluster than `cluster` (rolls of several clusters share a --state-dir) is left out
    and counted; one that names none (an older roller's) is this cluster's."""
    result = EventsResult()
    for path in files:
        key = str(path.resolve())
        stat = path.stat()
        cursor = cursors.get(key, FileCursor())
        if cursor.inode != stat.st_ino or stat.st_size < cursor.offset:
            cursor = FileCursor(0, stat.st_ino)
        with path.open("rb") as handle:
            handle.seek(cursor.offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]  # a line being written stays for next time
        for line_no, line in enumerate(complete.splitlines(), 1):
            try:
                entry = json.loads(line)
                other = entry.get("cluster")
                if cluster is not None and other is not None and other != cluster:
                    result.other_clusters[str(other)] = result.other_clusters.get(str(other), 0) + 1
                    continue
                rows.append(_event_row(entry))
                result.events += 1
            except (ValueError, KeyError, TypeError) as exc:
                result.malformed.append(
                    f"{path} (after byte {cursor.offset}), line {line_no}: {exc}"
                )
        cursors[key] = FileCursor(cursor.offset + len(complete), stat.st_ino)
        result.files += 1
    return result


def _event_row(entry: dict[str, Any]) -> dict[str, Any]:
    """The event as a row of the events table (rollguard.shared.dataset.EVENTS)."""
    moment = parse_time(str(entry["ts"]))
    node = entry.get("node")
    return {
        "ts": int(moment.timestamp() * 1000),
        "rollId": str(entry["rollId"]),
        "node": None if node is None else str(node),
        "action": str(entry["action"]),
        "reason": str(entry.get("reason", "")),
        "seconds": _number(entry.get("seconds")),
        **{c.name: _count(entry.get(c.name)) for c in CANARY_COLUMNS if c.type is ColumnType.INT64},
        **{
            c.name: _number(entry.get(c.name))
            for c in CANARY_COLUMNS
            if c.type is ColumnType.FLOAT64
        },
    }


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None

"""`rollguard collect`: agents' recovery timelines and the roller's event logs, into a dataset
that Spark reads fast (Parquet, partitioned by cluster and UTC date; the tables' columns are
rollguard.shared.dataset's).

    OUT/timeline/cluster=C/date=YYYY-MM-DD/part-<run>.parquet   one row per timeline record
    OUT/events/cluster=C/date=YYYY-MM-DD/part-<run>.parquet     one row per roller event
    OUT/_collector/C.json                                      cursors (and a pending commit)

Every agent is pulled concurrently (at most --concurrency at once), page by page from its
cursor, each within --agent-deadline (`agents`): a down or slow agent delays nobody else, keeps
what it sent, and is named in the summary. Requests use the shared retry policy. The roller's
event logs are read from their own cursors (`events`).

A run commits in two steps, so that a collector killed at any moment neither loses nor doubles
records: the new files are written to a staging folder, then the state file (new cursors plus
the list of staged files) is replaced atomically, then the files are moved into the dataset and
the list is cleared. A run that finds a pending list finishes those moves first; staged files
not on any list (a run killed before its state was saved) are deleted, and their records,
still after the saved cursors, are pulled again. Records are unique on (node, bootId, seq).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.collect.agents import NodeCursor, NodeResult, describe, pull
from rollguard.roller.collect.events import EventsResult, FileCursor, event_files, read_events
from rollguard.roller.collect.schema import EVENTS_SCHEMA, TIMELINE_SCHEMA
from rollguard.roller.model import Node
from rollguard.shared.dataset import EVENTS, TIMELINE
from rollguard.shared.errors import ConfigError
from rollguard.shared.files import atomic_write
from rollguard.shared.timeline import MAX_LIMIT

__all__ = [
    "CollectResult",
    "Dataset",
    "EventsResult",
    "FileCursor",
    "NodeCursor",
    "NodeResult",
    "State",
    "collect",
    "describe",
]

STATE_VERSION = 1


# ---- state: cursors and the pending commit ------------------------------------------------


@dataclass
class State:
    nodes: dict[str, NodeCursor] = field(default_factory=dict)
    events: dict[str, FileCursor] = field(default_factory=dict)
    pending: list[tuple[str, str]] = field(default_factory=list)  # (staged, final), relative

    def to_json(self) -> bytes:
        body = {
            "version": STATE_VERSION,
            "nodes": {k: asdict(v) for k, v in sorted(self.nodes.items())},
            "events": {k: asdict(v) for k, v in sorted(self.events.items())},
            "pending": [list(p) for p in self.pending],
        }
        return json.dumps(body, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, where: Path) -> State:
        try:
            body = json.loads(data)
            version = body.get("version")
            state = cls(
                {k: NodeCursor(**v) for k, v in body["nodes"].items()},
                {k: FileCursor(**v) for k, v in body["events"].items()},
                [(str(a), str(b)) for a, b in body["pending"]],
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            problem = f"unreadable ({exc!r})"
        else:
            if version == STATE_VERSION:
                return state
            problem = f"version {version!r}, this collector writes {STATE_VERSION}"
        raise ConfigError(
            f"collector state {where}: {problem}; move it away to collect everything "
            "again (the report drops the duplicates)"
        )


class Dataset:
    """The dataset folder of one cluster: its state file, its lock, and two-step commits."""

    def __init__(self, root: Path, cluster: str) -> None:
        self.root = root
        self.cluster = cluster
        self.meta = root / "_collector"
        self.state_path = self.meta / f"{cluster}.json"
        self.staging = self.meta / f"staging-{cluster}"

    @contextmanager
    def locked(self) -> Iterator[State]:
        try:
            self.meta.mkdir(parents=True, exist_ok=True)
            lock = (self.meta / f"{self.cluster}.lock").open("a")
        except OSError as exc:
            raise ConfigError(f"cannot use dataset folder {self.root}: {exc.strerror}") from None
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ConfigError(
                    f"another `rollguard collect` is writing cluster {self.cluster} in {self.root}"
                ) from None
            yield self._recover()

    def _recover(self) -> State:
        state = State()
        if self.state_path.exists():
            state = State.from_json(self.state_path.read_bytes(), self.state_path)
        if state.pending:
            self._move(state.pending)
            state.pending = []
            atomic_write(self.state_path, state.to_json())
        if self.staging.exists():
            shutil.rmtree(self.staging)  # a run killed before its state was saved
        return state

    def _move(self, pending: Iterable[tuple[str, str]]) -> None:
        for staged, final in pending:
            source, target = self.root / staged, self.root / final
            if source.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                source.replace(target)

    def commit(
        self,
        state: State,
        timeline: list[dict[str, Any]],
        events: list[dict[str, Any]],
    ) -> list[str]:
        """Write the rows and the new cursors in `state`; the files written, relative."""
        run = datetime.now(UTC).strftime("%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:8]
        pending = []
        for table, rows, schema in (
            (TIMELINE.folder, timeline, TIMELINE_SCHEMA),
            (EVENTS.folder, events, EVENTS_SCHEMA),
        ):
            for date, day_rows in sorted(_by_date(rows).items()):
                final = Path(
                    table, f"cluster={self.cluster}", f"date={date}", f"part-{run}.parquet"
                )
                staged = self.staging.relative_to(self.root) / final
                _write_parquet(self.root / staged, day_rows, schema)
                pending.append((str(staged), str(final)))
        state.pending = pending
        atomic_write(self.state_path, state.to_json())
        self._move(pending)
        state.pending = []
        atomic_write(self.state_path, state.to_json())
        if self.staging.exists():
            shutil.rmtree(self.staging)
        return [final for _, final in pending]


def _by_date(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    days: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        day = datetime.fromtimestamp(row["ts"] / 1000, UTC).strftime("%Y-%m-%d")
        days.setdefault(day, []).append(row)
    return days


def _write_parquet(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, path, compression="zstd")
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


# ---- one run ------------------------------------------------------------------------------


@dataclass
class CollectResult:
    nodes: list[NodeResult]
    events: EventsResult
    files: list[str]
    seconds: float

    @property
    def failed(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.status != "ok"]


async def collect(
    client: AgentClient,
    nodes: list[Node],
    dataset: Dataset,
    *,
    events: list[Path],
    concurrency: int,
    page_size: int,
    deadline: float,
) -> CollectResult:
    started = time.monotonic()
    if not 1 <= page_size <= MAX_LIMIT:
        raise ConfigError(f"--page-size must be 1 to {MAX_LIMIT}")
    files = event_files(events)
    with dataset.locked() as state:
        gate = asyncio.Semaphore(concurrency)
        rows: list[dict[str, Any]] = []

        async def one(node: Node) -> NodeResult:
            cursor = state.nodes.setdefault(node.name, NodeCursor())
            async with gate:
                return await pull(
                    client, node, cursor, page_size=page_size, deadline=deadline, rows=rows
                )

        results = list(await asyncio.gather(*(one(n) for n in nodes if n.agent_url)))
        event_rows: list[dict[str, Any]] = []
        events_result = read_events(files, state.events, event_rows, dataset.cluster)
        written = dataset.commit(state, rows, event_rows)
    return CollectResult(results, events_result, written, time.monotonic() - started)

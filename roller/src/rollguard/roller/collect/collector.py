"""`rollguard collect`: agents' recovery timelines and the roller's event logs, into a dataset
that Spark reads fast (Parquet, partitioned by cluster and UTC date).

    OUT/timeline/cluster=C/date=YYYY-MM-DD/part-<run>.parquet   one row per timeline record
    OUT/events/cluster=C/date=YYYY-MM-DD/part-<run>.parquet     one row per roller event
    OUT/_collector/C.json                                      cursors (and a pending commit)

Every agent is pulled concurrently (at most --concurrency at once), page by page from its
cursor, each within --agent-deadline: a down or slow agent delays nobody else, keeps what it
sent, and is named in the summary. Requests use the shared retry policy.

A run commits in two steps, so that a collector killed at any moment neither loses nor doubles
records: the new files are written to a staging folder, then the state file (new cursors plus
the list of staged files) is replaced atomically, then the files are moved into the dataset and
the list is cleared. A run that finds a pending list finishes those moves first; staged files
not on any list (a run killed before its state was saved) are deleted, and their records,
still after the saved cursors, are pulled again. Records are unique on (node, bootId, seq).

When an agent's journal starts again (its data was lost: the agent's latest seq is below the
cursor, or another node id answers), the node's `journal` number goes up by one and it is read
from the start; the report orders records by (journal, seq).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import math
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

from rollguard.roller.agent_client import AgentClient, AgentUnavailable
from rollguard.roller.model import Node
from rollguard.shared.errors import ConfigError
from rollguard.shared.files import atomic_write
from rollguard.shared.timeline import MAX_LIMIT, TimelineRecord
from rollguard.shared.wire import format_time, parse_time

STATE_VERSION = 1

TIMELINE_SCHEMA = pa.schema(
    [
        pa.field("node", pa.string(), nullable=False),
        pa.field("nodeId", pa.string()),
        pa.field("journal", pa.int32(), nullable=False),
        pa.field("bootId", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("brokerState", pa.int32()),
        pa.field("remainingLogsToRecover", pa.int32()),
        pa.field("remainingSegmentsToRecover", pa.int32()),
        # "loading" / "recovering" (rollguard.shared.wire.RecoveryPhase), or "none": a sample
        # without a recovery object (rollguard.shared.timeline); null without a sample, from
        # older agents, and in datasets collected before it: readers then judge the record
        # by its state and counters alone
        pa.field("recoveryPhase", pa.string()),
    ]
)
EVENTS_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("rollId", pa.string(), nullable=False),
        pa.field("node", pa.string()),
        pa.field("action", pa.string(), nullable=False),
        pa.field("reason", pa.string()),
        # a figure some events carry: `roll-predicted` the predicted roll, `roll-completed` the
        # actual one (seconds); null for the others and in datasets collected before it
        pa.field("seconds", pa.float64()),
    ]
)


# ---- state: cursors and the pending commit ------------------------------------------------


@dataclass
class NodeCursor:
    after: int = 0
    journal: int = 0
    node_id: str | None = None


@dataclass
class FileCursor:
    offset: int = 0
    inode: int = 0


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
            ("timeline", timeline, TIMELINE_SCHEMA),
            ("events", events, EVENTS_SCHEMA),
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


# ---- pulling agents -----------------------------------------------------------------------


@dataclass
class NodeResult:
    node: str
    url: str
    status: str = "ok"  # ok, unavailable, timed-out
    records: int = 0
    pages: int = 0
    after: int = 0
    message: str = ""
    expired: list[tuple[int, int]] = field(default_factory=list)
    # Records the agent could not write (a full disk): (fromTs, toTs, records), from gap markers
    # in the journal and from a page saying writes are failing now.
    unwritten: list[tuple[int, int, int]] = field(default_factory=list)
    reset: bool = False
    seconds: float = 0.0


async def pull(
    client: AgentClient,
    node: Node,
    cursor: NodeCursor,
    *,
    page_size: int,
    deadline: float,
    rows: list[dict[str, Any]],
) -> NodeResult:
    """Pages after the node's cursor, until caught up, failed or out of time. Rows go into
    `rows` as they arrive (so a slow agent keeps what it sent); `cursor` moves with them."""
    assert node.agent_url is not None
    result = NodeResult(node.name, node.agent_url, after=cursor.after)
    started = time.monotonic()
    reset_done = False
    try:
        async with asyncio.timeout(deadline):
            while True:
                page = await client.timeline(node.agent_url, cursor.after, page_size)
                if isinstance(page, AgentUnavailable):
                    status = f"HTTP {page.status}" if page.status else "no HTTP answer"
                    result.status = "unavailable"
                    result.message = f"{status}, {page.reason}: {page.message}"
                    break
                result.pages += 1
                other = page.records and cursor.node_id not in (None, page.records[0].node_id)
                if (page.latest < cursor.after or other) and not reset_done:
                    # The agent's journal started again (its data was lost, or it is another
                    # node's): a new journal number, read from the start.
                    cursor.journal, cursor.after, cursor.node_id = cursor.journal + 1, 0, None
                    result.reset = reset_done = True
                    continue
                if page.expired is not None:
                    result.expired.append(page.expired)
                new = [r for r in page.records if r.seq > cursor.after]
                for gap in (page.unwritten, *(r.unwritten for r in new)):
                    entry = (gap.from_ts, gap.to_ts, gap.records) if gap is not None else None
                    if entry is not None and entry not in result.unwritten:
                        result.unwritten.append(entry)
                for record in page.records:
                    if record.seq > cursor.after:
                        rows.append(_row(node.name, cursor.journal, record))
                        cursor.after, cursor.node_id = record.seq, record.node_id
                        result.records += 1
                if not page.records or cursor.after >= page.latest:
                    break
    except TimeoutError:
        result.status = "timed-out"
        result.message = f"not caught up within --agent-deadline {deadline:g}s; kept what came"
    result.after, result.seconds = cursor.after, time.monotonic() - started
    return result


def _row(node: str, journal: int, record: TimelineRecord) -> dict[str, Any]:
    return {
        "node": node,
        "nodeId": record.node_id,
        "journal": journal,
        "bootId": record.boot_id,
        "seq": record.seq,
        "ts": record.ts,
        "brokerState": record.broker_state,
        "remainingLogsToRecover": record.remaining_logs,
        "remainingSegmentsToRecover": record.remaining_segments,
        "recoveryPhase": None if record.recovery_phase is None else str(record.recovery_phase),
    }


# ---- roller event logs ----------------------------------------------------------------


@dataclass
class EventsResult:
    files: int = 0
    events: int = 0
    malformed: list[str] = field(default_factory=list)  # "file:line: why"


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


def read_events(files: Iterable[Path], state: State, rows: list[dict[str, Any]]) -> EventsResult:
    """Complete lines after each file's cursor; a file replaced or cut short is read again."""
    result = EventsResult()
    for path in files:
        key = str(path.resolve())
        stat = path.stat()
        cursor = state.events.get(key, FileCursor())
        if cursor.inode != stat.st_ino or stat.st_size < cursor.offset:
            cursor = FileCursor(0, stat.st_ino)
        with path.open("rb") as handle:
            handle.seek(cursor.offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]  # a line being written stays for next time
        for line_no, line in enumerate(complete.splitlines(), 1):
            try:
                rows.append(_event_row(json.loads(line)))
                result.events += 1
            except (ValueError, KeyError, TypeError) as exc:
                result.malformed.append(
                    f"{path} (after byte {cursor.offset}), line {line_no}: {exc}"
                )
        state.events[key] = FileCursor(cursor.offset + len(complete), stat.st_ino)
        result.files += 1
    return result


def _event_row(entry: dict[str, Any]) -> dict[str, Any]:
    moment = parse_time(str(entry["ts"]))
    node = entry.get("node")
    return {
        "ts": int(moment.timestamp() * 1000),
        "rollId": str(entry["rollId"]),
        "node": None if node is None else str(node),
        "action": str(entry["action"]),
        "reason": str(entry.get("reason", "")),
        "seconds": _number(entry.get("seconds")),
    }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


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
        events_result = read_events(files, state, event_rows)
        written = dataset.commit(state, rows, event_rows)
    return CollectResult(results, events_result, written, time.monotonic() - started)


def _utc(ms: int) -> str:
    return format_time(datetime.fromtimestamp(ms / 1000, UTC))


def describe(result: NodeResult) -> str:
    text = f"{result.status}: {result.records} new records in {result.pages} pages"
    text += f", cursor {result.after}"
    if result.reset:
        text += "; the agent's journal started again (new journal number), read from the start"
    for first, last in result.expired:
        text += f"; GAP: records {first}-{last} expired on the agent before they were collected"
    for start, end, count in result.unwritten:
        text += (
            f"; GAP: {count} records from {_utc(start)} to {_utc(end)} were never written "
            "(the agent's disk was failing)"
        )
    if result.message:
        text += f"; {result.message}"
    return text

"""The recovery timeline: a durable, append-only journal of broker-state records.

The agent appends a record whenever the broker state or the recovery counters change (and a
heartbeat now and then while RUNNING); the collector pulls them with
`GET /v1/recovery-timeline?after=SEQ`. The format lives here because both sides read it.

On disk: JSON lines in segment files `timeline-<first seq, 20 digits>.jsonl` in one folder.
`append` returns once the line is fsynced: that is what "acknowledged" means. A line torn by a
kill -9 (no final newline, or not JSON) can only be the last one; it is cut off when the journal
is opened, so nothing acknowledged is ever lost and nothing half-written is ever served.
Segments rotate by size and expire, whole, by age; `seq` is strictly increasing per node and
continues across agent restarts.

A write that fails or is short (a full disk) raises OSError and is cut back at once, so the next
record never lands glued to torn bytes. Records that could not be written take no seq; instead
the journal reports them as a gap, `unwritten` {fromTs, toTs, records}: on every page while the
writes fail, and, once a write succeeds again, in a marker record written before it (its
`brokerState` is null: what the broker did meanwhile is not known), so the gap stays in the
history. Readers that ignore the field see an unknown state for that time.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollguard.shared.errors import WireFormatError

PREFIX, SUFFIX = "timeline-", ".jsonl"
TIMELINE_PATH = "/v1/recovery-timeline"
MAX_LIMIT = 10000  # records in one page


@dataclass(frozen=True, slots=True)
class Gap:
    """Records the journal could not write (a full or failing disk): when, and how many."""

    from_ts: int  # UTC epoch milliseconds of the first record not written
    to_ts: int  # ... and of the last
    records: int

    def to_wire(self) -> dict[str, int]:
        return {"fromTs": self.from_ts, "toTs": self.to_ts, "records": self.records}

    @classmethod
    def from_wire(cls, data: object) -> Gap:
        if not isinstance(data, dict):
            raise WireFormatError(f"'unwritten' must be an object, got {data!r:.80}")
        try:
            return cls(int(data["fromTs"]), int(data["toTs"]), int(data["records"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise WireFormatError(f"malformed 'unwritten': {exc!r}") from exc

    def extended(self, ts: int) -> Gap:
        return Gap(self.from_ts, ts, self.records + 1)


@dataclass(frozen=True, slots=True)
class TimelineRecord:
    node_id: str
    boot_id: str
    seq: int
    ts: int  # UTC epoch milliseconds
    broker_state: int | None  # None: the agent had no usable sample (JMX down, broker gone)
    remaining_logs: int | None = None
    remaining_segments: int | None = None
    unwritten: Gap | None = None  # set on a gap marker: records lost to a failing disk

    def to_wire(self) -> dict[str, Any]:
        body = {
            "nodeId": self.node_id,
            "bootId": self.boot_id,
            "seq": self.seq,
            "ts": self.ts,
            "brokerState": self.broker_state,
            "remainingLogsToRecover": self.remaining_logs,
            "remainingSegmentsToRecover": self.remaining_segments,
        }
        if self.unwritten is not None:
            body["unwritten"] = self.unwritten.to_wire()
        return body

    @classmethod
    def from_wire(cls, data: object) -> TimelineRecord:
        if not isinstance(data, dict):
            raise WireFormatError(f"timeline record must be an object, got {data!r:.80}")
        try:
            record = cls(
                str(data["nodeId"]),
                str(data["bootId"]),
                int(data["seq"]),
                int(data["ts"]),
                _optional_int(data.get("brokerState")),
                _optional_int(data.get("remainingLogsToRecover")),
                _optional_int(data.get("remainingSegmentsToRecover")),
                Gap.from_wire(data["unwritten"]) if data.get("unwritten") is not None else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise WireFormatError(f"malformed timeline record: {exc}") from exc
        return record

    def same_state(self, other: TimelineRecord | None) -> bool:
        return other is not None and (
            self.broker_state,
            self.remaining_logs,
            self.remaining_segments,
        ) == (other.broker_state, other.remaining_logs, other.remaining_segments)


def _optional_int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not an integer")
    return value


@dataclass(frozen=True, slots=True)
class Page:
    records: list[TimelineRecord]
    next_cursor: int  # pass as `after` to get what follows
    earliest: int | None  # smallest seq still kept
    latest: int  # largest seq written (0: none yet)
    expired: tuple[int, int] | None  # seqs asked for that have expired (first, last)
    unwritten: Gap | None = None  # records failing to be written right now (a full disk)

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "records": [r.to_wire() for r in self.records],
            "next": self.next_cursor,
            "earliest": self.earliest,
            "latest": self.latest,
        }
        if self.expired is not None:
            # Records the caller asked for no longer exist: say so, so a gap is reported.
            body["expired"] = {"fromSeq": self.expired[0], "toSeq": self.expired[1]}
        if self.unwritten is not None:
            # Records are being lost now: the gap is not in the history yet (see the module).
            body["unwritten"] = self.unwritten.to_wire()
        return body

    @classmethod
    def from_wire(cls, data: object) -> Page:
        if not isinstance(data, dict) or not isinstance(data.get("records"), list):
            raise WireFormatError(f"a timeline page must be an object with records: {data!r:.80}")
        try:
            expired = data.get("expired")
            unwritten = data.get("unwritten")
            return cls(
                [TimelineRecord.from_wire(r) for r in data["records"]],
                int(data["next"]),
                _optional_int(data.get("earliest")),
                int(data["latest"]),
                (int(expired["fromSeq"]), int(expired["toSeq"])) if expired else None,
                Gap.from_wire(unwritten) if unwritten is not None else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise WireFormatError(f"malformed timeline page: {exc!r}") from exc


class TimelineJournal:
    def __init__(
        self,
        folder: Path,
        *,
        segment_bytes: int = 1 << 20,
        retention_seconds: float = 7 * 86400,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.folder = folder
        self.segment_bytes = segment_bytes
        self.retention_seconds = retention_seconds
        self._clock = clock
        self._lock = threading.Lock()
        folder.mkdir(parents=True, exist_ok=True)
        self.last: TimelineRecord | None = None
        self.unwritten: Gap | None = None  # records not written since the last good write
        self._torn: tuple[Path, int] | None = None  # bytes of a failed write not yet cut off
        self._repair_and_load_last()

    # ---- files --------------------------------------------------------------------------
    def segments(self) -> list[tuple[int, Path]]:
        found = []
        for path in self.folder.glob(f"{PREFIX}*{SUFFIX}"):
            digits = path.name[len(PREFIX) : -len(SUFFIX)]
            if digits.isdigit():
                found.append((int(digits), path))
        return sorted(found)

    def _repair_and_load_last(self) -> None:
        """Cut a torn last line (kill -9 mid-write) and remember the last good record."""
        segments = self.segments()
        while segments:
            _, path = segments[-1]
            data = path.read_bytes()
            good = data[: data.rfind(b"\n") + 1]
            lines = good.splitlines()
            while lines:
                try:
                    self.last = TimelineRecord.from_wire(json.loads(lines[-1]))
                    break
                except (ValueError, WireFormatError):
                    lines.pop()  # only the tail can be damaged: an fsynced line never is
            good = b"".join(line + b"\n" for line in lines)
            if good != data:
                with path.open("r+b") as handle:
                    handle.truncate(len(good))
                    os.fsync(handle.fileno())
            if self.last is not None:
                return
            path.unlink()  # a segment holding nothing acknowledged
            segments.pop()

    @property
    def last_seq(self) -> int:
        return self.last.seq if self.last is not None else 0

    # ---- writing ------------------------------------------------------------------------
    def append(
        self,
        node_id: str,
        boot_id: str,
        ts: int,
        broker_state: int | None,
        logs: int | None,
        segments: int | None,
    ) -> TimelineRecord:
        """Write the next record and fsync it; returns it once it is acknowledged.

        OSError if it could not be written (nothing of it is left in the journal); the record
        then counts in `unwritten`, and the next record that is written follows a gap marker."""
        with self._lock:
            try:
                self._cut_torn()
                if self.unwritten is not None:
                    gap = self.unwritten
                    self._write(TimelineRecord(node_id, boot_id, self.last_seq + 1, gap.from_ts,
                                               None, None, None, gap))  # fmt: skip
                    self.unwritten = None
                record = TimelineRecord(
                    node_id, boot_id, self.last_seq + 1, ts, broker_state, logs, segments
                )
                self._write(record)
            except OSError:
                self.unwritten = self.unwritten.extended(ts) if self.unwritten else Gap(ts, ts, 1)
                raise
            return record

    def _write(self, record: TimelineRecord) -> None:
        line = (json.dumps(record.to_wire(), separators=(",", ":")) + "\n").encode()
        current = self.segments()
        if not current or current[-1][1].stat().st_size + len(line) > self.segment_bytes:
            path = self.folder / f"{PREFIX}{record.seq:020d}{SUFFIX}"
            self._expire()
        else:
            path = current[-1][1]
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                _write_all(fd, line)
                os.fsync(fd)
            except OSError:
                self._cut(fd, path, size)
                raise
        finally:
            os.close(fd)
        self.last = record

    def _cut(self, fd: int, path: Path, size: int) -> None:
        """Take a failed write's bytes off the end of `path` (or remember to)."""
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        except OSError:
            self._torn = (path, size)

    def _cut_torn(self) -> None:
        """Before the next write: cut what a failed write left and could not cut then."""
        if self._torn is None:
            return
        path, size = self._torn
        try:
            with path.open("r+b") as handle:
                if os.fstat(handle.fileno()).st_size > size:
                    handle.truncate(size)
                    os.fsync(handle.fileno())
        except FileNotFoundError:
            pass  # expired meanwhile: nothing left to cut
        self._torn = None

    def _expire(self) -> None:
        """Delete whole segments whose newest record is older than the retention."""
        horizon = (self._clock() - self.retention_seconds) * 1000
        # The newest segment is never deleted: it holds the last seq, which must survive.
        for _, path in self.segments()[:-1]:
            newest = _last_record(path)
            if newest is not None and newest.ts < horizon:
                path.unlink()
            else:
                break

    # ---- reading ------------------------------------------------------------------------
    def read(self, after: int, limit: int) -> Page:
        with self._lock:
            latest = self.last_seq
            segments = self.segments()
            unwritten = self.unwritten
        earliest = segments[0][0] if segments else None
        expired = None
        if earliest is not None and after + 1 < earliest:
            expired = (after + 1, earliest - 1)
        records: list[TimelineRecord] = []
        for index, (_, path) in enumerate(segments):
            following = segments[index + 1][0] if index + 1 < len(segments) else None
            if following is not None and following <= after + 1:
                continue  # every record in this segment is at or before the cursor
            for line in path.read_bytes().splitlines():
                try:
                    record = TimelineRecord.from_wire(json.loads(line))
                except (ValueError, WireFormatError):
                    continue  # a line being written right now
                if record.seq > after:
                    records.append(record)
                    if len(records) >= limit:
                        break
            if len(records) >= limit:
                break
        next_cursor = records[-1].seq if records else max(after, earliest - 1 if earliest else 0)
        return Page(records, next_cursor, earliest, latest, expired, unwritten)


def _write_all(fd: int, line: bytes) -> None:
    written = os.write(fd, line)
    if written != len(line):  # a full disk: the rest would fail with ENOSPC
        raise OSError(errno.ENOSPC, f"wrote {written} of {len(line)} bytes")


def _last_record(path: Path) -> TimelineRecord | None:
    for line in reversed(path.read_bytes().splitlines()):
        try:
            return TimelineRecord.from_wire(json.loads(line))
        except (ValueError, WireFormatError):
            continue
    return None

"""The agent's durable recovery timeline: append-only segment files in `--data-dir`.

What to record and when is `rollguard.agent.timeline_recorder`'s; the format of records, pages
and file names is `rollguard.shared.timeline`'s (the collector reads it too). This module is the
writer and the page reader behind `GET /v1/recovery-timeline`.

`append` returns once the line is fsynced: that is what "acknowledged" means. A line torn by a
kill -9 (no final newline, or not JSON) can only be the last one; it is cut off when the store
is opened, so nothing acknowledged is ever lost and nothing half-written is ever served.
Segments rotate by size and expire, whole, by age; `seq` is strictly increasing per node and
continues across agent restarts.

A write that fails or is short (a full disk) raises OSError and is cut back at once, so the next
record never lands glued to torn bytes. Records that could not be written take no seq; the store
counts them as a gap (`unwritten`), serves it on every page while writes fail, and writes it as
a marker record before the next record that is written.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rollguard.shared.errors import WireFormatError
from rollguard.shared.timeline import (
    PREFIX,
    SUFFIX,
    Gap,
    Page,
    TimelinePhase,
    TimelineRecord,
    segment_name,
    segment_seq,
)


class TimelineStore:
    """The agent's timeline in one folder of segment files; thread-safe (one lock)."""

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
        """The segment files, oldest first, with the seq each one starts at."""
        found = []
        for path in self.folder.glob(f"{PREFIX}*{SUFFIX}"):
            first = segment_seq(path.name)
            if first is not None:
                found.append((first, path))
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
        phase: TimelinePhase | None = None,
    ) -> TimelineRecord:
        """Write the next record and fsync it; returns it once it is acknowledged. `phase`:
        the recovery's, NO_RECOVERY for a sample without one, None only without a sample
        (rollguard.shared.timeline).

        OSError if it could not be written (nothing of it is left on disk); the record
        then counts in `unwritten`, and the next record that is written follows a gap marker."""
        with self._lock:
            try:
                self._cut_torn()
                if self.unwritten is not None:
                    gap = self.unwritten
                    self._write(
                        TimelineRecord(
                            node_id, boot_id, self.last_seq + 1, gap.from_ts, None, None, None, gap
                        )
                    )
                    self.unwritten = None
                record = TimelineRecord(
                    node_id,
                    boot_id,
                    self.last_seq + 1,
                    ts,
                    broker_state,
                    logs,
                    segments,
                    recovery_phase=phase,
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
            path = self.folder / segment_name(record.seq)
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

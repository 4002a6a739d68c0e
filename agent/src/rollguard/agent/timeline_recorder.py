"""What goes into the recovery timeline, and when; `rollguard.agent.timeline_store` writes it.

A record is appended when the broker state, a recovery counter or the recovery's phase changes
(a loading that turns out to be a recovery is worth a record of its own), when the agent loses
or regains its samples, on the first sample of every agent start (a new boot), and as a
heartbeat every `--heartbeat-interval` seconds while nothing changes. Writes (each fsynced) run
on one worker thread, in order, so the event loop never waits for the disk.

A write that fails (a full disk) is counted (`rollguard_timeline_write_errors_total`) and the
store serves the records it lost as a gap (`rollguard.shared.timeline.Gap`); `/v1/broker-state`
does not depend on the disk and keeps serving. The log gets one line when writes start failing
and one when they work again, not one per record. While they fail, every round tries again, so
writing resumes within a round of space coming back.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from rollguard.agent.sampler import Sample, Unavailable
from rollguard.agent.timeline_store import TimelineStore
from rollguard.shared.timeline import NO_RECOVERY, TimelinePhase

logger = logging.getLogger(__name__)

# What a record says about the broker: state, logs and segments left, and the recovery's phase.
Values = tuple[int | None, int | None, int | None, TimelinePhase | None]


def _values(outcome: Sample | Unavailable) -> Values:
    """Without a sample, nothing is known (every value null); with one, the phase is always
    set: NO_RECOVERY says the broker is not loading its logs, which a null phase (an agent
    older than the field) cannot."""
    if isinstance(outcome, Unavailable):
        return None, None, None, None
    recovery = outcome.report.recovery
    return (
        int(outcome.report.broker_state),
        recovery.remaining_logs if recovery else None,
        recovery.remaining_segments if recovery else None,
        recovery.phase if recovery else NO_RECOVERY,
    )


class TimelineRecorder:
    """A sampler listener that turns outcomes into records and queues them for the store."""

    def __init__(
        self,
        store: TimelineStore,
        node_id: str,
        *,
        heartbeat: float = 300.0,
        clock: Callable[[], float] = time.time,
        boot_id: str | None = None,
        on_write_error: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.boot_id = boot_id or uuid.uuid4().hex
        self.heartbeat = heartbeat
        self._on_write_error = on_write_error
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="timeline")
        self._last_values: Values | None = None
        self._last_written = 0.0
        self._pending: Future[object] | None = None
        self.errors = 0
        self.failing = False  # the latest write failed (read by the loop, set by the writer)
        self._failed_since_ok = 0

    def update(self, previous: Sample | Unavailable, latest: Sample | Unavailable) -> None:
        """A sampler listener: decide whether this outcome is a record, and queue it."""
        values = _values(latest)
        now = self._clock()
        changed = values != self._last_values or self.failing
        if not changed and now - self._last_written < self.heartbeat:
            return
        self._last_values, self._last_written = values, now
        self._pending = self._executor.submit(self._write, int(now * 1000), values)

    def _write(self, ts: int, values: Values) -> None:
        try:
            self.store.append(self.node_id, self.boot_id, ts, *values)
        except OSError as exc:
            self.errors += 1
            self._failed_since_ok += 1
            self._on_write_error()
            if not self.failing:
                self.failing = True
                logger.error(
                    "cannot write the recovery timeline in %s: %s; the records it loses are "
                    "served as a gap, and writing resumes when it works again",
                    self.store.folder,
                    exc.strerror or exc,
                )
            return
        if self.failing:
            self.failing = False
            logger.warning(
                "the recovery timeline in %s is written again; %d records were lost and are "
                "marked as a gap",
                self.store.folder,
                self._failed_since_ok,
            )
            self._failed_since_ok = 0

    async def flush(self) -> None:
        """Wait until every queued record is written (and fsynced)."""
        if self._pending is not None:
            await asyncio.wrap_future(self._pending)

    async def close(self) -> None:
        await self.flush()
        self._executor.shutdown(wait=True)

"""Progress of a log recovery, from successive agent reports: rate, ETA, stall (pure).

The roller never restarts a recovering broker. While it makes progress the roller waits, up to
`--max-recovery-wait`; when the remaining work has not gone down for `--stall-timeout`, the
recovery is stalled and the roller gives up on that node, still without restarting it.

What the figures mean on a real broker decides how they are used: `remainingLogsToRecover` is
the logs not yet loaded, summed over dirs, and only goes down; `remainingSegmentsToRecover` is
the segments left in the logs the recovery threads are on now, and rises each time a thread
starts its next log. So progress, rate and ETA are counted in logs; a fall of segments while the
log count stands still is progress too (a thread inside one big log), but never a rate.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from rollguard.shared.converters import format_duration


class Verdict(StrEnum):
    PROGRESSING = "progressing"
    STALLED = "stalled"
    TOO_LONG = "too-long"


@dataclass(frozen=True, slots=True)
class Point:
    at: float  # seconds, on the roller's clock
    logs: int
    segments: int


@dataclass(frozen=True, slots=True)
class RecoveryTracker:
    """One recovery's reports so far (each `observe` gives the tracker with one more); ask it
    for rate, ETA and a verdict."""

    stall_timeout: float
    max_wait: float
    started: float  # when the roller first saw the broker in RECOVERY
    points: tuple[Point, ...] = ()

    def observe(self, at: float, logs: int, segments: int) -> RecoveryTracker:
        return replace(self, points=(*self.points, Point(at, logs, segments)))

    def last_progress_at(self) -> float:
        """When the remaining work last went down (the start, if it never did): fewer logs,
        or as many logs and fewer segments in them."""
        if not self.points:
            return self.started
        moment = self.points[0].at
        for previous, point in zip(self.points, self.points[1:], strict=False):
            fewer_logs = point.logs < previous.logs
            if fewer_logs or (point.logs == previous.logs and point.segments < previous.segments):
                moment = point.at
        return moment

    def rate(self, window: float = 60.0) -> float | None:
        """Logs recovered per second over the last `window` seconds, or None if unknown."""
        if len(self.points) < 2:
            return None
        last = self.points[-1]
        first = next(p for p in self.points if p.at >= last.at - window)
        if first is last:
            first = self.points[-2]
        elapsed = last.at - first.at
        done = first.logs - last.logs
        if elapsed <= 0 or done <= 0:
            return 0.0 if elapsed > 0 else None
        return done / elapsed

    def eta(self) -> float | None:
        """Seconds until the remaining logs are recovered at the current rate."""
        rate = self.rate()
        if not rate or not self.points:
            return None
        return self.points[-1].logs / rate

    def verdict(self, now: float) -> Verdict:
        if now - self.last_progress_at() >= self.stall_timeout:
            return Verdict.STALLED
        if now - self.started >= self.max_wait:
            return Verdict.TOO_LONG
        return Verdict.PROGRESSING

    def describe(self) -> str:
        if not self.points:
            return "no recovery figures yet"
        last = self.points[-1]
        text = (
            f"{last.logs} logs left to recover ({last.segments} segments in the logs being "
            "recovered)"
        )
        rate, eta = self.rate(), self.eta()
        if rate:
            text += f", {rate * 60:.1f} logs/min"
        if eta is not None:
            text += f", ETA {format_duration(eta)}"
        return text

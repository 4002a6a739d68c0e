"""The budgets a node's record carries while the roll waits for it (frozen values, with their
own arithmetic and no rule): its readiness (`ReadyWait`) and its log recovery
(`RecoveryTracker`). The cluster's budgets (--safety-wait) are `rules/budgets.py`.

**Readiness** (`ReadyWait`): `--operation-timeout` is how long the roller waits for a node's next
step, not for its whole journey. A broker back from a restart goes through its stages at its own
pace: a new process, STARTING, a log recovery of seconds or hours, seconds more in STARTING
while it catches up with the metadata log and registers, RECOVERY, RUNNING. Counted from the
restart, a recovery longer than the timeout would end the roll the moment it completed, the very
case the roller exists for. So the budget starts again at each step forward: a new process (the
first one seen), a BrokerState further on than any seen since (NOT_RUNNING < STARTING <
RECOVERY < RUNNING), the end of a log recovery (by a readable answer). Past the node's recovery
budget plus the operation timeout from the start (`limit`), nothing counts as progress, so a
node that crash-loops through recoveries still fails. The same record serves a node found not
ready before its restart: one that ends a long recovery of its own is not force-restarted.

**A log recovery** (`RecoveryTracker`): never restarted. While it makes progress the roller
waits, up to `--max-recovery-wait`; when the remaining work has not gone down for
`--stall-timeout` it is stalled and the roller gives up on that node, still without restarting
it. On a real broker `remainingLogsToRecover` is the logs not yet loaded, summed over dirs, and
only goes down; `remainingSegmentsToRecover` is the segments left in the logs the recovery
threads are on now, and rises each time a thread starts its next log. So progress, rate and ETA
are counted in logs; a fall of segments while the log count stands still is progress too (a
thread inside one big log), but never a rate.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from rollguard.roller.model import AgentAnswer, AgentReport, is_recovering
from rollguard.shared.converters import format_duration
from rollguard.shared.states import BrokerState

# The order a starting broker goes through; a state outside it is never a step forward.
FORWARD = (BrokerState.NOT_RUNNING, BrokerState.STARTING, BrokerState.RECOVERY, BrokerState.RUNNING)


@dataclass(frozen=True, slots=True)
class ReadyWait:
    """One node waited for to become ready: since when, and the last progress seen."""

    started: float  # the restart, or the first poll that found the node not ready
    limit: float  # seconds from `started` after which nothing counts as progress
    instance: str | None = None  # the process at the start (None: not known)
    progress_at: float = 0.0  # the last progress (the start, until there is one)
    since: str = "its restart"  # what that progress was, for the messages
    new_process: bool = False  # a process other than `instance` has been seen
    furthest: BrokerState | None = None  # the furthest state seen, in FORWARD's order
    recovering: bool = False  # in log recovery at the last readable answer

    @classmethod
    def start(
        cls, now: float, instance: str | None, limit: float, since: str = "its restart"
    ) -> ReadyWait:
        return cls(now, limit, instance, progress_at=now, since=since)

    def waited(self, now: float) -> float:
        """Seconds since the last progress: what the operation timeout is judged against."""
        return now - self.progress_at

    def observe(self, now: float, instance: str | None, answer: AgentAnswer | None) -> ReadyWait:
        """The record after one look at the node: its process (`instance`, None: not known)
        and its agent's answer."""
        progress: str | None = None
        new_process = self.new_process
        furthest, recovering = self.furthest, self.recovering
        if not new_process and instance is not None and instance != self.instance:
            new_process, furthest, progress = True, None, "its new process started"
        if isinstance(answer, AgentReport):
            state = answer.report.broker_state
            if state in FORWARD and (furthest is None or _rank(state) > _rank(furthest)):
                progress = progress or f"it reached {state.name}"
                furthest = state
            now_recovering = is_recovering(answer)
            if recovering and not now_recovering:
                progress = "its log recovery ended"
            recovering = now_recovering
        if progress is None or now - self.started >= self.limit:
            return replace(self, new_process=new_process, furthest=furthest, recovering=recovering)
        return replace(
            self,
            new_process=new_process,
            furthest=furthest,
            recovering=recovering,
            progress_at=now,
            since=progress,
        )


def _rank(state: BrokerState) -> int:
    return FORWARD.index(state)


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

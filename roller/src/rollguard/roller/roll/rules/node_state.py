"""What the roll knows and decides about one node, as frozen values (the arithmetic of their
own budgets, no rule): the actions the rules choose (`Restart`, `Defer`, `AwaitRecovery`, ...),
the record kept between two looks at a node the roll waits for (`NodeWait`, with the readiness
and log-recovery budgets it carries: `ReadyWait`, `RecoveryTracker`), and the outcome of one
look (`Step`). The one pure `step` that moves a record on is `node_wait.py`.

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

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import ClassVar

from rollguard.roller.model import AgentAnswer, AgentReport, is_recovering
from rollguard.roller.roll.rules.budgets import Budget
from rollguard.roller.roll.rules.safety import Baseline, Blocker
from rollguard.shared.converters import format_duration
from rollguard.shared.states import BrokerState

FORCE = "force"  # how every forced restart's reason begins: the events tell them by it
IN_SYNC = Baseline()  # in every ISR, its voter caught up: all a restart can take away


@dataclass(frozen=True, slots=True)
class Restart:
    reason: str  # a forced one begins with FORCE
    force: bool = False  # without the availability and quorum checks


class DeferKind(StrEnum):
    """Why a node is deferred, in a word: the `kind` of its `defer` events and a metrics label
    (a small fixed set, never the free text of the reason; never rename one)."""

    AVAILABILITY = "availability"  # a partition would go below min.insync.replicas or offline,
    # or is being reassigned
    QUORUM = "quorum"  # the KRaft quorum would lose its majority, or cannot be described
    ADMIN_API = "admin-api"  # the cluster cannot be observed through Kafka's Admin API
    GATE = "gate"  # a health gate of the whole roll is closed
    # another node of the roll is in log recovery: no node is restarted until it is back
    RECOVERING_PEER = "recovering-peer"
    OTHER = "other"  # no blocker said why (a batch holding the node back)


_SUBJECT_KINDS = {
    "quorum": DeferKind.QUORUM,
    "cluster": DeferKind.ADMIN_API,
    "gate": DeferKind.GATE,
    "recovery": DeferKind.RECOVERING_PEER,
}


@dataclass(frozen=True, slots=True)
class Defer:
    reason: str  # not safe now; other nodes go first, this one is tried again later
    blockers: tuple[Blocker, ...] = field(default=())

    @property
    def kind(self) -> DeferKind:
        """Its first blocker's kind: a partition's subject is its name (`orders-3`)."""
        if not self.blockers:
            return DeferKind.OTHER
        return _SUBJECT_KINDS.get(self.blockers[0].subject, DeferKind.AVAILABILITY)


@dataclass(frozen=True, slots=True)
class Fail:
    reason: str  # fatal for the roll
    # The node is up and well, but not what the roll was for (back on another Kafka version):
    # on record as failed, so a resumed roll takes it again, once its install is fixed.
    again: bool = False


# A wait's `kind`: its events' figure and a metrics label (never rename one).


@dataclass(frozen=True, slots=True)
class AwaitReady:
    reason: str  # not ready, within the operation timeout: keep polling
    # its agent reports it STARTING or RECOVERY (on its way back, fenced): like a recovery, it
    # holds every other restart of the roll until it is back
    starting: bool = False
    kind: ClassVar[str] = "not-ready"


@dataclass(frozen=True, slots=True)
class AwaitRecovery:
    reason: str  # in log recovery: wait while it progresses, never restart it
    kind: ClassVar[str] = "recovery"


@dataclass(frozen=True, slots=True)
class AwaitUnknown:
    reason: str  # its agent cannot be read: wait within the safety budget, never force
    kind: ClassVar[str] = "agent-unreachable"


@dataclass(frozen=True, slots=True)
class Back:
    reason: str  # after its restart: a new process, ready


Action = Restart | Defer | Fail | AwaitReady | AwaitRecovery | AwaitUnknown
AfterRestart = Back | Fail | AwaitReady | AwaitRecovery | AwaitUnknown


class Phase(StrEnum):
    FOUND_NOT_READY = "found-not-ready"  # pending: not ready before its restart
    READY = "ready"  # restarted: until a new process is ready
    QUORUM = "quorum"  # a controller: until its voter caught up with the leader again
    ISR = "isr"  # a broker: until it is back in every ISR it was in before


@dataclass(frozen=True, slots=True)
class NodeWait:
    """What the roller remembers of one node it waits for, between two looks."""

    ready: ReadyWait  # since when, and its last progress: the operation timeout's start
    phase: Phase = Phase.FOUND_NOT_READY
    before: str | None = None  # its identity before the restart (None: not known)
    base: Baseline = IN_SYNC  # where it stood before the restart
    unknown_since: float | None = None  # its agent unreadable at every look since
    recovery: RecoveryTracker | None = None  # in log recovery since the tracker's start
    budget: Budget | None = None  # QUORUM and ISR: the cluster's progress
    since_ms: int | None = None  # QUORUM: the leader's caught-up time when the node was back
    note: str = ""  # ISR: what it was already out of before its restart

    @property
    def restarted(self) -> bool:
        return self.phase is not Phase.FOUND_NOT_READY

    @property
    def watching_recovery(self) -> bool:
        """A restarted node in log recovery: only its agent is asked until it ends."""
        return self.phase is Phase.READY and self.recovery is not None

    @property
    def asks_agent(self) -> bool:
        """Its agent is asked at each look (found not ready, or on its way back)."""
        return self.phase in (Phase.FOUND_NOT_READY, Phase.READY)


@dataclass(frozen=True, slots=True)
class AwaitQuorum:
    reason: str  # a restarted controller catching up with the quorum leader
    lag: int | None  # records behind the leader, when reported
    kind: ClassVar[str] = "quorum"


@dataclass(frozen=True, slots=True)
class AwaitIsr:
    reason: str  # a restarted broker not yet back in every ISR it was in before
    lagging: int  # partitions left (0: the cluster cannot be seen)
    already: str = ""  # at this look: what it was already out of before its restart
    kind: ClassVar[str] = "catch-up"


@dataclass(frozen=True, slots=True)
class Done:
    """Back where it was before its restart."""

    note: str = ""  # what it was already out of before its restart, if anything
    already: str = ""  # said at this look (the note, when it still holds)


@dataclass(frozen=True, slots=True)
class Step:
    """The outcome of one look: the action, the record for the next look (None: nothing to
    remember), and `failure` when the roll cannot go on (why, naming the node: the node is not
    restarted). `at_once`: look again now, not after a poll interval (a recovery just ended, a
    phase ended)."""

    action: Action | AfterRestart | AwaitQuorum | AwaitIsr | Done
    wait: NodeWait | None
    failure: str | None = None
    verdict: Verdict | None = None  # the recovery's, with AwaitRecovery
    at_once: bool = False


# The budgets a record carries.

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

"""How long to wait for the cluster: progress, not a retry count (pure, table-tested).

Waiting until a restart is safe (a partition at min.insync.replicas, a lagging voter, a
reassignment in flight) and waiting for a restarted broker to rejoin its ISRs are not errors:
a real broker takes seconds to minutes to fetch what it missed. The roller keeps observing and
waits for as long as the cluster makes progress; it gives up only when `budget` seconds pass
with none (`--safety-wait`), and then names what never became safe.

Progress is a smaller deficit than at the previous observation: fewer replicas missing from the
ISRs that matter, fewer voters lagging, fewer partitions still catching up.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True, slots=True)
class Budget:
    """A wait judged by progress, as a value: since when, the last progress, the deficit at
    the last observation (`node_wait` keeps one in each node's record)."""

    started: float
    last_progress: float
    deficit: int | None = None

    @classmethod
    def start(cls, now: float) -> Budget:
        return cls(now, now)

    def progress(self, deficit: int) -> bool:
        """Whether `deficit` is progress: smaller than at the previous observation."""
        return self.deficit is not None and deficit < self.deficit

    def observe(self, now: float, deficit: int) -> Budget:
        last = now if self.progress(deficit) else self.last_progress
        return replace(self, deficit=deficit, last_progress=last)

    def expired(self, now: float, budget: float) -> bool:
        return now - self.last_progress >= budget

    def waited(self, now: float) -> float:
        return now - self.started


@dataclass(slots=True)
class ProgressWait:
    """A `Budget` kept in place, with its seconds without progress (`budget`)."""

    budget: float
    started: float
    state: Budget = field(init=False)

    def __post_init__(self) -> None:
        self.state = Budget.start(self.started)

    def observe(self, now: float, deficit: int) -> bool:
        """Record an observation; True when it is progress."""
        progress = self.state.progress(deficit)
        self.state = self.state.observe(now, deficit)
        return progress

    def expired(self, now: float) -> bool:
        return self.state.expired(now, self.budget)

    def waited(self, now: float) -> float:
        return self.state.waited(now)


@dataclass(slots=True)
class SafetyWait:
    """The roll loop's --safety-wait: it runs only while polls restart nothing and no node has
    a wait of its own (readiness, recovery, an unknown agent: budgets of their own), and only
    while the cluster makes no progress towards making a restart safe (`deficit` falling)."""

    wait: ProgressWait | None = None

    def reset(self) -> None:
        """A restart, or a wait with its own budget: the safety wait starts again next time."""
        self.wait = None

    def spent(self, now: float, deficit: int, budget: float) -> float | None:
        """A poll that restarted nothing: the seconds waited once `budget` is spent."""
        self.wait = self.wait or ProgressWait(budget, now)
        self.wait.observe(now, deficit)
        return self.wait.waited(now) if self.wait.expired(now) else None

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

from dataclasses import dataclass


@dataclass(slots=True)
class ProgressWait:
    budget: float  # seconds without progress before giving up
    started: float
    last_progress: float = 0.0
    deficit: int | None = None  # at the last observation

    def __post_init__(self) -> None:
        self.last_progress = self.started

    def observe(self, now: float, deficit: int) -> bool:
        """Record an observation; True when it is progress."""
        progress = self.deficit is not None and deficit < self.deficit
        if progress:
            self.last_progress = now
        self.deficit = deficit
        return progress

    def expired(self, now: float) -> bool:
        return now - self.last_progress >= self.budget

    def waited(self, now: float) -> float:
        return now - self.started


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

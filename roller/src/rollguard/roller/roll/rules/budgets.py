"""The cluster's budgets, as values (pure, table-tested): waiting until a restart is safe (a
partition at min.insync.replicas, a lagging voter) and for a restarted node to rejoin the
quorum and its ISRs are not errors: a real broker takes seconds to minutes to fetch what it
missed. The roller waits for as long as the cluster makes progress (a smaller deficit than at
the previous observation: fewer replicas missing, voters lagging, partitions catching up) and
gives up only when `--safety-wait` passes with none, naming what never became safe (`Budget`
in a node's record, `ProgressWait`, `SafetyWait` in the loop). A node's own budgets (readiness,
its log recovery) are in `node_state.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from rollguard.shared.converters import format_duration


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

    def spent(self, now: float, held: Sequence[tuple[str, str, int]], budget: float) -> str | None:
        """A poll that restarted nothing, `held` its deferred nodes (name, why, deficit): why
        the roll stops once `budget` is spent without progress (the deficits falling)."""
        self.wait = self.wait or ProgressWait(budget, now)
        self.wait.observe(now, sum(deficit for _, _, deficit in held))
        if not self.wait.expired(now):
            return None
        reasons = "; ".join(f"{name}: {why}" for name, why, _ in held)
        return (
            f"no restart became safe: {format_duration(budget)} without progress "
            f"(--safety-wait) after waiting {format_duration(self.wait.waited(now))}: {reasons}"
        )

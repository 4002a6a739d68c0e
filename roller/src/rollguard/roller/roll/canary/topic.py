"""The canary topic's shape (`canary.client`): as rollguard makes it, one partition led by each
broker with the cluster's replication, and how an existing one differs from that."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


def replication(default: int | None, brokers: int) -> int:
    """The canary topic's replication: the cluster's `default.replication.factor` (None: not
    read), 3 at least where there are 3 brokers or more (a default of 1 would make every
    restart a canary's outage, not a measure of what clients see), never more than the
    brokers."""
    return min(brokers, max(default or 1, 3))


def spread(brokers: Sequence[int], replication: int) -> dict[int, list[int]]:
    """One partition per broker, partition i's replicas the i-th broker then the next ones in
    turn: each broker the preferred leader of one partition, and a follower of as many."""
    ordered = sorted(brokers)
    count = len(ordered)
    return {
        i: [ordered[(i + k) % count] for k in range(min(replication, count))] for i in range(count)
    }


def shape_problem(replicas: Mapping[int, Sequence[int]], brokers: Sequence[int]) -> str | None:
    """How an existing topic differs from one partition led by each broker (by its preferred
    leaders, the first replicas), or None."""
    leaders = sorted(r[0] for r in replicas.values() if r)
    if leaders == sorted(brokers):
        return None
    led = ", ".join(str(b) for b in leaders) or "none"
    return (
        f"{len(replicas)} partition{'' if len(replicas) == 1 else 's'} whose preferred leaders "
        f"are {led}, not one per broker ({', '.join(str(b) for b in sorted(brokers))})"
    )


@dataclass(frozen=True, slots=True)
class CanaryTopic:
    """The canary's topic as found or made."""

    name: str
    partitions: int
    replication: int
    created: bool
    problem: str | None  # its shape, when not one partition led by each broker
    leaders: Mapping[int, int] = field(default_factory=dict)  # partition -> preferred leader

    def text(self) -> str:
        made = "created" if self.created else "found"
        shape = f"{self.partitions} partitions, replication {self.replication}"
        said = f"{self.name}: {made}, {shape}"
        return said + (f"; {self.problem}: used as it is" if self.problem else "")

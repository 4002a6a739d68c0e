"""A controller back from a long restart: its wait to catch up with the quorum is budgeted by
progress (its lag behind the leader's log end offset shrinking), not by a flat deadline."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

import pytest

from rollguard.peers.sim import VirtualClock
from rollguard.roller.model import ClusterView, Node, QuorumInfo, Role, VoterInfo
from rollguard.roller.roll.node.outcome import Do, Seen
from rollguard.roller.roll.node.record import CatchUp, NodeRecord, Phase
from rollguard.roller.roll.node.step import restarted, step
from rollguard.roller.roll.rules.budgets import Budget
from rollguard.roller.roll.rules.safety import voter_lag
from rollguard.roller.roll.rules.settings import RollSettings

CONTROLLER = Node(3, "controller-3", frozenset({Role.CONTROLLER}), "https://controller-3:8443")
SETTINGS = RollSettings(poll_interval=2.0, safety_wait=120.0)


@pytest.mark.parametrize(
    ("voters", "lag"),
    [
        ((VoterInfo(1, 5, 1000), VoterInfo(3, 1, 400)), 600),
        ((VoterInfo(1, 5, 1000), VoterInfo(3, 5, 1000)), 0),
        ((VoterInfo(1, 5, 1000), VoterInfo(3, 5, 1200)), 0),  # never negative
        ((VoterInfo(1, 5, None), VoterInfo(3, 1, 400)), None),  # not reported
        ((VoterInfo(1, 5, 1000), VoterInfo(3, 1)), None),
        ((VoterInfo(1, 5, 1000),), None),  # not a voter
    ],
)
def test_a_voters_lag_is_the_leaders_log_end_offset_less_its_own(
    voters: tuple[VoterInfo, ...], lag: int | None
) -> None:
    assert voter_lag(3, QuorumInfo(1, voters)) == lag


@dataclass
class Quorum:
    """The quorum as the Admin API shows it at each poll: the leader appends `appends` records a
    second; the restarted voter fetches `fetches` a second from `behind` records behind, and is
    caught up (a lastCaughtUpTimestamp of now) once it has nothing left to fetch."""

    clock: VirtualClock
    behind: int
    fetches: float
    appends: float = 5.0

    async def cluster(self) -> ClusterView:
        t = self.clock.now
        leader_end = 100_000 + int(self.appends * t)
        own = min(leader_end, 100_000 - self.behind + int(self.fetches * t))
        now_ms = 1_000_000 + int(t * 1000)
        caught = now_ms if own >= leader_end else 1_000_000 - 3_600_000
        voters = (VoterInfo(1, now_ms, leader_end), VoterInfo(3, caught, own))
        return ClusterView((), QuorumInfo(1, voters), 1)


def caught_up(quorum: Any) -> tuple[str | None, float]:
    """The restarted controller's wait from its readiness on, as the roll loop follows it: a
    look every poll interval (`node.step.step`) until it is back (None) or fails (why)."""
    clock = quorum.clock
    taken = NodeRecord(CONTROLLER.name, Phase.PENDING)
    ready = restarted(taken, CONTROLLER, SETTINGS, clock.now, "old")
    record = replace(ready, catch_up=CatchUp.QUORUM, budget=Budget.start(clock.now))
    while True:
        cluster = asyncio.run(quorum.cluster())
        outcome = step(record, Seen(CONTROLLER, clock.now, "", cluster=cluster), SETTINGS)
        if outcome.effect.do is Do.FAIL_NODE:
            return outcome.effect.reason, clock.now
        if outcome.effect.do is Do.BACK:
            assert outcome.record.phase is Phase.DONE
            return None, clock.now
        assert outcome.record.phase is Phase.CATCHING_UP
        record = outcome.record
        clock.now += SETTINGS.poll_interval


def test_a_catch_up_longer_than_the_safety_wait_completes_while_it_progresses() -> None:
    # 20,000 records behind, fetching 30/s while the leader appends 5/s: 800 s > 120 s.
    failure, took = caught_up(Quorum(VirtualClock(), behind=20_000, fetches=30.0))
    assert failure is None
    assert took > 700


def test_a_voter_that_fetches_nothing_fails_after_the_safety_wait_naming_its_lag() -> None:
    failure, took = caught_up(Quorum(VirtualClock(), behind=20_000, fetches=0.0))
    assert failure is not None
    assert "has not caught up with the KRaft quorum leader 2m00s after its restart" in failure
    assert "records behind, no progress for 2m00s" in failure
    assert SETTINGS.safety_wait <= took <= SETTINGS.safety_wait + SETTINGS.poll_interval


def test_a_voter_falling_further_behind_is_not_progress() -> None:
    # It fetches, but slower than the leader appends: its lag grows.
    failure, _ = caught_up(Quorum(VirtualClock(), behind=20_000, fetches=2.0))
    assert failure is not None


def test_without_log_end_offsets_the_wait_is_the_safety_wait_from_its_start() -> None:
    quorum = Quorum(VirtualClock(), behind=20_000, fetches=30.0)

    class Unreported:
        async def cluster(self) -> ClusterView:
            view = await quorum.cluster()
            assert view.quorum is not None
            voters = tuple(replace(v, log_end_offset=None) for v in view.quorum.voters)
            return replace(view, quorum=replace(view.quorum, voters=voters))

    unreported = Unreported()
    unreported.clock = quorum.clock  # type: ignore[attr-defined]
    failure, took = caught_up(unreported)
    assert failure is not None
    assert took <= SETTINGS.safety_wait + SETTINGS.poll_interval

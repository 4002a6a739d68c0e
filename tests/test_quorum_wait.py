"""A controller back from a long restart: its wait to catch up with the quorum is budgeted by
progress (its lag behind the leader's log end offset shrinking), not by a flat deadline."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

import pytest

from rollguard.peers.sim import VirtualClock
from rollguard.roller.model import ClusterView, Node, QuorumInfo, Role, VoterInfo
from rollguard.roller.roll.after_restart import AfterRestart
from rollguard.roller.roll.decide import Fail
from rollguard.roller.roll.safety import voter_lag
from rollguard.roller.roll.settings import RollSettings

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


def wait_for(quorum: Quorum) -> tuple[Fail | None, float]:
    clock = quorum.clock
    after = AfterRestart(quorum, SETTINGS, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    outcome = asyncio.run(after._quorum(CONTROLLER))
    return outcome, clock.now


def test_a_catch_up_longer_than_the_safety_wait_completes_while_it_progresses() -> None:
    # 20,000 records behind, fetching 30/s while the leader appends 5/s: 800 s > 120 s.
    outcome, took = wait_for(Quorum(VirtualClock(), behind=20_000, fetches=30.0))
    assert outcome is None
    assert took > 700


def test_a_voter_that_fetches_nothing_fails_after_the_safety_wait_naming_its_lag() -> None:
    outcome, took = wait_for(Quorum(VirtualClock(), behind=20_000, fetches=0.0))
    assert isinstance(outcome, Fail)
    assert "has not caught up with the KRaft quorum leader 2m00s after its restart" in (
        outcome.reason
    )
    assert "records behind, no progress for 2m00s" in outcome.reason
    assert SETTINGS.safety_wait <= took <= SETTINGS.safety_wait + SETTINGS.poll_interval


def test_a_voter_falling_further_behind_is_not_progress() -> None:
    # It fetches, but slower than the leader appends: its lag grows.
    outcome, _ = wait_for(Quorum(VirtualClock(), behind=20_000, fetches=2.0))
    assert isinstance(outcome, Fail)


def test_without_log_end_offsets_the_wait_is_the_safety_wait_from_its_start() -> None:
    quorum = Quorum(VirtualClock(), behind=20_000, fetches=30.0)

    class Unreported:
        async def cluster(self) -> ClusterView:
            view = await quorum.cluster()
            assert view.quorum is not None
            voters = tuple(replace(v, log_end_offset=None) for v in view.quorum.voters)
            return replace(view, quorum=replace(view.quorum, voters=voters))

    clock = quorum.clock
    after = AfterRestart(Unreported(), SETTINGS, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    outcome = asyncio.run(after._quorum(CONTROLLER))
    assert isinstance(outcome, Fail)
    assert clock.now <= SETTINGS.safety_wait + SETTINGS.poll_interval

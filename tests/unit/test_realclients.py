"""The tests' own observer judges by its own answers: a failed round is an error only when no
client answered meanwhile, the watch begins when it can see, and the quorum is excused only
after its own leader was restarted. Pure: no Kafka, samples fed by hand."""

from __future__ import annotations

import pytest

from rollguard.peers.realclients import IsrSampler, SamplerError


def sampler(quorum: bool = True) -> IsrSampler:
    isr = IsrSampler("127.0.0.1:9", {"*": 2}, quorum=quorum)
    isr.began, isr.ended = 100.0, 200.0
    return isr


def feed(isr: IsrSampler, what: str, times: list[float]) -> None:
    rounds = isr._isr if what == "isr" else isr._quorum
    rounds.times.extend(times)


def fail(isr: IsrSampler, what: str, began: float, at: float) -> None:
    rounds = isr._isr if what == "isr" else isr._quorum
    rounds.failed.append(SamplerError(at, what, "RequestTimedOutError()", began))


def every(start: float, end: float, step: float = 0.5) -> list[float]:
    return [start + i * step for i in range(int((end - start) / step) + 1)]


def test_a_failed_round_is_an_error_only_when_no_client_answered_meanwhile() -> None:
    isr = sampler(quorum=False)
    feed(isr, "isr", every(100, 200))
    fail(isr, "isr", 120.1, 121.6)  # the other client answered at 120.5, 121.0, 121.5
    assert isr.errors == []
    isr._isr.times[:] = [t for t in isr._isr.times if not 120 < t < 122]
    assert [e.at for e in isr.errors] == [121.6]


def test_failures_before_the_watch_began_are_not_errors() -> None:
    isr = sampler(quorum=False)
    feed(isr, "isr", every(100, 200))
    fail(isr, "isr", 98.0, 99.5)  # a client's first connection, before the first answer
    assert isr.errors == []


def test_the_quorum_is_excused_only_after_its_own_leader_restarted() -> None:
    isr = sampler()
    feed(isr, "isr", every(100, 200))
    feed(isr, "quorum", [t for t in every(100, 200) if not 150 < t < 153])
    isr.leaders = [(t, 7) for t in every(100, 150)] + [(t, 8) for t in every(153, 200)]
    fail(isr, "quorum", 150.6, 152.4)
    with pytest.raises(AssertionError, match="quorum"):
        isr.assert_watched()
    # node 6 restarted then: not the leader, no excuse
    assert isr.elections([(150.2, 6)]) == []
    with pytest.raises(AssertionError):
        isr.assert_watched(elections=isr.elections([(150.2, 6)]))
    # node 7, the leader by the sampler's own answers: its election is excused
    elections = isr.elections([(150.2, 7)])
    assert elections == [(150.2, 160.2)]
    isr.assert_watched(elections=elections)


def test_an_election_excuses_the_quorum_not_the_isr() -> None:
    isr = sampler()
    feed(isr, "isr", [t for t in every(100, 200) if not 150 < t < 153])
    feed(isr, "quorum", every(100, 200))
    isr.leaders = [(t, 7) for t in every(100, 200)]
    fail(isr, "isr", 150.6, 152.4)
    with pytest.raises(AssertionError, match="isr"):
        isr.assert_watched(elections=isr.elections([(150.2, 7)]))


def test_a_leaderless_stretch_past_the_election_is_blindness() -> None:
    isr = sampler()
    feed(isr, "isr", every(100, 200))
    feed(isr, "quorum", [t for t in every(100, 200) if not 150 < t < 165])
    isr.leaders = [(t, 7) for t in every(100, 150)]
    with pytest.raises(AssertionError, match="blind"):
        isr.assert_watched(elections=isr.elections([(150.2, 7)]))

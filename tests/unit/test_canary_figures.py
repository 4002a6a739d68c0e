"""The roll canary's figures (`roll.canary.figures`): nearest-rank percentiles, the consumer's
longest gap, one window's figures, when a window's answers are all in, a canary that cannot
produce (pure, times given); and its topic's shape (`canary.topic.spread`, `shape_problem`)."""

from __future__ import annotations

import pytest

from rollguard.roller.model import CanaryArrival as Arrival
from rollguard.roller.model import CanarySample as Sample
from rollguard.roller.roll.canary.figures import (
    Figures,
    breach,
    brief,
    by_broker,
    figures,
    longest_gap,
    percentile,
    settled,
    stalled,
)
from rollguard.roller.roll.canary.topic import replication, shape_problem, spread


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 0.5, None),
        ([7.0], 0.5, 7.0),
        ([7.0], 0.99, 7.0),
        ([1.0, 2.0], 0.5, 1.0),  # a measured value, never the mean of two
        ([3.0, 1.0, 2.0], 0.5, 2.0),  # unsorted in, sorted here
        ([float(v) for v in range(1, 101)], 0.5, 50.0),
        ([float(v) for v in range(1, 101)], 0.99, 99.0),
        ([float(v) for v in range(1, 101)], 1.0, 100.0),
        ([float(v) for v in range(1, 11)], 0.99, 10.0),  # ten sends: p99 is the worst
        ([float(v) for v in range(1, 201)], 0.99, 198.0),
    ],
)
def test_percentiles_are_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


@pytest.mark.parametrize(
    ("arrivals", "start", "end", "expected"),
    [
        ([], 10.0, 15.0, 5.0),  # nothing read: the whole window
        ([10.0, 10.1, 10.2, 15.0], 10.0, 15.0, 4.8),
        ([11.0, 12.0], 10.0, 15.0, 3.0),  # from the last to the end
        ([13.0, 14.0], 10.0, 15.0, 3.0),  # from the start to the first
        ([5.0, 9.0, 12.0, 20.0], 10.0, 15.0, 3.0),  # arrivals outside the window clip it
        ([10.0, 10.5, 11.0, 11.5, 12.0, 12.5, 13.0, 13.5, 14.0, 14.5, 15.0], 10.0, 15.0, 0.5),
    ],
)
def test_the_longest_gap_is_within_the_window(
    arrivals: list[float], start: float, end: float, expected: float
) -> None:
    assert longest_gap(arrivals, start, end) == pytest.approx(expected)


def test_a_window_counts_what_was_sent_in_it_whenever_answered() -> None:
    samples = [
        Sample(9.9, 0.002),  # before: not this window's
        Sample(10.0, 0.002),
        Sample(10.1, 0.004),
        Sample(10.2, None),  # failed (its answer up to the delivery timeout later)
        Sample(10.3, 0.500),
        Sample(10.4, 0.003),
        Sample(10.6, 0.001),  # after: not this window's
    ]
    arrivals = [Arrival(10.05, 0.01), Arrival(10.2, 0.02), Arrival(10.9, 0.6)]
    seen = figures(samples, arrivals, 10.0, 10.5)
    assert seen == Figures(
        seconds=0.5,
        sent=5,
        failed=1,
        p50_ms=pytest.approx(3.0),
        p99_ms=pytest.approx(500.0),
        max_ms=pytest.approx(500.0),
        e2e_p50_ms=pytest.approx(10.0),
        e2e_p99_ms=pytest.approx(20.0),
        e2e_max_ms=pytest.approx(20.0),
        longest_gap_s=pytest.approx(0.3),
    )
    assert seen.producing


def test_a_canary_that_cannot_produce_is_never_producing() -> None:
    samples = [Sample(10.0 + i / 10, None) for i in range(5)]
    seen = figures(samples, [], 10.0, 11.0)
    assert (seen.sent, seen.failed, seen.p50_ms, seen.max_ms) == (5, 5, None, None)
    assert not seen.producing
    assert seen.text() == "no send acknowledged of 5, longest consumer gap 1.0s"
    assert seen.fields()["p99Ms"] is None  # an event leaves it out: unknown, not 0


def test_fields_and_text_say_the_figures_once_rounded() -> None:
    seen = Figures(12.345, 120, 2, 2.04, 48.26, 1503.0, 3.0, 60.0, 1600.0, 1.234)
    assert seen.fields() == {
        "seconds": 12.35,
        "sent": 120,
        "failed": 2,
        "p50Ms": 2.0,
        "p99Ms": 48.3,
        "maxMs": 1503.0,
        "e2eP50Ms": 3.0,
        "e2eP99Ms": 60.0,
        "e2eMaxMs": 1600.0,
        "longestGapS": 1.23,
    }
    assert seen.fields("baseline") == {
        "baselineSent": 120,
        "baselineFailed": 2,
        "baselineP50Ms": 2.0,
        "baselineP99Ms": 48.3,
        "baselineMaxMs": 1503.0,
        "baselineE2eP50Ms": 3.0,
        "baselineE2eP99Ms": 60.0,
        "baselineE2eMaxMs": 1600.0,
        "baselineLongestGapS": 1.23,
    }
    assert seen.text() == (
        "send p50 2.0ms p99 48ms max 1503ms, 2 failed of 120, end to end p99 60ms, "
        "longest consumer gap 1.2s"
    )


@pytest.mark.parametrize(
    ("unanswered", "end", "now", "expected"),
    [
        ([], 20.0, 20.0, True),  # every answer in
        ([20.5], 20.0, 20.0, True),  # sent after the window
        ([19.9], 20.0, 20.1, False),  # one of its sends still in flight
        ([19.9], 20.0, 29.9, False),
        ([19.9], 20.0, 30.0, True),  # the delivery timeout (10 s) has failed it by now
    ],
)
def test_a_window_is_settled_when_its_sends_are_answered_or_timed_out(
    unanswered: list[float], end: float, now: float, expected: bool
) -> None:
    assert settled(unanswered, end, now, timeout=10.0) is expected


@pytest.mark.parametrize(
    ("last_ack", "now", "expected"),
    [
        (None, 104.9, False),  # started at 100: too soon to say
        (None, 105.0, True),  # nothing acknowledged in its first 5 s
        (103.0, 107.9, False),
        (103.0, 108.0, True),
    ],
)
def test_a_canary_stalls_when_nothing_is_acknowledged_for_a_while(
    last_ack: float | None, now: float, expected: bool
) -> None:
    assert stalled(last_ack, now, within=5.0, since=100.0) is expected


@pytest.mark.parametrize(
    ("brokers", "replication", "expected"),
    [
        ([0, 1, 2], 3, {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}),
        ([2, 0, 1], 3, {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}),  # by id, whatever the order
        (
            [1, 2, 3, 4, 5],
            3,
            {0: [1, 2, 3], 1: [2, 3, 4], 2: [3, 4, 5], 3: [4, 5, 1], 4: [5, 1, 2]},
        ),
        ([7], 3, {0: [7]}),  # never more replicas than brokers
        ([0, 1], 3, {0: [0, 1], 1: [1, 0]}),
    ],
)
def test_the_topic_made_has_a_partition_led_by_each_broker(
    brokers: list[int], replication: int, expected: dict[int, list[int]]
) -> None:
    assert spread(brokers, replication) == expected


@pytest.mark.parametrize(
    ("replicas", "expected"),
    [
        ({0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}, None),
        ({0: [2, 0, 1], 1: [0, 1, 2], 2: [1, 2, 0]}, None),  # which partition is whose: no matter
        (
            {0: [0, 1, 2]},
            "1 partition whose preferred leaders are 0, not one per broker (0, 1, 2)",
        ),
        (
            {0: [0, 1, 2], 1: [0, 2, 1], 2: [2, 0, 1]},
            "3 partitions whose preferred leaders are 0, 0, 2, not one per broker (0, 1, 2)",
        ),
        (
            {i: [i % 3] for i in range(6)},
            "6 partitions whose preferred leaders are 0, 0, 1, 1, 2, 2, not one per broker "
            "(0, 1, 2)",
        ),
    ],
)
def test_an_existing_topic_of_another_shape_is_named(
    replicas: dict[int, list[int]], expected: str | None
) -> None:
    assert shape_problem(replicas, [0, 1, 2]) == expected


@pytest.mark.parametrize(
    ("default", "brokers", "expected"),
    [
        (3, 3, 3),
        (1, 3, 3),  # 3 at least where there are 3 brokers
        (None, 3, 3),  # not read: the same
        (1, 2, 2),  # never more than the brokers
        (1, 1, 1),
        (4, 6, 4),  # the cluster's own, above 3
        (5, 4, 4),
    ],
)
def test_the_topic_made_has_the_cluster_s_replication_3_at_least(
    default: int | None, brokers: int, expected: int
) -> None:
    assert replication(default, brokers) == expected


def sends(*latencies: float | None, every: float = 0.1) -> list[Sample]:
    """One send every `every` seconds from 0, with these latencies (None: failed)."""
    return [Sample(round(k * every, 3), latency) for k, latency in enumerate(latencies)]


FAST = [0.005] * 99 + [0.2]  # 100 sends, the slowest 200 ms: p99 (nearest rank) 5 ms


@pytest.mark.parametrize(
    ("samples", "unanswered", "max_p99_ms", "expected"),
    [
        # Within the budget: fast sends, or slow ones without a bound.
        (sends(*FAST), [], 250.0, None),
        (sends(*([0.4] * 100)), [], None, None),
        # One failed send closes it, with or without a bound.
        (sends(*FAST[:50], None, *FAST[51:]), [], None, "1 of 100 sends failed in the last 10s"),
        # Nothing acknowledged: a canary that cannot produce is never healthy.
        (sends(), [], None, "no send acknowledged in the last 10s"),
        ([], [0.5, 1.0], 250.0, "no send acknowledged in the last 10s"),
        # The p99 above the bound: two sends of a hundred slow.
        (
            sends(*([0.005] * 98), 0.3, 0.4),
            [],
            250.0,
            "send p99 300ms over the last 10s (more than 250ms)",
        ),
        # A send waiting longer than the bound counts for as long as it has waited; a younger
        # one does not count.
        (
            sends(*([0.005] * 98)),
            [1.0, 2.0],
            250.0,
            "send p99 8000ms over the last 10s (more than 250ms)",
        ),
        (sends(*([0.005] * 98)), [9.9, 9.95], 250.0, None),
    ],
)
def test_the_gate_is_closed_by_a_failed_send_no_acknowledgement_or_a_slow_p99(
    samples: list[Sample],
    unanswered: list[float],
    max_p99_ms: float | None,
    expected: str | None,
) -> None:
    found = breach(samples, unanswered, 0.0, 10.0, max_p99_ms=max_p99_ms)
    assert (found.reason if found is not None else None) == expected


def test_the_gate_judges_only_its_window() -> None:
    # A failure and a slow send before the window do not count; the window's own sends do.
    samples = [Sample(1.0, None), Sample(2.0, 3.0), *sends(*FAST)[50:]]
    assert breach(samples, [], 5.0, 10.0, max_p99_ms=250.0) is None
    found = breach(samples, [], 0.0, 10.0, max_p99_ms=250.0)
    assert found is not None and found.failed == 1


def test_each_broker_s_figures_are_over_the_partitions_it_leads() -> None:
    # Partitions 0 and 1 led by broker 0, 2 by broker 2; a send before the metadata (None)
    # belongs to none.
    leaders = {0: 0, 1: 0, 2: 2}
    samples = [
        Sample(1.0, 0.004, 0),
        Sample(1.1, 0.006, 1),
        Sample(1.2, None, 2),
        Sample(1.3, 0.3, 2),
        Sample(1.4, 0.9, None),
    ]
    arrivals = [Arrival(1.05, 0.05, 0), Arrival(1.5, 0.2, 2)]
    found = by_broker(samples, arrivals, 0.0, 2.0, leaders)
    assert sorted(found) == [0, 2]
    assert (found[0].sent, found[0].failed, found[0].max_ms) == (2, 0, 6.0)
    assert (found[2].sent, found[2].failed, found[2].max_ms) == (2, 1, 300.0)
    assert found[2].longest_gap_s == 1.5  # its own arrivals only: nothing until 1.5 s
    assert brief(found)["2"] == {
        "sent": 2,
        "failed": 1,
        "p50Ms": 300.0,
        "p99Ms": 300.0,
        "maxMs": 300.0,
        "longestGapS": 1.5,
    }
    assert by_broker(samples, arrivals, 0.0, 2.0, {}) == {}

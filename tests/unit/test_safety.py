"""The roller's safety rules as tables: order, availability, quorum, recovery progress."""

from __future__ import annotations

import pytest

from rollguard.roller.model import (
    ClusterView,
    Node,
    PartitionInfo,
    QuorumInfo,
    Reassignment,
    Role,
    VoterInfo,
)
from rollguard.roller.roll.node.budgets import RecoveryTracker, Verdict
from rollguard.roller.roll.rules.budgets import ProgressWait
from rollguard.roller.roll.rules.safety import (
    Baseline,
    availability_blockers,
    baseline,
    catching_up,
    describe_blockers,
    quorum_blocker,
    rejoining,
    restart_blockers,
    roll_order,
    unbalanced,
    voter_caught_up,
)
from rollguard.shared.converters import format_duration

B, C = Role.BROKER, Role.CONTROLLER


def node(node_id: int, *roles: Role) -> Node:
    return Node(node_id, f"kafka-{node_id}", frozenset(roles or (B,)))


def test_order_not_ready_first_then_controllers_then_brokers_active_controller_last() -> None:
    nodes = [node(0, B), node(1, B), node(10, C), node(11, C), node(12, C, B), node(2, B)]
    ready = {0: True, 1: True, 2: False, 10: True, 11: True, 12: True}
    order = roll_order(nodes, ready, active_controller=10)
    assert [n.node_id for n in order] == [2, 11, 12, 10, 0, 1]


def test_order_is_stable_and_unknown_readiness_counts_as_not_ready() -> None:
    nodes = [node(3), node(1), node(2)]
    assert [n.node_id for n in roll_order(nodes, {1: True, 2: True}, None)] == [3, 1, 2]


def part(replicas: tuple[int, ...], isr: tuple[int, ...], min_isr: int) -> PartitionInfo:
    return PartitionInfo("orders", 0, replicas, isr, min_isr)


@pytest.mark.parametrize(
    ("partition", "blocked"),
    [
        (part((0, 1, 2), (0, 1, 2), 2), False),  # ISR above minIsr
        (part((0, 1, 2), (0, 1), 2), True),  # ISR == minIsr with the node in it
        (part((0, 1, 2), (1, 2), 2), False),  # ISR == minIsr without the node
        (part((0, 1, 2), (1,), 2), True),  # already under minIsr, the node a replica
        (part((0, 1), (1,), 2), False),  # replicas <= minIsr never blocks...
        (part((0, 1), (0,), 2), True),  # ...but the last in-sync replica: it would go offline
        (part((0,), (0,), 1), False),  # replication 1: no other way to restart it
        (part((0, 1, 2), (0,), 1), True),  # minIsr 1, the node the only ISR
        (part((1, 2, 3), (1, 2), 2), False),  # not a replica of this partition
    ],
)
def test_availability_follows_min_insync_replicas(partition: PartitionInfo, blocked: bool) -> None:
    cluster = ClusterView((partition,), None, None)
    assert bool(availability_blockers(0, cluster)) is blocked


def quorum(leader: int, *caught_up: tuple[int, int | None]) -> QuorumInfo:
    return QuorumInfo(leader, tuple(VoterInfo(i, t) for i, t in caught_up))


@pytest.mark.parametrize(
    ("quorum_info", "node_id", "allowed"),
    [
        (quorum(1, (1, 10_000), (2, 10_000), (3, 10_000)), 2, True),
        (quorum(1, (1, 10_000), (2, 10_000), (3, 7_000)), 2, False),  # 3 lags 3 s > 2 s
        (quorum(1, (1, 10_000), (2, 10_000), (3, 8_000)), 2, True),  # 2 s lag is caught up
        (quorum(1, (1, 10_000), (2, 10_000), (3, None)), 2, False),
        (quorum(1, (1, 10_000), (2, 10_000), (3, 1_000)), 3, True),  # the laggard itself
        (quorum(1, (1, 10_000)), 1, True),  # a single voter: allowed
        (quorum(1, (1, 10_000), (2, 10_000)), 1, True),  # two voters: the other caught up
        (quorum(1, (1, 10_000), (2, 1_000)), 1, False),
        (quorum(1, *[(i, 10_000) for i in range(1, 6)]), 3, True),
        (quorum(1, (1, 10_000), (2, 10_000), (3, 10_000), (4, 0), (5, 0)), 3, False),
        (quorum(1, (1, 10_000), (2, 10_000)), 7, True),  # not a voter
    ],
)
def test_quorum_needs_a_caught_up_majority_without_the_node(
    quorum_info: QuorumInfo, node_id: int, allowed: bool
) -> None:
    cluster = ClusterView((), quorum_info, quorum_info.leader_id)
    assert (quorum_blocker(node_id, cluster) is None) is allowed


def test_the_quorum_rule_uses_the_clusters_own_fetch_timeout() -> None:
    lagging_3s = quorum(1, (1, 10_000), (2, 10_000), (3, 7_000))
    assert quorum_blocker(2, ClusterView((), lagging_3s, 1)) is not None  # Kafka's 2000 ms
    relaxed = ClusterView((), lagging_3s, 1, quorum_fetch_timeout_ms=4000)
    assert quorum_blocker(2, relaxed) is None
    blocker = quorum_blocker(2, ClusterView((), lagging_3s, 1))
    assert blocker is not None and blocker.waiting_on == (3,) and "2000 ms" in blocker.reason


def test_a_voter_counts_as_back_only_after_fetching_since_its_restart() -> None:
    q = quorum(1, (1, 20_000), (2, 19_500))
    assert voter_caught_up(2, q, 2000)
    assert not voter_caught_up(2, q, 2000, since_ms=19_500)  # the old process's last fetch
    assert voter_caught_up(2, quorum(1, (1, 20_000), (2, 19_900)), 2000, since_ms=19_500)
    assert voter_caught_up(1, q, 2000, since_ms=99_999)  # the leader is caught up by definition
    assert not voter_caught_up(9, q, 2000)  # not a voter


def test_internal_topics_count_with_their_own_min_isr() -> None:
    offsets = PartitionInfo("__consumer_offsets", 0, (0, 1, 2), (0, 2), 2, internal=True)
    blockers = availability_blockers(0, ClusterView((offsets,), None, None))
    assert [b.subject for b in blockers] == ["__consumer_offsets-0"]
    assert blockers[0].waiting_on == (1,)  # the broker that must catch up


def test_a_reassignment_in_flight_holds_its_current_and_target_brokers() -> None:
    moving = Reassignment("orders", 4, (0, 1, 2, 3), adding=(3,), removing=(0,))
    cluster = ClusterView((), None, None, reassignments=(moving,))
    for broker in (0, 1, 2, 3):
        (blocker,) = availability_blockers(broker, cluster)
        assert "orders-4 is being reassigned" in blocker.reason and blocker.waiting_on == (3,)
    assert availability_blockers(4, cluster) == []


def test_restart_blockers_combine_roles_and_refuse_without_a_cluster_view() -> None:
    combined = node(1, B, C)
    cluster = ClusterView((part((1, 2, 3), (1, 2), 2),), quorum(2, (1, 5), (2, 5), (3, None)), 2)
    blockers = restart_blockers(combined, cluster)
    assert [b.subject for b in blockers] == ["quorum", "orders-0"]
    assert "caught up" in blockers[0].reason
    text = describe_blockers(blockers)
    assert "orders-0 has ISR [1, 2]" in text and text.endswith("waiting on node 3")
    (blind,) = restart_blockers(combined, None)
    assert blind.reason == "the cluster could not be observed through the Kafka Admin API"


def test_catching_up_lists_the_partitions_whose_isr_lacks_the_broker() -> None:
    cluster = ClusterView(
        (part((0, 1, 2), (1, 2), 2), part((1, 2, 3), (1, 2), 2), part((0, 1), (0, 1), 1)),
        None,
        None,
    )
    assert [p.replicas for p in catching_up(0, cluster)] == [(0, 1, 2)]
    assert [p.replicas for p in catching_up(3, cluster)] == [(1, 2, 3)]
    assert catching_up(1, cluster) == []


def named(
    topic: str, replicas: tuple[int, ...], isr: tuple[int, ...], leader: int | None = None
) -> PartitionInfo:
    return PartitionInfo(topic, 0, replicas, isr, 1, leader=leader)


def test_a_baseline_names_what_a_broker_was_already_out_of_and_whether_its_voter_lagged() -> None:
    payments, orders = named("payments", (0, 1, 2), (0, 1)), named("orders", (2, 0), (2, 0))
    lagging = ClusterView((payments, orders), quorum(0, (0, 10_000), (2, 1_000)), 0)
    combined = node(2, B, C)
    assert baseline(combined, lagging) == Baseline(frozenset({"payments-0"}), False)
    assert baseline(node(2), lagging) == Baseline(frozenset({"payments-0"}), True)
    assert baseline(node(2, C), lagging) == Baseline(frozenset(), False)  # no partitions
    assert baseline(node(0, B, C), lagging) == Baseline(frozenset(), True)  # the leader
    assert baseline(node(1, B, C), lagging) == Baseline(frozenset(), True)  # not a voter
    assert baseline(combined, None) == Baseline()  # not observed: everything is waited for


@pytest.mark.parametrize(
    ("isr_now", "before", "still", "already"),
    [
        # The restart took it out of both; it was out of payments-0 before: only orders-0 waits.
        (((0, 1), (0,)), {"payments-0"}, ["orders-0"], ["payments-0"]),
        (((0, 1), (0, 2)), {"payments-0"}, [], ["payments-0"]),
        (((0, 1), (0,)), set(), ["payments-0", "orders-0"], []),
        (((0, 1, 2), (0, 2)), {"payments-0"}, [], []),  # it rejoined anyway: nothing to say
    ],
)
def test_after_a_restart_only_what_it_took_away_is_waited_for(
    isr_now: tuple[tuple[int, ...], tuple[int, ...]],
    before: set[str],
    still: list[str],
    already: list[str],
) -> None:
    cluster = ClusterView(
        (named("payments", (0, 1, 2), isr_now[0]), named("orders", (2, 0), isr_now[1])), None, None
    )
    waiting, out_before = rejoining(2, cluster, Baseline(frozenset(before)))
    assert [p.name for p in waiting] == still
    assert [p.name for p in out_before] == already


def test_an_election_is_wanted_where_an_in_sync_preferred_replica_does_not_lead() -> None:
    cluster = ClusterView(
        (
            named("a", (1, 0), (1, 0), leader=0),  # 1 is preferred, in sync, not leading
            named("b", (1, 0), (0,), leader=0),  # 1 is not in sync: an election cannot help
            named("c", (1, 0), (1, 0), leader=1),  # already led by it
            named("d", (0, 1), (0, 1), leader=1),  # 0 is preferred, not a member
        ),
        None,
        None,
    )
    assert unbalanced(cluster, {1}) == [("a", 0)]
    assert unbalanced(cluster, {0}) == [("d", 0)]
    assert unbalanced(cluster, {2}) == []


def test_a_safety_wait_lasts_while_the_cluster_makes_progress() -> None:
    wait = ProgressWait(budget=100, started=0)
    assert not wait.observe(0, 5)  # the first observation is the baseline
    assert not wait.expired(99) and wait.expired(100)
    assert wait.observe(90, 4)  # one replica fewer missing: progress restarts the budget
    assert not wait.expired(189) and wait.expired(190)
    assert not wait.observe(150, 4) and not wait.observe(160, 7)  # worse is not progress
    assert wait.observe(170, 6)  # better than the previous observation
    assert wait.waited(170) == 170 and not wait.expired(269) and wait.expired(270)


def test_recovery_tracker_rate_eta_and_verdicts() -> None:
    tracker = RecoveryTracker(stall_timeout=60, max_wait=600, started=0)
    assert tracker.verdict(59) is Verdict.PROGRESSING
    assert tracker.verdict(60) is Verdict.STALLED  # nothing ever reported
    tracker = tracker.observe(10, 20, 10)
    # a thread moved to its next log: segments rise, logs fall
    tracker = tracker.observe(20, 18, 50)
    tracker = tracker.observe(30, 16, 40)
    assert tracker.rate() == pytest.approx(0.2)  # logs per second: segments are per log
    assert tracker.eta() == pytest.approx(80.0)
    assert tracker.describe() == (
        "16 logs left to recover (40 segments in the logs being recovered), 12.0 logs/min, "
        "ETA 1m20s"
    )
    # inside one big log: fewer segments is progress, not a rate
    tracker = tracker.observe(60, 16, 30)
    assert tracker.verdict(119) is Verdict.PROGRESSING
    tracker = tracker.observe(80, 16, 45)  # more segments at the same log count is not progress
    assert tracker.verdict(119) is Verdict.PROGRESSING
    assert tracker.verdict(120) is Verdict.STALLED  # no decrease since t=60
    tracker = tracker.observe(95, 10, 500)
    assert tracker.verdict(154) is Verdict.PROGRESSING
    tracker = tracker.observe(590, 5, 100)
    assert tracker.verdict(599) is Verdict.PROGRESSING
    assert tracker.verdict(600) is Verdict.TOO_LONG


@pytest.mark.parametrize(("seconds", "text"), [(5, "5s"), (65, "1m05s"), (7322, "2h02m")])
def test_durations_read_like_a_clock(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text

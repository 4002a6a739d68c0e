"""Properties of the roll over random clusters on a virtual clock (`roll_sim`).

Whatever the cluster (brokers recovering when the roll starts or after their restart, a
replication catch-up of seconds to minutes after every start, the internal topics, combined or
dedicated KRaft controllers), the production roller never restarts a broker in recovery, never
takes a partition below min.insync.replicas and never loses the KRaft majority, by the
simulation's own checks; a healthy cluster's roll completes however long the catch-up takes,
as long as it progresses; and a broker that does not rejoin its ISRs fails the roll, naming them.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollguard.peers.harness_sim import SimRoll
from rollguard.peers.sim import (
    SimCluster,
    SimNode,
    SimPartition,
    VirtualClock,
    default_settings,
    internal_topics,
    random_cluster,
    spread_rejoins,
)
from rollguard.roller.model import Node, Role

POLL = default_settings().poll_interval


def assert_safe(cluster: SimCluster) -> None:
    v = cluster.violations
    assert v.restarted_recovering == []
    assert v.beside_recovery == []
    assert v.below_min_isr == []
    assert v.quorum_lost == []
    assert v.offline == []


def assert_each_waited_for_the_previous(cluster: SimCluster) -> None:
    """No restart before the node restarted before it was back in every ISR (and caught up
    with the quorum): the catch-up was waited for, not skipped."""
    for before, after in zip(cluster.log, cluster.log[1:], strict=False):
        assert after.at >= before.synced_at, (before, after)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 7), dedicated=st.booleans())
def test_the_roll_never_restarts_a_recovering_broker_nor_breaks_min_isr_nor_the_quorum(
    seed: int, size: int, dedicated: bool
) -> None:
    cluster = random_cluster(random.Random(seed), VirtualClock(), size, controller_only=dedicated)
    done = SimRoll(cluster).roll()
    assert_safe(cluster)
    assert (done.returncode, done.stderr) == (0, "")
    assert all(n.restarts == 1 for n in cluster.nodes.values())
    assert_each_waited_for_the_previous(cluster)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(2, 6), dedicated=st.booleans())
def test_a_healthy_clusters_roll_completes_through_catch_ups_of_minutes(
    seed: int, size: int, dedicated: bool
) -> None:
    cluster = random_cluster(
        random.Random(seed),
        VirtualClock(),
        size,
        recovering_at_start=0,
        recovery_on_restart=0,
        catch_up=(120.0, 600.0),
        controller_only=dedicated,
    )
    done = SimRoll(cluster).roll()
    assert (done.returncode, done.stderr) == (0, "")
    assert_safe(cluster)
    assert cluster.violations.offline == []
    assert all(n.restarts == 1 for n in cluster.nodes.values())
    assert_each_waited_for_the_previous(cluster)
    # Every broker's catch-up is part of the roll: it cannot be shorter than their sum.
    assert cluster.clock.now >= sum(n.catch_up_seconds for n in cluster.nodes.values())


def three_brokers(catch_up: float, *, gradual: bool = True) -> SimCluster:
    """Three combined nodes, the internal topics (RF 3, min ISR 2: every broker hosts all 100
    partitions) and ten user partitions; each broker's catch-up takes `catch_up` seconds,
    rejoining its ISRs one by one (`gradual`) or all at the end."""
    nodes = [
        SimNode(
            Node(i, f"kafka-{i}", frozenset({Role.BROKER, Role.CONTROLLER}), f"https://kafka-{i}"),
            restart_seconds=60,
            catch_up_seconds=catch_up,
        )
        for i in range(3)
    ]
    partitions = [
        SimPartition("orders", i, (i % 3, (i + 1) % 3, (i + 2) % 3), 2) for i in range(10)
    ]
    partitions += internal_topics(random.Random(0), [0, 1, 2])
    cluster = SimCluster(nodes, partitions, VirtualClock())
    spread_rejoins(cluster)
    if not gradual:
        for n in nodes:
            n.rejoin = dict.fromkeys(n.rejoin, 1.0)
    return cluster


def test_a_broker_that_does_not_rejoin_its_isrs_fails_the_roll_naming_the_partitions() -> None:
    # Back in its ISRs only 22 hours after its restart (and in none of them before).
    cluster = three_brokers(80_000, gradual=False)
    budget = default_settings().safety_wait
    done = SimRoll(cluster).roll()
    assert done.returncode == 1
    reason = done.stderr
    # Only the first broker was restarted: the others stayed unsafe while it lagged.
    [first] = cluster.log
    hosted = cluster.hosted[cluster.nodes[first.name].node.node_id]
    lagging = [p.name for i, p in enumerate(cluster.partitions) if i in hosted]
    assert len(lagging) == 110
    assert reason.startswith(f"{first.name} has not rejoined the ISR of 110 partitions (")
    assert ", ".join(lagging[:5]) + " and 105 more" in reason
    assert "--safety-wait" in reason
    # It gave up when the budget was spent with no progress, not before, and not much after.
    waited = cluster.clock.now - (first.at + 60)
    assert budget <= waited <= budget + 2 * POLL
    assert_safe(cluster)


def test_a_catch_up_longer_than_the_safety_budget_completes_while_it_progresses() -> None:
    cluster = three_brokers(600)  # 110 partitions rejoining over 600 s: one every ~5.5 s
    done = SimRoll(cluster).roll(safety_wait=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert [n.restarts for n in cluster.nodes.values()] == [1, 1, 1]
    assert_each_waited_for_the_previous(cluster)
    assert cluster.clock.now >= 3 * (60 + 600)
    assert_safe(cluster)


def test_a_catch_up_that_shows_no_progress_for_the_safety_budget_fails_the_roll() -> None:
    # The same catch-up, every ISR rejoined at its end: nothing moves for 600 s > 120 s.
    cluster = three_brokers(600, gradual=False)
    done = SimRoll(cluster).roll(safety_wait=120)
    assert done.returncode == 1
    assert "has not rejoined the ISR of 110 partitions" in done.stderr
    assert "no progress for 2m" in done.stderr
    assert len(cluster.log) == 1
    assert_safe(cluster)


def test_a_restart_never_takes_a_partition_offline_while_its_other_replica_catches_up() -> None:
    # Two combined nodes: kafka-0 (the active controller, so rolled last) recovers for 900 s
    # when the roll starts, then needs 120 s to catch up. Every partition has replication 2
    # and min.insync.replicas 2, as __consumer_offsets has on a two-broker cluster. Restarting
    # kafka-1 before kafka-0 is back in sync leaves those partitions with no replica in sync.
    nodes = [
        SimNode(
            Node(i, f"kafka-{i}", frozenset({Role.BROKER, Role.CONTROLLER}), f"https://kafka-{i}"),
            restart_seconds=60,
            catch_up_seconds=120,
        )
        for i in range(2)
    ]
    recovering = nodes[0]
    recovering.restarted_at, recovering.jvm_started_at = -61.0, -60.0
    recovering.down_until, recovering.recovery_until = 0.0, 900.0
    recovering.recovery_segments = 9000
    partitions = internal_topics(random.Random(0), [0, 1])
    cluster = SimCluster(nodes, partitions, VirtualClock())
    spread_rejoins(cluster)
    assert SimRoll(cluster).roll().returncode == 0
    assert_safe(cluster)
    assert cluster.violations.offline == []

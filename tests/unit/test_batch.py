"""The batch planner's rules, one table row each (`rollguard.roller.roll.rules.batch`)."""

from __future__ import annotations

import time

import pytest

from rollguard.roller.model import (
    ClusterView,
    Node,
    PartitionInfo,
    PlatformView,
    QuorumInfo,
    Reassignment,
    Role,
    VoterInfo,
)
from rollguard.roller.roll.rules.batch import (
    CONTROLLER_ALONE,
    NOT_READY_ALONE,
    batchable,
    next_batch,
    plan_batches,
)


def broker(i: int) -> Node:
    return Node(i, f"kafka-{i}", frozenset({Role.BROKER}))


def combined(i: int) -> Node:
    return Node(i, f"kafka-{i}", frozenset({Role.BROKER, Role.CONTROLLER}))


def part(
    index: int, replicas: tuple[int, ...], isr: tuple[int, ...] | None = None, min_isr: int = 2
) -> PartitionInfo:
    return PartitionInfo("t", index, replicas, replicas if isr is None else isr, min_isr)


def view(
    *partitions: PartitionInfo,
    racks: dict[int, str] | None = None,
    reassignments: tuple[Reassignment, ...] = (),
) -> ClusterView:
    quorum = QuorumInfo(100, (VoterInfo(100, 1000),))
    return ClusterView(
        tuple(partitions), quorum, 100, reassignments, racks=tuple(sorted((racks or {}).items()))
    )


def ids(plan_batch: object) -> list[int]:
    assert plan_batch is not None
    return [m.node_id for m in plan_batch.members]  # type: ignore[attr-defined]


SIX_RACKS = {0: "a", 1: "b", 2: "c", 3: "a", 4: "b", 5: "c"}


def rack_aware_six() -> ClusterView:
    """Six brokers in three racks, RF 3 with one replica per rack, min ISR 2."""
    return view(
        part(0, (0, 1, 2)),
        part(1, (3, 4, 5)),
        part(2, (0, 4, 2)),
        part(3, (3, 1, 5)),
        racks=SIX_RACKS,
    )


@pytest.mark.parametrize(
    ("partitions", "max_size", "expected"),
    [
        # RF 3, min ISR 2: each partition spares one in-sync replica, so 0 and 1 cannot pair.
        ((part(0, (0, 1, 2)),), 3, [0]),
        # RF 3, min ISR 1: spares two, never all three.
        ((part(0, (0, 1, 2), min_isr=1),), 3, [0, 1]),
        # Disjoint partitions: everyone together, up to the limit.
        ((part(0, (0, 1, 2)), part(1, (3, 4, 5))), 10, [0, 3]),
        ((part(0, (0, 1, 2)), part(1, (3, 4, 5))), 1, [0]),
        # A lagging replica costs the ISR nothing: 1 is not in sync, so 0 and 1 may go together.
        ((part(0, (0, 1, 2), isr=(0, 2), min_isr=1),), 3, [0, 1]),
        # ... but the last in-sync replica is never batched with anything on that partition.
        ((part(0, (0, 1, 2), isr=(0, 2), min_isr=2),), 3, [1]),
        # RF 2, min ISR 1: spare one; RF 1: no room to share, it restarts alone. Among batches
        # of one, 1 goes first: it shares a partition with another candidate (2), 0 with none.
        ((part(0, (0, 1), min_isr=1),), 2, [0]),
        ((part(0, (0,), min_isr=1), part(1, (1, 2), min_isr=1)), 3, [1]),
        # RF 2, min ISR 2: today's rule lets each restart alone; no batch can hold two of it.
        ((part(0, (0, 1), min_isr=2), part(1, (2, 3), min_isr=1)), 3, [0]),
        # min ISR 0 (a topic that sets it): never every replica at once anyway.
        ((part(0, (0, 1), min_isr=0),), 2, [0]),
    ],
)
def test_the_per_partition_rule(
    partitions: tuple[PartitionInfo, ...], max_size: int, expected: list[int]
) -> None:
    nodes = [broker(i) for i in sorted({r for p in partitions for r in p.replicas})]
    plan = next_batch(nodes, view(*partitions), max_size=max_size)
    assert ids(plan.batch) == expected


def test_a_broker_today_blocks_alone_is_held_with_its_blockers() -> None:
    cluster = view(part(0, (0, 1, 2), isr=(0, 1)), part(1, (3, 4, 5)))
    plan = next_batch([broker(i) for i in range(6)], cluster, max_size=6)
    assert ids(plan.batch) == [2, 3]
    held = {h.node.node_id: h for h in plan.held}
    assert held[0].blockers and "= min.insync.replicas" in held[0].reason
    assert held[1].blockers
    assert not held[4].blockers and "cannot spare both" in held[4].reason


def test_a_reassignment_holds_its_brokers_as_today() -> None:
    moving = Reassignment("t", 1, (3, 4, 5), (5,), (3,))
    cluster = view(part(0, (0, 1, 2)), part(1, (3, 4, 5)), reassignments=(moving,))
    plan = next_batch([broker(i) for i in range(6)], cluster, max_size=6)
    assert ids(plan.batch) == [0]
    assert {h.node.node_id for h in plan.held if h.blockers} == {3, 4, 5}


def test_controllers_and_not_ready_brokers_are_never_batched() -> None:
    cluster = view(part(0, (0, 1, 2)), part(1, (3, 4, 5)))
    nodes = [combined(0), broker(1), broker(2), broker(3), broker(4), broker(5)]
    plan = next_batch(nodes, cluster, max_size=6, ready=frozenset({0, 1, 3, 4, 5}))
    assert ids(plan.batch) == [1, 3]
    held = {h.node.node_id: h.reason for h in plan.held}
    assert held[0] == CONTROLLER_ALONE
    assert held[2] == NOT_READY_ALONE


def test_rack_aware_placement_gives_one_rack_per_batch() -> None:
    # 1 and 4 (rack b) each share a partition with four other brokers, the others with three:
    # the hardest to place go first, then node order.
    batches, held = plan_batches([broker(i) for i in range(6)], rack_aware_six(), max_size=2)
    assert [ids(b) for b in batches] == [[1, 4], [0, 3], [2, 5]]
    assert [b.rack for b in batches] == ["b", "a", "c"]
    assert held == []
    assert "rack b" in batches[0].reason


def test_without_racks_the_same_cluster_batches_the_same_pairs() -> None:
    batches, _ = plan_batches(
        [broker(i) for i in range(6)], rack_aware_six(), max_size=2, rack_aware=False
    )
    assert [ids(b) for b in batches] == [[1, 4], [0, 3], [2, 5]]
    assert all(b.rack is None for b in batches)


def test_among_equal_batches_the_brokers_hardest_to_place_go_first() -> None:
    # 0 and 1 share partition 0 (no room for both); 2 shares nothing. With a limit of 1 every
    # batch is as large: the brokers sharing partitions go first, so that 2, which fits with
    # anyone, is left for the end, where it can join whoever remains.
    cluster = view(part(0, (0, 1, 5)), part(1, (2, 6, 7)))
    batches, _ = plan_batches([broker(i) for i in range(3)], cluster, max_size=1)
    assert [ids(b) for b in batches] == [[0], [1], [2]]
    plan = next_batch([broker(i) for i in (1, 2)], cluster, max_size=1)
    assert ids(plan.batch) == [1]


def test_the_rack_preference_is_verified_not_trusted() -> None:
    # Rack a holds two replicas of partition 0 (RF 3, min ISR 2): a whole-rack batch would
    # take it below min ISR, so rack a's brokers go in different batches.
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    cluster = view(part(0, (0, 1, 2)), part(1, (2, 3, 0), min_isr=1), racks=racks)
    batches, _ = plan_batches([broker(i) for i in range(4)], cluster, max_size=4)
    for b in batches:
        members = set(ids(b))
        assert not {0, 1} <= members
    assert sorted(i for b in batches for i in ids(b)) == [0, 1, 2, 3]


def test_a_larger_mixed_batch_wins_over_a_smaller_one_rack_batch() -> None:
    # Rack a: brokers 0 and 1 share partition 0 (no room for both); 2 (rack b) shares nothing.
    racks = {0: "a", 1: "a", 2: "b"}
    cluster = view(part(0, (0, 1, 5)), part(1, (2, 6, 7)), racks=racks)
    plan = next_batch([broker(i) for i in range(3)], cluster, max_size=3)
    assert ids(plan.batch) == [0, 2]
    assert plan.batch is not None and plan.batch.rack is None
    assert "racks a, b" in plan.batch.reason


def test_plans_are_deterministic_whatever_the_input_order() -> None:
    nodes = [broker(i) for i in range(6)]
    first = plan_batches(nodes, rack_aware_six(), max_size=3)
    second = plan_batches(list(reversed(nodes)), rack_aware_six(), max_size=3)
    assert first == second


def test_without_a_cluster_view_nothing_is_planned() -> None:
    plan = next_batch([broker(0)], None, max_size=3)
    assert plan.batch is None
    assert plan.held[0].blockers


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_size"):
        next_batch([broker(0)], view(), max_size=0)


def test_planning_a_thousand_brokers_and_a_hundred_thousand_partitions_is_quick() -> None:
    racks = {i: "abc"[i % 3] for i in range(1000)}
    partitions = [
        part(i, (i % 1000, (i + 1) % 1000, (i + 2) % 1000), min_isr=2) for i in range(100_000)
    ]
    cluster = view(*partitions, racks=racks)
    started = time.perf_counter()
    plan = next_batch([broker(i) for i in range(1000)], cluster, max_size=1000)
    elapsed = time.perf_counter() - started
    assert plan.batch is not None and len(plan.batch.members) >= 300
    assert elapsed < 20, elapsed


@pytest.mark.parametrize(
    ("node", "ready", "stuck", "placed"),
    [
        (broker(1), True, None, True),  # a ready broker: the batch planner's
        (broker(1), False, None, False),  # not ready: waited for alone, first
        (broker(1), False, "CrashLoopBackOff", False),  # stuck: force-restarted alone
        (combined(1), True, None, False),  # a controller too: alone, quorum check
        (Node(9, "ctrl-9", frozenset({Role.CONTROLLER})), True, None, False),
    ],
)
def test_only_ready_brokers_that_are_not_controllers_go_in_batches(
    node: Node, ready: bool, stuck: str | None, placed: bool
) -> None:
    platform = PlatformView(exists=True, ready=ready, up_to_date=False, stuck=stuck)
    assert batchable(node, platform) is placed

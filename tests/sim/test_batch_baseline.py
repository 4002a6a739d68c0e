"""rollguard's plans against Roller 2.0's greedy cells: never more batches on the same cluster.

The clusters are shaped like the benchmark's (`bench/roll_sim.py --part batches`): brokers in 3
racks, 20 partitions per broker, replication 3, min ISR 2, placed rack-aware or at random,
planned on one view (every batch back in sync before the next, as the roll waits for). At 100
brokers with random placement the planner's first versions lost to greedy on some seeds (36
batches against 35 at a limit of 3) until equally large batches were ordered hardest-to-place
first.
"""

from __future__ import annotations

import random

import pytest
from test_batch import broker, part, view

from rollguard.peers.roller2 import greedy_batch, plan_count
from rollguard.peers.sim import VirtualClock, rack_cluster
from rollguard.roller.model import ClusterView, Node
from rollguard.roller.roll.rules.batch import Placement, plan_batches


def cluster(seed: int, size: int, placement: str) -> tuple[list[Node], ClusterView]:
    sim = rack_cluster(
        random.Random(seed), VirtualClock(), size, racks=3, placement=placement,
        partitions_per_broker=20, replication=(3, 3), min_isr=(2, 2), controllers=0,
    )  # fmt: skip
    nodes = sorted((s.node for s in sim.nodes.values()), key=lambda n: n.node_id)
    return nodes, sim.cluster_view()


def test_the_baseline_takes_the_largest_cell_of_brokers_sharing_no_partition() -> None:
    # 0 and 1 share partition 0; 2 shares nothing: cells [0, 2] and [1].
    partitions = view(part(0, (0, 1, 5)), part(1, (2, 6, 7)))
    nodes = [broker(i) for i in range(3)]
    chosen = greedy_batch(nodes, Placement(partitions), 0)
    assert [n.node_id for n in chosen] == [0, 2]
    assert [n.node_id for n in greedy_batch(nodes, Placement(partitions), 1)] == [0]
    assert plan_count(nodes, partitions, 0) == 2
    assert plan_count(nodes, partitions, 1) == 3


@pytest.mark.parametrize("placement", ["random", "rack_aware"])
@pytest.mark.parametrize("limit", [3, 10, 0])
def test_never_more_batches_than_greedy_at_the_same_limit(placement: str, limit: int) -> None:
    losses = []
    for seed in range(1, 16):
        nodes, view_ = cluster(seed, 100, placement)
        ours = len(plan_batches(nodes, view_, max_size=limit or len(nodes), explain=False)[0])
        theirs = plan_count(nodes, view_, limit)
        if ours > theirs:
            losses.append((seed, ours, theirs))
    assert losses == []

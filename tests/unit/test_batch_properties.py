"""Properties of the batch planner over random clusters, checked by rules written here, not the
planner's: racks, replication 1 to 5, min ISR 1 to RF, skewed and rack-aware placements,
reassignments in flight, recovering (not ready) brokers, lagging replicas, combined nodes.

- no batch takes a partition below min.insync.replicas nor offline (a batch of one by the
  serial roll's rule, a larger one by the strict rule: what is left in sync is at least min
  ISR and at least one, and never every replica is in the batch);
- no controller (nor combined node) and no broker that is not ready is ever in a batch;
- on a healthy cluster every broker that is not a controller is planned exactly once.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollguard.roller.model import (
    ClusterView,
    Node,
    PartitionInfo,
    QuorumInfo,
    Reassignment,
    Role,
    VoterInfo,
)
from rollguard.roller.roll.rules.batch import Batch, plan_batches


def random_view(
    rng: random.Random, size: int, *, healthy: bool
) -> tuple[list[Node], ClusterView, frozenset[int]]:
    racks = rng.randint(0, 4)
    rack_of = {i: "r" + str(i % racks) for i in range(size)} if racks else {}
    combined = set(rng.sample(range(size), k=rng.randint(0, min(3, size))))
    nodes = [
        Node(
            i,
            f"kafka-{i}",
            frozenset({Role.BROKER} | ({Role.CONTROLLER} if i in combined else set())),
        )
        for i in range(size)
    ]
    placement = rng.choice(["rack_aware", "skewed", "uniform"])
    hot = rng.sample(range(size), k=max(1, size // 3))  # the skewed placement's favourites
    partitions = []
    for index in range(rng.randint(1, size * 4)):
        factor = rng.randint(1, min(5, size))
        if placement == "rack_aware" and racks:
            first = rng.randrange(size)
            replicas: list[int] = []
            for k in range(size):
                b = (first + k * (1 + size // max(racks, 1))) % size
                if b not in replicas and all(rack_of[b] != rack_of[r] for r in replicas):
                    replicas.append(b)
                if len(replicas) == factor:
                    break
            for b in rng.sample(range(size), k=size):  # racks fewer than replicas
                if len(replicas) == factor:
                    break
                if b not in replicas:
                    replicas.append(b)
        elif placement == "skewed":
            pool = hot + [b for b in range(size) if b not in hot]
            replicas = list(pool[:factor]) if rng.random() < 0.7 else rng.sample(pool, k=factor)
        else:
            replicas = rng.sample(range(size), k=factor)
        min_isr = rng.randint(1, factor)
        isr = list(replicas)
        if not healthy and rng.random() < 0.3:
            isr = [r for r in replicas if rng.random() < 0.6] or [replicas[0]]
        partitions.append(PartitionInfo("t", index, tuple(replicas), tuple(isr), min_isr))
    reassignments: tuple[Reassignment, ...] = ()
    if not healthy and partitions and rng.random() < 0.3:
        p = rng.choice(partitions)
        target = rng.sample(range(size), k=len(p.replicas))
        adding = tuple(b for b in target if b not in p.replicas)
        reassignments = (
            Reassignment(p.topic, p.partition, tuple(dict.fromkeys((*p.replicas, *adding))),
                         adding, tuple(b for b in p.replicas if b not in target)),
        )  # fmt: skip
    ready = frozenset(
        i for i in range(size) if healthy or rng.random() < 0.8
    )  # the others are recovering or starting
    quorum = QuorumInfo(0, (VoterInfo(0, 1000),))
    view = ClusterView(
        tuple(partitions), quorum, 0, reassignments, racks=tuple(sorted(rack_of.items()))
    )
    return nodes, view, ready


def harm(batch: Batch, view: ClusterView) -> list[str]:
    """What restarting the batch at once would do to the view, by the rules stated above."""
    members = {m.node_id for m in batch.members}
    found = []
    for p in view.partitions:
        touched = members & set(p.replicas)
        if not touched:
            continue
        left = [r for r in p.isr if r not in members]
        shrinks = len(left) < len(p.isr)
        if len(members) == 1:
            # The serial roll's rule: a partition that can tolerate a replica down.
            if shrinks and len(p.replicas) > p.min_isr and len(left) < p.min_isr:
                found.append(f"{p.name} below min ISR")
            if shrinks and not left and len(p.replicas) > 1:
                found.append(f"{p.name} offline")
            continue
        if set(p.replicas) <= members:
            found.append(f"{p.name}: every replica in the batch")
        if shrinks and (len(left) < p.min_isr or not left):
            found.append(f"{p.name}: ISR {list(p.isr)} -> {left}, min ISR {p.min_isr}")
    return found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.integers(1, 14),
    max_size=st.integers(1, 15),
    rack_aware=st.sampled_from([None, True, False]),
)
def test_no_batch_takes_a_partition_below_min_isr_nor_batches_a_controller(
    seed: int, size: int, max_size: int, rack_aware: bool | None
) -> None:
    nodes, view, ready = random_view(random.Random(seed), size, healthy=False)
    batches, held = plan_batches(nodes, view, max_size=max_size, rack_aware=rack_aware, ready=ready)
    planned = [m for b in batches for m in b.members]
    assert len(planned) == len({m.node_id for m in planned})
    for b in batches:
        assert 1 <= len(b.members) <= max_size
        assert harm(b, view) == [], (b, view)
        for m in b.members:
            assert not m.is_controller
            assert m.node_id in ready
    assert {m.node_id for m in planned} | {h.node.node_id for h in held} == {
        n.node_id for n in nodes
    }


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.integers(1, 14),
    max_size=st.integers(1, 15),
    rack_aware=st.sampled_from([None, True, False]),
)
def test_on_a_healthy_cluster_every_broker_is_planned_once(
    seed: int, size: int, max_size: int, rack_aware: bool | None
) -> None:
    nodes, view, ready = random_view(random.Random(seed), size, healthy=True)
    batches, held = plan_batches(nodes, view, max_size=max_size, rack_aware=rack_aware, ready=ready)
    planned = sorted(m.node_id for b in batches for m in b.members)
    assert planned == sorted(n.node_id for n in nodes if not n.is_controller)
    assert all(h.node.is_controller for h in held)
    for b in batches:
        assert harm(b, view) == []

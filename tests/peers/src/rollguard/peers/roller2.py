"""Strimzi's "Kafka Roller 2.0" batch selection, as a baseline for rollguard's planner.

Implemented from the proposal's description (strimzi-proposals PR #103, PoC strimzi-kafka-
operator #11020, both unmerged): the brokers that would break min ISR alone are dropped; the
rest are grouped first fit, in node order, into cells whose members share no partition; cells
are cut to the size limit and the largest is restarted. Racks are not used. `bench/roll_sim.py`
rolls simulated clusters with it; `tests/sim/test_batch_baseline.py` compares plans with it.
"""

from __future__ import annotations

from collections.abc import Sequence

from rollguard.roller.model import ClusterView, Node
from rollguard.roller.roll.rules.batch import Placement

__all__ = ["greedy_batch", "plan_count"]


def greedy_batch(pending: Sequence[Node], placement: Placement, max_size: int) -> list[Node]:
    """The next batch among `pending` (in node order); `max_size` 0: no limit."""
    cells: list[tuple[list[Node], set[int]]] = []
    for node in pending:
        if placement.alone_blockers(node.node_id):
            continue
        hosted = set(placement.hosted.get(node.node_id, ()))
        for members, used in cells:
            if not used & hosted:
                members.append(node)
                used |= hosted
                break
        else:
            cells.append(([node], hosted))
    if not cells:
        return []
    cut = [members[:max_size] if max_size else members for members, _ in cells]
    return max(cut, key=len)


def plan_count(nodes: Sequence[Node], cluster: ClusterView, max_size: int) -> int:
    """How many greedy batches take every node, each batch back in sync before the next."""
    placement = Placement(cluster)
    pending = sorted(nodes, key=lambda n: n.node_id)
    count = 0
    while pending:
        members = greedy_batch(pending, placement, max_size)
        if not members:
            raise ValueError(f"no greedy batch for {len(pending)} brokers")
        chosen = {m.node_id for m in members}
        pending = [n for n in pending if n.node_id not in chosen]
        count += 1
    return count

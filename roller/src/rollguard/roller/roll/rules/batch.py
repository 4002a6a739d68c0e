"""Which brokers may restart together: the batch planner (pure, table-tested).

A serial roll of 50 brokers takes hours. Restarting several at once is safe exactly when no
partition loses more than it can spare, so the rule is per partition, checked on the live view:

- the batch holds at most ISR - min.insync.replicas of the partition's *in-sync* replicas
  (a lagging replica in the batch costs the ISR nothing, so it does not count), and
- never every replica of a partition, whatever its replication factor: no partition goes offline
  because of a batch (with min.insync.replicas >= 1 the first rule already implies it; the
  second keeps it true for a topic that sets 0).

A broker joins a batch only if it may restart alone by today's rule (`safety.availability_
blockers`: reassignments in flight, partitions under min ISR...), so a batch is never less safe
than the serial roll. A batch of one follows today's rule only: a broker whose partition has
replication 1 or 2 with min ISR 2 has no room to share, so it restarts alone, as it always did.

Preferences, in order, so that a plan is deterministic and explainable:
1. brokers of one rack: a rack is the failure domain a rack-aware placement is built to lose,
   so restarting one rack at a time keeps a real rack failure during the roll survivable. It
   is a preference, never trusted: each candidate batch is grown from one rack's brokers first
   and every member passes the per-partition check, so a random placement gets small or mixed
   batches instead of unsafe ones;
2. the largest safe batch (fewer batches, a shorter roll): candidates are grown first fit in
   node order, busiest first (most partitions hosted) and most shared first (sharing partitions
   with the most other candidates), and the largest wins;
3. among equally large batches, the brokers hardest to place later: the most other candidates
   shared with, summed over the members. This is graph colouring's largest-degree-first rule,
   applied to whole batches. Left to the end, such brokers each need a batch of their own, and
   a roll's length is its number of batches;
4. node order.
Controllers and combined nodes are never batched: the roll loop restarts them one at a time
after the quorum check, the active controller last; not-ready brokers are waited for alone,
first. Both are returned as held, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from rollguard.roller.model import ClusterView, Node, PartitionInfo, PlatformView
from rollguard.roller.roll.rules.safety import Blocker, availability_blockers, describe_blockers

__all__ = ["Batch", "BatchPlan", "Held", "Placement", "next_batch", "plan_batches"]

CONTROLLER_ALONE = "a controller: restarted alone after the quorum check, never in a batch"
NOT_READY_ALONE = "not ready: waited for alone, before any batch"


@dataclass(frozen=True, slots=True)
class Held:
    """A candidate left out of the batch, and why. `blockers`: set when it may not restart
    even alone now (it waits for the cluster); empty when another batch will take it."""

    node: Node
    reason: str
    blockers: tuple[Blocker, ...] = ()


@dataclass(frozen=True, slots=True)
class Batch:
    members: tuple[Node, ...]  # in node order
    rack: str | None  # the members' one rack; None when they span racks or none is reported
    reason: str  # why these were grouped


@dataclass(frozen=True, slots=True)
class BatchPlan:
    batch: Batch | None  # None: nothing may restart now
    held: tuple[Held, ...]


class Placement:
    """The view indexed by broker (which partitions each hosts), built once per observation:
    planning 1,000 brokers over 100,000 partitions must not scan every partition per broker."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.partitions = cluster.partitions
        self.hosted: dict[int, list[int]] = {}
        for index, p in enumerate(cluster.partitions):
            for replica in p.replicas:
                self.hosted.setdefault(replica, []).append(index)
        # How many in-sync replicas each partition can spare: negative when already under.
        self.spare = [len(p.isr) - p.min_isr for p in cluster.partitions]
        self.racks = cluster.rack_of()
        self._alone: dict[int, list[Blocker]] = {}

    def alone_blockers(self, node_id: int) -> list[Blocker]:
        """Today's rule for restarting `node_id` by itself, on its own partitions only."""
        if node_id not in self._alone:
            hosted = tuple(self.partitions[i] for i in self.hosted.get(node_id, ()))
            self._alone[node_id] = availability_blockers(
                node_id, replace(self.cluster, partitions=hosted)
            )
        return self._alone[node_id]

    def shared_with(self, nodes: Sequence[Node]) -> dict[int, int]:
        """For each of `nodes`, how many of the others host a replica of one of its partitions."""
        ids = {n.node_id for n in nodes}
        degree = {}
        for node_id in ids:
            others: set[int] = set()
            for index in self.hosted.get(node_id, ()):
                others.update(self.partitions[index].replicas)
            others &= ids
            others.discard(node_id)
            degree[node_id] = len(others)
        return degree

    def rack(self, node: Node) -> str | None:
        return self.racks.get(node.node_id)


class _Growing:
    """A batch being grown: per partition, the members in it and how many of them are in sync."""

    def __init__(self, placement: Placement) -> None:
        self.placement = placement
        self.members: list[Node] = []
        self.in_sync: dict[int, int] = {}
        self.replicas: dict[int, int] = {}

    def conflict(self, node_id: int) -> PartitionInfo | None:
        """The first partition that adding `node_id` would break, or None. The first member is
        checked as if a second were already there: a batch of two must hold for it too."""
        placement = self.placement
        for index in placement.hosted.get(node_id, ()):
            p = placement.partitions[index]
            in_sync = self.in_sync.get(index, 0) + (node_id in p.isr)
            replicas = self.replicas.get(index, 0) + 1
            if in_sync > placement.spare[index] or replicas >= len(p.replicas):
                return p
        return None

    def add(self, node: Node) -> None:
        placement = self.placement
        for index in placement.hosted.get(node.node_id, ()):
            self.replicas[index] = self.replicas.get(index, 0) + 1
            if node.node_id in placement.partitions[index].isr:
                self.in_sync[index] = self.in_sync.get(index, 0) + 1
        self.members.append(node)


def batchable(node: Node, view: PlatformView) -> bool:
    """A ready broker that is not a controller: the batch planner's to place. Controllers,
    combined nodes and brokers that are not ready are handled alone, as in a serial roll."""
    return node.is_broker and not node.is_controller and view.ready and not view.stuck


def _grow(placement: Placement, order: Sequence[Node], max_size: int) -> list[Node]:
    """First fit in `order`: each broker joins when it may restart alone (today's rule) and no
    partition would break. A first member that has no room to share (its own partitions cannot
    spare it in a batch) restarts alone. Today's rule is checked lazily: a serial plan of a
    large cluster needs only the first broker that passes it."""
    growing = _Growing(placement)
    first = next((n for n in order if not placement.alone_blockers(n.node_id)), None)
    if first is None:
        return []
    if max_size == 1 or growing.conflict(first.node_id) is not None:
        return [first]
    growing.add(first)
    for node in order:
        if len(growing.members) >= max_size:
            break
        if node is first or growing.conflict(node.node_id) is not None:
            continue
        if not placement.alone_blockers(node.node_id):
            growing.add(node)
    return growing.members


def _describe(p: PartitionInfo) -> str:
    return f"{p.name} (replicas {list(p.replicas)}, ISR {list(p.isr)}, min ISR {p.min_isr})"


def next_batch(
    nodes: Sequence[Node],
    cluster: ClusterView | None,
    *,
    max_size: int,
    rack_aware: bool | None = None,
    ready: frozenset[int] | None = None,
    placement: Placement | None = None,
    explain: bool = True,
) -> BatchPlan:
    """The next batch among `nodes` (pending brokers), and why each other one is held back.

    `rack_aware`: None means on when brokers report racks; `ready`: the ids of ready nodes
    (None: all are); `placement`: the view's index, when the caller plans several batches on
    one view."""
    if max_size < 1:
        raise ValueError(f"max_size {max_size} is not at least 1")
    if cluster is None:
        why = "the cluster could not be observed through the Kafka Admin API"
        blocker = Blocker(why, "cluster")
        return BatchPlan(None, tuple(Held(n, why, (blocker,)) for n in nodes))
    placement = placement or Placement(cluster)
    held: list[Held] = []
    candidates: list[Node] = []
    for node in sorted(nodes, key=lambda n: n.node_id):
        if node.is_controller:
            held.append(Held(node, CONTROLLER_ALONE))
        elif ready is not None and node.node_id not in ready:
            held.append(Held(node, NOT_READY_ALONE))
        else:
            candidates.append(node)
    by_rack = rack_aware if rack_aware is not None else bool(placement.racks)

    groups: list[tuple[str | None, list[Node], list[Node]]] = [(None, candidates, [])]
    if by_rack:
        racks = sorted({placement.rack(n) or "" for n in candidates})
        groups = [
            (
                name or None,
                [n for n in candidates if (placement.rack(n) or "") == name],
                [n for n in candidates if (placement.rack(n) or "") != name],
            )
            for name in racks
        ]
    # Each candidate batch is grown from one order: node order, and again with the most
    # constrained brokers first, which are the hardest to place later: the busiest (most
    # partitions), and those sharing partitions with the most other candidates. Taking them
    # while there is room leaves fewer, fuller batches for the end, as graph colouring's
    # largest-degree-first does. By rack: one rack's brokers before the others'.
    degree = placement.shared_with(candidates)
    weights: list[Callable[[Node], int]] = [
        lambda n: len(placement.hosted.get(n.node_id, ())),
        lambda n: degree[n.node_id],
    ]

    def heaviest_first(group: list[Node], weight: Callable[[Node], int]) -> list[Node]:
        return sorted(group, key=lambda n: (-weight(n), n.node_id))

    orders = [(rack, mine + others) for rack, mine, others in groups]
    orders += [
        (rack, heaviest_first(mine, weight) + heaviest_first(others, weight))
        for weight in weights
        for rack, mine, others in groups
    ]
    grown: list[tuple[list[Node], str | None, int]] = []
    for rack, order in orders:
        members = _grow(placement, order, max_size)
        if members:
            in_rack = sum(1 for m in members if placement.rack(m) == rack) if rack else 0
            grown.append((members, rack, in_rack))
    if not grown:  # every candidate was checked alone, and none may restart
        for node in candidates:
            blockers = placement.alone_blockers(node.node_id)
            held.append(Held(node, describe_blockers(blockers), tuple(blockers)))
        return BatchPlan(None, tuple(sorted(held, key=lambda h: h.node.node_id)))
    # Largest first, then the most members of one rack, then the hardest to place later (the
    # most other candidates shared with), then node order.
    members, seed_rack, in_rack = min(
        grown,
        key=lambda g: (
            -len(g[0]),
            -g[2],
            -sum(degree[m.node_id] for m in g[0]),
            sorted(m.node_id for m in g[0]),
        ),
    )
    members = sorted(members, key=lambda n: n.node_id)
    one_rack = seed_rack if seed_rack is not None and in_rack == len(members) else None
    batch = Batch(tuple(members), one_rack, _why(placement, members, one_rack, by_rack, max_size))
    chosen = {m.node_id for m in members}
    rest = [n for n in candidates if n.node_id not in chosen]
    if explain:
        allowed = []
        for node in rest:
            if blockers := placement.alone_blockers(node.node_id):
                held.append(Held(node, describe_blockers(blockers), tuple(blockers)))
            else:
                allowed.append(node)
        held += _held_back(placement, members, allowed, max_size)
    else:  # the roll reads blockers only when nothing may restart; `plan` reads the rest
        held += [Held(n, "in a later batch") for n in rest]
    return BatchPlan(batch, tuple(sorted(held, key=lambda h: h.node.node_id)))


def _why(
    placement: Placement, members: list[Node], rack: str | None, by_rack: bool, max_size: int
) -> str:
    if len(members) == 1:
        if max_size == 1:
            return "restart (--max-batch-size 1)"
        conflict = _Growing(placement).conflict(members[0].node_id)
        if conflict is not None:
            return f"alone: {_describe(conflict)} cannot spare it in a batch"
        return "alone: no other broker can restart with it safely now"
    if rack is not None:
        where = f"{len(members)} brokers of rack {rack}"
    elif by_rack:
        racks = sorted({placement.rack(m) or "none" for m in members})
        where = f"{len(members)} brokers over racks {', '.join(racks)} (no one-rack batch as large)"
    else:
        where = f"{len(members)} brokers"
    return f"{where}: no partition loses more in-sync replicas than ISR - min.insync.replicas"


def _held_back(
    placement: Placement, members: list[Node], allowed: list[Node], max_size: int
) -> list[Held]:
    """Why each broker that could restart alone is not in this batch."""
    growing = _Growing(placement)
    for member in members:
        growing.add(member)
    chosen = {m.node_id for m in members}
    held = []
    for node in allowed:
        if node.node_id in chosen:
            continue
        if len(members) >= max_size:
            held.append(
                Held(node, f"in a later batch: this one is full (--max-batch-size {max_size})")
            )
            continue
        conflict = growing.conflict(node.node_id)
        if conflict is None and len(members) == 1:
            conflict = _Growing(placement).conflict(members[0].node_id)
        if conflict is not None:
            held.append(Held(node, f"in a later batch: {_describe(conflict)} cannot spare both"))
        else:  # it fit, but a larger batch was grown from another rack
            held.append(Held(node, "in a later batch: another rack's batch was larger"))
    return held


def plan_batches(
    nodes: Sequence[Node],
    cluster: ClusterView | None,
    *,
    max_size: int,
    rack_aware: bool | None = None,
    ready: frozenset[int] | None = None,
    explain: bool = True,
) -> tuple[list[Batch], list[Held]]:
    """Every batch a roll would make from this view, assuming each batch is back in sync (the
    same ISRs) before the next, and the brokers none of them takes now, with the reason."""
    if cluster is None:
        return [], list(next_batch(nodes, None, max_size=max_size).held)
    placement = Placement(cluster)
    batches: list[Batch] = []
    pending = list(nodes)
    while True:
        plan = next_batch(
            pending,
            cluster,
            max_size=max_size,
            rack_aware=rack_aware,
            ready=ready,
            placement=placement,
            explain=explain,
        )
        if plan.batch is None:
            return batches, list(plan.held)
        batches.append(plan.batch)
        chosen = {m.node_id for m in plan.batch.members}
        pending = [n for n in pending if n.node_id not in chosen]

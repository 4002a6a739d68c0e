"""The roller's safety rules, as pure functions of what was observed.

Order, availability and quorum follow Strimzi's KafkaRoller (see docs/architecture.md), with
rollguard's additions: internal topics count like any other, a partition reassignment in flight
holds its brokers, and the quorum rule uses the cluster's own fetch timeout. Each rule returns
`Blocker`s that say what waits on what (the partition, and the brokers that must catch up), so
that a wait can be shown, measured for progress, and explained when it fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rollguard.roller.model import ClusterView, Node, PartitionInfo, QuorumInfo


@dataclass(frozen=True, slots=True)
class Blocker:
    """One reason a node may not be restarted now.

    `waiting_on`: the nodes that must catch up before it clears; `deficit`: how far it is from
    clearing (replicas or voters still missing), which the safety wait watches for progress."""

    reason: str
    subject: str  # a partition (`orders-3`), `quorum`, or `cluster`
    waiting_on: tuple[int, ...] = ()
    deficit: int = 1


def roll_order(
    nodes: Iterable[Node], ready: Mapping[int, bool], active_controller: int | None
) -> list[Node]:
    """Not-ready nodes first (restarting them cannot make things worse, and waiting for them
    first means the others are judged on a settled cluster); then controllers (including
    combined nodes) before pure brokers, so the quorum is rolled while every broker is up;
    the active controller last, so leadership moves once, not once per controller restart.
    Ties keep node-id order, so a plan is the same every time it is made."""

    def key(node: Node) -> tuple[int, int, int, int]:
        return (
            1 if ready.get(node.node_id, False) else 0,
            0 if node.is_controller else 1,
            1 if node.node_id == active_controller else 0,
            node.node_id,
        )

    return sorted(nodes, key=key)


def order_reason(node: Node, ready: bool, active_controller: int | None) -> str:
    """Why `roll_order` puts `node` where it is, in the words of the first key that sets it
    apart: `place: why`, for `rollguard plan`."""
    if not ready:
        return "not ready: first, so that the others are judged on a settled cluster"
    if node.is_controller and node.node_id == active_controller:
        return "active controller: last of the controllers, so that leadership moves once"
    if node.is_controller:
        return "controller: before the brokers, so that the quorum rolls while every broker is up"
    return "broker: after the controllers"


def availability_blockers(node_id: int, cluster: ClusterView) -> list[Blocker]:
    """Why restarting broker `node_id` now would take a partition below min.insync.replicas.

    For each partition with a replica on the node, internal topics included (a consumer group
    whose `__consumer_offsets` partition drops below min ISR cannot commit), using the topic's
    own `min.insync.replicas`: the node as the only ISR member of a partition with other replicas
    always blocks (it would go offline); otherwise replicas <= minIsr never blocks (such a topic
    can never satisfy acks=all with a replica down, and waiting will not change that); ISR below
    minIsr with the
    node a replica blocks (it is already under-replicated); ISR exactly minIsr with the node in
    it blocks (restarting it would drop the ISR below minIsr). A partition being reassigned
    blocks every broker among its current and target replicas: the reassignment moves data
    between them, and Kafka's own guidance is not to restart them until it completes.
    """
    blockers = []
    for p in cluster.partitions:
        if node_id not in p.replicas:
            continue
        missing = tuple(r for r in p.replicas if r not in p.isr)
        if p.isr == (node_id,) and len(p.replicas) > 1:
            # Its last in-sync replica, while another catches up: restarting it takes the
            # partition offline, whatever min.insync.replicas says.
            blockers.append(
                Blocker(
                    f"{p.name} has this node as its only in-sync replica (replicas "
                    f"{list(p.replicas)}): restarting it takes the partition offline",
                    p.name,
                    missing,
                )
            )
            continue
        if len(p.replicas) <= p.min_isr:
            continue
        if len(p.isr) < p.min_isr:
            blockers.append(
                Blocker(
                    f"{p.name} is under min.insync.replicas ({len(p.isr)} < {p.min_isr})",
                    p.name,
                    missing,
                    p.min_isr + 1 - len(p.isr),
                )
            )
        elif len(p.isr) == p.min_isr and node_id in p.isr:
            blockers.append(
                Blocker(
                    f"{p.name} has ISR {list(p.isr)} = min.insync.replicas {p.min_isr} "
                    "with this node",
                    p.name,
                    missing,
                )
            )
    for r in cluster.reassignments:
        if node_id in r.replicas or node_id in r.adding:
            blockers.append(
                Blocker(
                    f"{r.name} is being reassigned (replicas {list(r.replicas)}, adding "
                    f"{list(r.adding)}, removing {list(r.removing)})",
                    r.name,
                    r.adding,
                )
            )
    return blockers


def voter_caught_up(
    voter_id: int, quorum: QuorumInfo, fetch_timeout_ms: int, *, since_ms: int | None = None
) -> bool:
    """A voter is caught up if it is the leader, or its last caught-up time is within the fetch
    timeout of the leader's (both on the leader's clock). `since_ms`: also require a caught-up
    time after that moment (the leader's time when the node was restarted), which proves the
    new process fetched, whatever the roller's clock says."""
    if voter_id == quorum.leader_id:
        return True
    leader = next((v for v in quorum.voters if v.node_id == quorum.leader_id), None)
    voter = next((v for v in quorum.voters if v.node_id == voter_id), None)
    if leader is None or voter is None:
        return False
    if leader.last_caught_up_ms is None or voter.last_caught_up_ms is None:
        return False
    if since_ms is not None and voter.last_caught_up_ms <= since_ms:
        return False
    return leader.last_caught_up_ms - voter.last_caught_up_ms <= fetch_timeout_ms


def voter_lag(voter_id: int, quorum: QuorumInfo) -> int | None:
    """Records of the metadata log the voter has yet to fetch (the leader's log end offset less
    its own), or None when either is not reported. A voter catching up shows progress by it."""
    ends = {v.node_id: v.log_end_offset for v in quorum.voters}
    leader, own = ends.get(quorum.leader_id), ends.get(voter_id)
    if leader is None or own is None:
        return None
    return max(0, leader - own)


def quorum_blocker(node_id: int, cluster: ClusterView) -> Blocker | None:
    """Why restarting controller `node_id` would lose the KRaft quorum's majority, or None.

    Without the node being rolled, a majority of all voters must still be caught up (within the
    cluster's own `controller.quorum.fetch.timeout.ms`): caughtUp >= (voters + 2) // 2. One
    voter: allowed (there is no other way to roll it). Two voters: the other must be caught up.
    """
    quorum = cluster.quorum
    if quorum is None:
        return Blocker("the KRaft quorum could not be described", "quorum")
    voters = quorum.voters
    if node_id not in {v.node_id for v in voters} or len(voters) == 1:
        return None
    leader = next((v for v in voters if v.node_id == quorum.leader_id), None)
    if leader is None or leader.last_caught_up_ms is None:
        return Blocker(f"the quorum leader {quorum.leader_id} is not among the voters", "quorum")
    timeout = cluster.quorum_fetch_timeout_ms
    caught_up = [
        v.node_id
        for v in voters
        if v.node_id != node_id and voter_caught_up(v.node_id, quorum, timeout)
    ]
    lagging = tuple(
        v.node_id for v in voters if v.node_id != node_id and v.node_id not in caught_up
    )
    needed = 1 if len(voters) == 2 else (len(voters) + 2) // 2
    if len(caught_up) < needed:
        return Blocker(
            f"only {len(caught_up)} other voter(s) {sorted(caught_up)} of {len(voters)} are "
            f"caught up within {timeout} ms; {needed} needed",
            "quorum",
            lagging,
            needed - len(caught_up),
        )
    return None


def restart_blockers(node: Node, cluster: ClusterView | None) -> list[Blocker]:
    """Everything that forbids restarting `node` now; empty means it may be restarted."""
    if cluster is None:
        return [Blocker("the cluster could not be observed through the Kafka Admin API", "cluster")]
    blockers: list[Blocker] = []
    if node.is_controller:
        blocker = quorum_blocker(node.node_id, cluster)
        if blocker:
            blockers.append(blocker)
    if node.is_broker:
        blockers += availability_blockers(node.node_id, cluster)
    return blockers


def catching_up(node_id: int, cluster: ClusterView) -> list[PartitionInfo]:
    """The partitions with a replica on `node_id` whose ISR does not (yet) include it."""
    return [p for p in cluster.partitions if node_id in p.replicas and node_id not in p.isr]


@dataclass(frozen=True, slots=True)
class Baseline:
    """Where a node stood just before its restart: what the wait after it must give back.

    A restart takes a broker out of the ISRs it was in; it cannot take it out of one it was not
    in (a follower already lagging, a partition with an offline member), and waiting for it to
    join those would wait for something the restart did not take away, possibly forever. Same
    for a controller whose voter was not caught up before its restart."""

    out_of_sync: frozenset[str] = frozenset()  # partitions whose ISR it was not in
    voter_caught_up: bool = True


def baseline(node: Node, cluster: ClusterView | None) -> Baseline:
    """The node's baseline in `cluster` (None: not observed, so everything is waited for)."""
    if cluster is None:
        return Baseline()
    out = frozenset(p.name for p in catching_up(node.node_id, cluster)) if node.is_broker else None
    caught_up = True
    if node.is_controller and cluster.quorum is not None:
        voters = {v.node_id for v in cluster.quorum.voters}
        caught_up = node.node_id not in voters or voter_caught_up(
            node.node_id, cluster.quorum, cluster.quorum_fetch_timeout_ms
        )
    return Baseline(out or frozenset(), caught_up)


def rejoining(
    node_id: int, cluster: ClusterView, before: Baseline
) -> tuple[list[PartitionInfo], list[PartitionInfo]]:
    """After a restart: the partitions the broker must still rejoin (it was in their ISR before
    the restart and is not now), and those it is out of but already was before."""
    out = catching_up(node_id, cluster)
    return (
        [p for p in out if p.name not in before.out_of_sync],
        [p for p in out if p.name in before.out_of_sync],
    )


def unbalanced(cluster: ClusterView, ids: Iterable[int]) -> list[tuple[str, int]]:
    """The partitions whose preferred leader (first replica) is one of `ids`, is in sync, and
    does not lead: what a preferred leader election would give back to them."""
    wanted = set(ids)
    return [
        (p.topic, p.partition)
        for p in cluster.partitions
        if p.replicas
        and p.replicas[0] in wanted
        and p.replicas[0] in p.isr
        and p.leader != p.replicas[0]
    ]


def describe_blockers(blockers: list[Blocker], limit: int = 3) -> str:
    """`a; b; c (and 12 more), waiting on nodes 1, 2`: for a live line, a log line or an error."""
    if not blockers:
        return "nothing"
    text = "; ".join(b.reason for b in blockers[:limit])
    if len(blockers) > limit:
        text += f" (and {len(blockers) - limit} more)"
    waiting = sorted({n for b in blockers for n in b.waiting_on})
    if waiting:
        text += f"; waiting on node{'s' if len(waiting) > 1 else ''} "
        text += ", ".join(map(str, waiting))
    return text


def describe_partitions(partitions: list[PartitionInfo], limit: int = 5) -> str:
    names = ", ".join(p.name for p in partitions[:limit])
    if len(partitions) > limit:
        names += f" and {len(partitions) - limit} more"
    return names

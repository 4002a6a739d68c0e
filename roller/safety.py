"""The roller's safety rules, as pure functions of what was observed.

Order, availability and quorum follow Strimzi's KafkaRoller (see docs/architecture.md); each
returns its reason as text so that a deferral or failure can say exactly why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from roller.model import ClusterView, Node, QuorumInfo

# controller.quorum.fetch.timeout.ms: a voter whose last caught-up time is within this of the
# leader's counts as caught up.
QUORUM_FETCH_TIMEOUT_MS = 2000


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


def availability_blockers(node_id: int, cluster: ClusterView, limit: int = 3) -> list[str]:
    """Why restarting broker `node_id` now would take a partition below min.insync.replicas.

    For each partition with a replica on the node: replicas <= minIsr never blocks (such a topic
    can never satisfy acks=all with a replica down, and waiting will not change that); ISR below
    minIsr with the node a replica blocks (it is already under-replicated); ISR exactly minIsr
    with the node in it blocks (restarting it would drop the ISR below minIsr).
    """
    reasons = []
    for p in cluster.partitions:
        if node_id not in p.replicas or len(p.replicas) <= p.min_isr:
            continue
        name = f"{p.topic}-{p.partition}"
        if len(p.isr) < p.min_isr:
            reasons.append(f"{name} is under min.insync.replicas ({len(p.isr)} < {p.min_isr})")
        elif len(p.isr) == p.min_isr and node_id in p.isr:
            reasons.append(
                f"{name} has ISR {list(p.isr)} = min.insync.replicas {p.min_isr} with this node"
            )
        if len(reasons) >= limit:
            break
    return reasons


def quorum_blocker(
    node_id: int, quorum: QuorumInfo | None, fetch_timeout_ms: int = QUORUM_FETCH_TIMEOUT_MS
) -> str | None:
    """Why restarting controller `node_id` would lose the KRaft quorum's majority, or None.

    A voter is caught up if it is the leader or its last caught-up time is within the fetch
    timeout of the leader's. Without the node being rolled, a majority of all voters must still
    be caught up: caughtUp >= (voters + 2) // 2. One voter: allowed (there is no other way to
    roll it). Two voters: the other must be caught up.
    """
    if quorum is None:
        return "the KRaft quorum could not be described"
    voters = quorum.voters
    if node_id not in {v.node_id for v in voters}:
        return None
    if len(voters) == 1:
        return None
    leader = next((v for v in voters if v.node_id == quorum.leader_id), None)
    if leader is None or leader.last_caught_up_ms is None:
        return f"the quorum leader {quorum.leader_id} is not among the voters"
    caught_up = [
        v.node_id
        for v in voters
        if v.node_id != node_id
        and (
            v.node_id == quorum.leader_id
            or (
                v.last_caught_up_ms is not None
                and leader.last_caught_up_ms - v.last_caught_up_ms <= fetch_timeout_ms
            )
        )
    ]
    needed = 1 if len(voters) == 2 else (len(voters) + 2) // 2
    if len(caught_up) < needed:
        return (
            f"only {len(caught_up)} other voter(s) {sorted(caught_up)} of {len(voters)} are "
            f"caught up; {needed} needed"
        )
    return None


def restart_blockers(node: Node, cluster: ClusterView | None) -> list[str]:
    """Everything that forbids restarting `node` now; empty means it may be restarted."""
    if cluster is None:
        return ["the cluster could not be observed through the Kafka Admin API"]
    reasons: list[str] = []
    if node.is_controller:
        blocker = quorum_blocker(node.node_id, cluster.quorum)
        if blocker:
            reasons.append(blocker)
    if node.is_broker:
        reasons += availability_blockers(node.node_id, cluster)
    return reasons

"""kafka-python's answers as rollguard's values (pure, table-tested): the topics' partitions with
their ISRs, min ISR, reassignments in flight, the KRaft quorum and the racks become one
`ClusterView` (`kafka_admin.KafkaObserver` asks, this says what the answers mean).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rollguard.roller.model import (
    DEFAULT_QUORUM_FETCH_TIMEOUT_MS,
    ClusterView,
    PartitionInfo,
    QuorumInfo,
    Reassignment,
    VoterInfo,
)


def cluster_view(
    partitions: list[Mapping[str, Any]],
    min_isr: Mapping[str, int],
    quorum: Mapping[str, Any] | None,
    controller_id: int | None,
    reassignments: Mapping[Any, Mapping[str, Any]] | None = None,
    fetch_timeout_ms: int = DEFAULT_QUORUM_FETCH_TIMEOUT_MS,
    racks: Mapping[int, str] | None = None,
) -> ClusterView:
    """Build the view from kafka-python's result dicts (pure, so it is table-tested)."""
    infos = []
    for topic in partitions:
        name = topic["name"]
        for p in topic["partitions"]:
            infos.append(
                PartitionInfo(
                    name,
                    p["partition_index"],
                    tuple(p["replica_nodes"]),
                    # Kafka never empties an ISR: its last member stays listed while offline.
                    tuple(r for r in p["isr_nodes"] if r not in (p.get("offline_replicas") or ())),
                    min_isr.get(name, 1),
                    bool(topic.get("is_internal")),
                    _leader(p.get("leader_id")),
                )
            )
    moving = tuple(
        sorted(
            (
                Reassignment(
                    tp.topic,
                    tp.partition,
                    tuple(r.get("replicas") or ()),
                    tuple(r.get("adding_replicas") or ()),
                    tuple(r.get("removing_replicas") or ()),
                )
                for tp, r in (reassignments or {}).items()
            ),
            key=lambda r: (r.topic, r.partition),
        )
    )
    quorum_info = None
    if quorum is not None:
        partition = quorum["topics"][0]["partitions"][0]
        voters = tuple(
            VoterInfo(
                v["replica_id"],
                v["last_caught_up_timestamp"] if v["last_caught_up_timestamp"] >= 0 else None,
                v["log_end_offset"] if v.get("log_end_offset", -1) >= 0 else None,
            )
            for v in partition["current_voters"]
        )
        quorum_info = QuorumInfo(partition["leader_id"], voters)
    active = quorum_info.leader_id if quorum_info is not None else controller_id
    return ClusterView(
        tuple(infos),
        quorum_info,
        active,
        moving,
        fetch_timeout_ms,
        tuple(sorted((racks or {}).items())),
    )


def _leader(value: object) -> int | None:
    return value if isinstance(value, int) and value >= 0 else None


def broker_racks(cluster: Mapping[str, Any]) -> dict[int, str]:
    """broker.rack of each broker of a DescribeCluster answer that reports one."""
    racks = {}
    for b in cluster.get("brokers") or []:
        node = b.get("broker_id", b.get("node_id"))
        if isinstance(node, int) and b.get("rack"):
            racks[node] = str(b["rack"])
    return racks

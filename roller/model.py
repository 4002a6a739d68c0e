"""What the roller knows about a cluster: nodes, their platform state, partitions and quorum.

Frozen values only: observations are taken by the I/O layer (platform, Kafka admin, agents) and
handed to pure decision functions (`roller.safety`, `roller.progress`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    BROKER = "broker"
    CONTROLLER = "controller"


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    name: str  # pod name on Kubernetes, the inventory's name elsewhere
    roles: frozenset[Role]
    agent_url: str | None = None

    @property
    def is_controller(self) -> bool:
        return Role.CONTROLLER in self.roles

    @property
    def is_broker(self) -> bool:
        return Role.BROKER in self.roles

    def __str__(self) -> str:
        return f"{self.name} (node {self.node_id}, {'+'.join(sorted(self.roles))})"


# Container and scheduling states in which a pod will not become ready by waiting.
STUCK_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "ContainerCreating",
        "CreateContainerConfigError",
        "Unschedulable",
    }
)


@dataclass(frozen=True, slots=True)
class PlatformView:
    """A node as its platform sees it (a pod's status, or an inventory node's agent)."""

    exists: bool
    ready: bool
    up_to_date: bool  # runs the desired revision; a node not up to date needs a restart
    stuck: str | None = None  # a STUCK_REASONS member when the node will not get ready alone
    instance: str | None = None  # pod UID: changes when the node was really restarted
    opted_out: bool = False  # the skip annotation


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int


@dataclass(frozen=True, slots=True)
class VoterInfo:
    node_id: int
    last_caught_up_ms: int | None  # None: never caught up, or unknown


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    leader_id: int
    voters: tuple[VoterInfo, ...]


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Kafka's own view, from the Admin API, taken once per pass."""

    partitions: tuple[PartitionInfo, ...]
    quorum: QuorumInfo | None
    active_controller: int | None


CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def check_cluster(name: str) -> str:
    """A cluster name as it appears in datasets and reports (and their file paths)."""
    if not CLUSTER_NAME.fullmatch(name):
        raise ValueError(f"{name!r}: a cluster name is letters, digits, '.', '_' and '-'")
    return name

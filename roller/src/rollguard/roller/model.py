"""What the roller knows about a cluster: nodes, their platform state, partitions and quorum.

Frozen values only: observations are taken by the I/O layer (platform, Kafka admin, agents) and
handed to pure decision functions (`rollguard.roller.roll.rules.safety`, `.decide`, `.progress`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from rollguard.shared.states import BrokerState
from rollguard.shared.wire import BrokerStateReport, KafkaBuild


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
    # One run of the node: the pod UID on Kubernetes, the broker JVM's start time (from its
    # agent) on an inventory. It changes exactly when the node was really restarted, so a
    # restart is judged by identity, never by comparing two machines' clocks. None: unknown.
    instance: str | None = None
    opted_out: bool = False  # the skip annotation
    # The platform proves the broker process is not running (pod terminated or crash-looping,
    # an inventory node's health command): the only case where a node whose agent cannot be
    # read may be force-restarted without an explicit --on-agent-unreachable force.
    process_gone: bool = False


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int
    internal: bool = False  # __consumer_offsets, __transaction_state...: they count the same
    # The current leader (-1 in Kafka's answer is None here: no leader, or not reported). Only
    # the preferred leader election after a batch reads it; no safety rule does.
    leader: int | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition reassignment in flight (ListPartitionReassignments)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]  # current replicas: the union of the old and the target set
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class VoterInfo:
    node_id: int
    last_caught_up_ms: int | None  # None: never caught up, or unknown
    # The end of its copy of the metadata log (DescribeQuorum); None: not reported. A voter
    # catching up after a long restart shows its progress by it.
    log_end_offset: int | None = None


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    leader_id: int
    voters: tuple[VoterInfo, ...]


# Kafka's default controller.quorum.fetch.timeout.ms, used when the cluster does not say.
DEFAULT_QUORUM_FETCH_TIMEOUT_MS = 2000


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Kafka's own view, from the Admin API, taken once per pass."""

    partitions: tuple[PartitionInfo, ...]
    quorum: QuorumInfo | None
    active_controller: int | None
    reassignments: tuple[Reassignment, ...] = ()
    # controller.quorum.fetch.timeout.ms as the cluster has it (DescribeConfigs).
    quorum_fetch_timeout_ms: int = DEFAULT_QUORUM_FETCH_TIMEOUT_MS
    # broker.rack of each broker that reports one (DescribeCluster), as (node id, rack) pairs
    # in node order; empty when no broker does. Batches prefer one rack, never trust it.
    racks: tuple[tuple[int, str], ...] = ()

    def rack_of(self) -> dict[int, str]:
        return dict(self.racks)


# ---- what an agent said ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentReport:
    url: str
    report: BrokerStateReport


# Where an agent answers on Kubernetes, by default: its pod's name under the pods' headless service.
DEFAULT_AGENT_URL = "https://{pod}.{service}.{namespace}.svc:8443"


class Unavailable(StrEnum):
    """Why an agent gave no report, by what the roller may conclude from it."""

    UNREACHABLE = "unreachable"  # no HTTP answer: host down, port closed, timed out
    UNRESOLVED = "unresolved"  # the URL's host has no address: a configuration error
    TLS_REFUSED = "tls-refused"  # the agent refused our client certificate (TLS alert)
    TLS_UNTRUSTED = "tls-untrusted"  # the agent's certificate failed our verification


@dataclass(frozen=True, slots=True)
class AgentUnavailable:
    """No usable report. `status` is the HTTP status, or None when there was no HTTP answer;
    `reason` is the agent's JSON reason (e.g. `broker-state-missing`), `http-<status>`, or an
    `Unavailable` value."""

    url: str
    status: int | None
    reason: str
    message: str
    kafka: KafkaBuild | None = None  # a controller-only node's Kafka, with broker-state-missing

    @property
    def tls_failure(self) -> bool:
        return self.reason in (Unavailable.TLS_REFUSED, Unavailable.TLS_UNTRUSTED)

    @property
    def not_ready(self) -> bool:
        """The agent answered 503 with its reason: it is there, its broker is not ready."""
        return self.status == 503

    def describe(self) -> str:
        """Why, with the agent's URL: a message about an agent always says which one.

        `https://kafka-1:8443/v1/broker-state: unreachable: ConnectError: [Errno 111] ...`
        `https://kafka-1:8443/v1/broker-state: HTTP 503 jmx-unreachable: ...`
        """
        status = f"HTTP {self.status} " if self.status is not None else ""
        message = f": {self.message}" if self.message else ""
        return f"{self.url}: {status}{self.reason}{message}"


AgentAnswer = AgentReport | AgentUnavailable

# The agent of a controller-only KRaft node answers this once the node's server has started:
# it works, but the node has no BrokerState (controllers never register it), so its readiness
# comes from the quorum.
BROKER_STATE_MISSING = "broker-state-missing"
# ... and this before (no BrokerState, and the server's start not registered yet): a controller
# whose voter already fetches from the leader may still be replaying the metadata log.
SERVER_STARTING = "server-starting"


def kafka_build(answer: AgentAnswer | None) -> KafkaBuild | None:
    """The Kafka the node runs, by its agent (None: not said, or not started yet)."""
    if isinstance(answer, AgentReport):
        return answer.report.kafka
    return answer.kafka if answer is not None else None


def is_starting(answer: AgentAnswer | None) -> bool:
    """Its agent says the node's Kafka server has not finished starting."""
    return isinstance(answer, AgentUnavailable) and answer.reason == SERVER_STARTING


def is_recovering(answer: AgentAnswer | None) -> bool:
    """In log recovery, or loading its logs: never to be restarted.

    A real KRaft broker loads its logs in STARTING as often as in RECOVERY, so the agent's
    recovery figures decide, in either state; RECOVERY without them still counts (Strimzi's
    agent, or the moment between the state change and the gauges). Loading after a clean stop
    counts too: Kafka deletes the clean-shutdown marker when it reads it, so a broker stopped
    while loading comes back into a full recovery.
    """
    if not isinstance(answer, AgentReport):
        return False
    report = answer.report
    return report.recovery is not None or report.broker_state is BrokerState.RECOVERY


def describe_answer(answer: AgentAnswer | None) -> str:
    if answer is None:
        return "no agent configured"
    if isinstance(answer, AgentReport):
        return answer.report.describe()
    return f"{'not ready' if answer.not_ready else 'unavailable'} ({answer.describe()})"


CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def check_cluster(name: str) -> str:
    """A cluster name as it appears in datasets and reports (and their file paths)."""
    if not CLUSTER_NAME.fullmatch(name):
        raise ValueError(f"{name!r}: a cluster name is letters, digits, '.', '_' and '-'")
    return name


@dataclass(frozen=True, slots=True)
class CanarySample:
    """One send of the roll's canary (`--canary`): when it was sent (the monotonic clock), and
    its acknowledgement's latency in seconds (None: it failed; a send not answered yet is no
    sample)."""

    at: float
    latency: float | None
    partition: int | None = None  # the partition it was sent to (None: before metadata)


@dataclass(frozen=True, slots=True)
class CanaryArrival:
    """One record of the roll's canary read back: when (the monotonic clock), and how long after
    it was sent (end to end, in seconds)."""

    at: float
    latency: float
    partition: int | None = None

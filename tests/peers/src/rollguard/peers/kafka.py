"""A simulated KRaft Kafka cluster that speaks the real Kafka wire protocol, for tests.

A real Kafka runs here too, from Kafka's own jars (`rollguard.peers.realkafka`, the tests in
tests/real/), and proves the roll on real brokers. This peer is for what a real cluster cannot
be made to show on demand, or on two cores: 100 to 1,000 brokers, reassignments in flight, a
lagging voter, a chosen catch-up time per broker, racks. rollguard decides when a broker may be
restarted from what the cluster says about itself: which brokers are registered, which
replicas are in sync, what `min.insync.replicas` is in force, and how far each KRaft
controller lags the quorum leader. Mocking kafka-python would test our assumptions about
kafka-python; this peer instead answers kafka-python's real client over real TCP sockets on
127.0.0.1, so the bytes on the wire, the version negotiation and the client's own parsing
are all exercised.

Every request is decoded, and every response encoded, with kafka-python's own protocol
classes (`kafka.protocol.*`), so the peer never hand-rolls a Kafka byte layout. Served:
ApiVersions, Metadata, DescribeConfigs, DescribeCluster, DescribeQuorum, ElectLeaders and
ListPartitionReassignments. ApiVersions is served up to v3 only, so the v4 probe kafka-python
sends first is refused the way Kafka refuses it (UNSUPPORTED_VERSION, answered in v0 format)
and the client's downgrade path runs. Any other API, or an unadvertised version, closes the
connection, as Kafka does. A KRaft broker forwards ElectLeaders and ListPartitionReassignments
to the active controller; here every broker answers them from the one shared state.

The state and its timings (fencing, replication catch-up, elections, reassignments, the
quorum) live in `kafka_model`; tests change it from their own thread while the cluster
serves from a background thread with its own asyncio loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import logging
import random
import socket
import struct
import threading
import uuid
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, Self

import kafka.errors as Errors
from kafka.admin import ACLOperation, ConfigResourceType, ConfigSourceType, ConfigType
from kafka.protocol.admin import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.schemas.fields.codecs import Int32

from rollguard.peers.kafka_model import (
    CONSUMER_OFFSETS,
    DEFAULT_CATCH_UP_S,
    DEFAULT_QUORUM_CATCH_UP_S,
    DEFAULT_UNFENCE_DELAY_S,
    INTERNAL_TOPIC_PARTITIONS,
    OBSERVER_SESSION_TIMEOUT_MS,
    PREFERRED,
    TRANSACTION_STATE,
    UNCLEAN,
    ClusterModel,
    PartitionKey,
    PartitionState,
    Phase,
    Placement,
    QuorumReplica,
    QuorumState,
    TopicSpec,
    internal_topic_specs,
)

__all__ = [
    "API_VERSIONS",
    "CONSUMER_OFFSETS",
    "DEFAULT_CATCH_UP_S",
    "DEFAULT_QUORUM_CATCH_UP_S",
    "DEFAULT_UNFENCE_DELAY_S",
    "INTERNAL_TOPIC_PARTITIONS",
    "OBSERVER_SESSION_TIMEOUT_MS",
    "TRANSACTION_STATE",
    "KafkaClusterSim",
    "PartitionState",
    "QuorumReplica",
    "QuorumState",
    "RequestRecord",
    "TopicSpec",
]

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
METADATA_TOPIC = "__cluster_metadata"
#: `socket.request.max.bytes` default: larger frames close the connection.
MAX_FRAME_BYTES = 100 * 1024 * 1024
#: The `metadata.version` feature level reported in ApiVersions v3 (3.9-IV0).
METADATA_VERSION_LEVEL = 21

#: What the peer serves, by API key: the single source for both ApiVersions and dispatch.
#: ElectLeaders 0-2 and ListPartitionReassignments 0 are what Kafka 3.9 serves, and the
#: highest versions kafka-python 3.0.12 sends.
API_VERSIONS: Mapping[int, tuple[int, int]] = MappingProxyType(
    {
        ApiKey.Metadata: (0, 13),
        ApiKey.ApiVersions: (0, 3),
        ApiKey.DescribeConfigs: (0, 4),
        ApiKey.ElectLeaders: (0, 2),
        ApiKey.ListPartitionReassignments: (0, 0),
        ApiKey.DescribeQuorum: (0, 2),
        ApiKey.DescribeCluster: (0, 2),
    }
)
_REQUEST_CLASSES: Mapping[int, Any] = MappingProxyType(
    {
        ApiKey.Metadata: MetadataRequest,
        ApiKey.ApiVersions: ApiVersionsRequest,
        ApiKey.DescribeConfigs: DescribeConfigsRequest,
        ApiKey.ElectLeaders: ElectLeadersRequest,
        ApiKey.ListPartitionReassignments: ListPartitionReassignmentsRequest,
        ApiKey.DescribeQuorum: DescribeQuorumRequest,
        ApiKey.DescribeCluster: DescribeClusterRequest,
    }
)

# With no authorizer configured Kafka reports every operation the resource type supports.
_TOPIC_OPERATIONS = frozenset(
    op.value
    for op in (
        ACLOperation.READ,
        ACLOperation.WRITE,
        ACLOperation.CREATE,
        ACLOperation.DELETE,
        ACLOperation.ALTER,
        ACLOperation.DESCRIBE,
        ACLOperation.DESCRIBE_CONFIGS,
        ACLOperation.ALTER_CONFIGS,
    )
)
_CLUSTER_OPERATIONS = frozenset(
    op.value
    for op in (
        ACLOperation.CREATE,
        ACLOperation.ALTER,
        ACLOperation.DESCRIBE,
        ACLOperation.CLUSTER_ACTION,
        ACLOperation.DESCRIBE_CONFIGS,
        ACLOperation.ALTER_CONFIGS,
        ACLOperation.IDEMPOTENT_WRITE,
    )
)

_DescribeConfigsResult = DescribeConfigsResponse.DescribeConfigsResult
_ConfigEntry = _DescribeConfigsResult.DescribeConfigsResourceResult
_ConfigSynonym = _ConfigEntry.DescribeConfigsSynonym
_QuorumTopic = DescribeQuorumResponse.TopicData
_QuorumPartition = _QuorumTopic.PartitionData
_ReplicaStateData = _QuorumPartition.ReplicaState
_MetadataTopic = MetadataResponse.MetadataResponseTopic
_MetadataPartition = _MetadataTopic.MetadataResponsePartition
_ElectionResult = ElectLeadersResponse.ReplicaElectionResult
_OngoingTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment


@dataclass(frozen=True)
class RequestRecord:
    """One request a broker of the simulation received; `served` is False if it was refused."""

    broker_id: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    served: bool


@dataclass(frozen=True)
class _ConfigDef:
    topic_name: str | None  # None: a broker-only config
    broker_name: str
    default: str | None
    config_type: ConfigType
    read_only: bool  # for a broker resource: not dynamically updatable, as Kafka reports it
    doc: str


_CONFIGS = (
    _ConfigDef(
        "min.insync.replicas",
        "min.insync.replicas",
        "1",
        ConfigType.INT,
        False,
        "The minimum number of replicas that must acknowledge a write with acks=all.",
    ),
    _ConfigDef(
        "cleanup.policy",
        "log.cleanup.policy",
        "delete",
        ConfigType.LIST,
        False,
        "The retention policy to use on log segments: delete and/or compact.",
    ),
    _ConfigDef(
        "unclean.leader.election.enable",
        "unclean.leader.election.enable",
        "false",
        ConfigType.BOOLEAN,
        False,
        "Whether replicas not in the ISR may be elected leader as a last resort.",
    ),
    _ConfigDef(
        None,
        "controller.quorum.fetch.timeout.ms",
        "2000",
        ConfigType.INT,
        True,
        "Maximum time without a successful fetch from the current leader before a voter "
        "becomes a candidate and triggers an election.",
    ),
    _ConfigDef(
        None,
        "transaction.state.log.min.isr",
        "2",
        ConfigType.INT,
        True,
        "The minimum number of replicas that must acknowledge a write to the transaction "
        "topic (its min.insync.replicas).",
    ),
    _ConfigDef(None, "node.id", None, ConfigType.INT, True, "The node id of this server."),
)
_TOPIC_CONFIG_NAMES = frozenset(d.topic_name for d in _CONFIGS if d.topic_name is not None)
_STATIC_CONFIG_NAMES = frozenset(d.broker_name for d in _CONFIGS if d.broker_name != "node.id")


class KafkaClusterSim:
    """A KRaft Kafka cluster on 127.0.0.1: one listener per broker, answers from a mutable state.

    `voters` are the KRaft controller node ids (default: the brokers, i.e. combined mode);
    they may be separate ids that are not brokers (controller-only nodes). Replicas are placed
    round robin over the brokers (partition p on brokers[p], brokers[p+1], ...), or with
    `placement="rack_aware"` (or a TopicSpec's own `placement`) as KRaft's striped placer puts
    them, over `racks` ({broker id: rack}, reported in Metadata and DescribeCluster).

    Like a real cluster it has `__consumer_offsets` and `__transaction_state`, `internal_topics`
    partitions each (Kafka's default 50; 0 leaves them out); a topic of that name in `topics`
    replaces the default one. `broker_configs` is every broker's static configuration
    (server.properties), of the keys in `_CONFIGS`: `controller.quorum.fetch.timeout.ms`,
    `min.insync.replicas` (also `broker_min_insync_replicas`), `transaction.state.log.min.isr`,
    ...; DescribeConfigs reports them as STATIC_BROKER_CONFIG and the rest as defaults.

    Timings (see `ClusterModel` for the real clusters they come from): a started broker is
    fenced for `unfence_delay` seconds, then rejoins its ISRs over its catch-up time:
    `catch_up[broker]`, else `rejoin_after` (the older name for the default of every broker),
    else `DEFAULT_CATCH_UP_S`. A restarted controller is behind for `quorum_catch_up` seconds.

    `controller_id_from` chooses what Metadata and DescribeCluster report as the controller:
    "quorum_leader" (the default) reports the KRaft quorum leader; "random_alive_broker" is
    what real KRaft brokers do (any alive broker id, since clients cannot reach controllers).
    kafka-python sends ElectLeaders and ListPartitionReassignments to that id, so with
    controller-only voters use "random_alive_broker" for them.
    """

    def __init__(
        self,
        broker_ids: Sequence[int] = (0, 1, 2),
        voters: Sequence[int] | None = None,
        topics: Mapping[str, TopicSpec] | None = None,
        cluster_id: str = "rollguard-sim",
        *,
        broker_min_insync_replicas: int | None = None,
        rejoin_after: float | None = None,
        controller_id_from: Literal["quorum_leader", "random_alive_broker"] = "quorum_leader",
        catch_up: Mapping[int, float] | None = None,
        unfence_delay: float = DEFAULT_UNFENCE_DELAY_S,
        quorum_catch_up: float = DEFAULT_QUORUM_CATCH_UP_S,
        internal_topics: int = INTERNAL_TOPIC_PARTITIONS,
        broker_configs: Mapping[str, str] | None = None,
        racks: Mapping[int, str] | None = None,
        placement: Placement = "round_robin",
    ) -> None:
        if controller_id_from not in ("quorum_leader", "random_alive_broker"):
            raise ValueError(f"unknown controller_id_from: {controller_id_from!r}")
        if internal_topics < 0:
            raise ValueError(f"internal_topics must be >= 0, not {internal_topics}")
        self.cluster_id = cluster_id
        self._controller_id_from = controller_id_from
        self._static_broker_configs = _static_configs(broker_configs, broker_min_insync_replicas)
        all_topics: dict[str, TopicSpec] = {}
        if internal_topics:
            transaction_min_isr = int(
                self._static_broker_configs.get("transaction.state.log.min.isr", "2")
            )
            brokers = max(1, len(set(broker_ids)))  # none: the model names the error
            all_topics.update(internal_topic_specs(brokers, internal_topics, transaction_min_isr))
        all_topics.update(topics or {})
        for name, spec in all_topics.items():
            unknown = sorted(set(spec.configs) - _TOPIC_CONFIG_NAMES)
            if unknown:
                raise ValueError(f"topic {name!r}: unknown topic configs {unknown}")

        self._lock = threading.RLock()
        self._model = ClusterModel(
            broker_ids,
            tuple(broker_ids) if voters is None else voters,
            all_topics,
            racks=racks,
            placement=placement,
            catch_up=catch_up,
            default_catch_up=DEFAULT_CATCH_UP_S if rejoin_after is None else rejoin_after,
            unfence_delay=unfence_delay,
            quorum_catch_up=quorum_catch_up,
        )
        self._broker_ids = self._model.broker_ids
        self._voters = self._model.voters
        self._requests: deque[RequestRecord] = deque(maxlen=10_000)
        #: Bumped by every start and stop of a broker, so a late unfencing knows it is stale.
        self._generation = dict.fromkeys(self._broker_ids, 0)

        # Touched only on the loop thread, except _ports (written under the lock).
        self._ports: dict[int, int] = {}
        # A socket bound to each broker's port for the cluster's life, never listening, so that
        # no client's connection takes the port while the broker is down (Linux gives a stopped
        # listener's ephemeral port to the next outgoing connection: CI, stop 55, `address
        # already in use` at a restart). Connections to a down broker are still refused.
        self._reserved: dict[int, socket.socket] = {}
        self._servers: dict[int, asyncio.Server] = {}
        self._listener_locks = {b: asyncio.Lock() for b in self._broker_ids}
        self._connections: dict[int, set[asyncio.StreamWriter]] = {
            b: set() for b in self._broker_ids
        }
        self._tasks: dict[int, set[asyncio.Task[None]]] = {b: set() for b in self._broker_ids}
        self._unfencings: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # What must stop before the cluster does: a client left reconnecting to a stopped
        # cluster leaks a socket, whose ResourceWarning fails a later test. Called first by
        # `stop`, in order.
        self.before_stop: list[Callable[[], object]] = []

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the loop thread and one listener per broker; returns once all listen."""
        if self._loop is not None:
            raise RuntimeError("the simulated cluster is already started")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="kafka-peer", daemon=True
        )
        self._thread.start()
        try:
            for broker in self._broker_ids:
                self._call(self._open_listener(broker))
        except BaseException:
            self.stop()
            raise
        log.info("simulated Kafka cluster %s listening: %s", self.cluster_id, self.bootstrap)
        return self

    def stop(self) -> None:
        """Close every listener and connection and stop the loop thread (`before_stop` first)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        while self.before_stop:
            self.before_stop.pop(0)()
        try:
            self._call(self._shutdown())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        """`bootstrap_servers` for clients: every broker, running or not, as host:port."""
        return ",".join(self.address(broker) for broker in self._broker_ids)

    def address(self, broker_id: int) -> str:
        return f"{HOST}:{self.port(broker_id)}"

    def port(self, broker_id: int) -> int:
        with self._lock:
            if broker_id not in self._ports:
                raise ValueError(f"broker {broker_id} has no port (unknown, or not started)")
            return self._ports[broker_id]

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return self._broker_ids

    @property
    def voters(self) -> tuple[int, ...]:
        return self._voters

    @property
    def racks(self) -> Mapping[int, str]:
        return MappingProxyType(self._model.racks)

    def isr_history(self) -> list[tuple[float, PartitionKey, int]]:
        """Every ISR change so far: (time, (topic, partition), ISR size), the first at start."""
        with self._lock:
            return list(self._model.isr_history)

    def phase_history(self) -> list[tuple[float, int, Phase]]:
        """Every broker phase change so far: (time, broker, stopped|fenced|unfenced)."""
        with self._lock:
            return list(self._model.phase_history)

    def min_insync_replicas(self, topic: str) -> int:
        """The topic's effective min.insync.replicas (its own, else the broker's, else 1)."""
        spec = self._model.topics[topic]
        if spec.min_insync_replicas is not None:
            return spec.min_insync_replicas
        return int(self._static_broker_configs.get("min.insync.replicas", "1"))

    def topics(self) -> dict[str, TopicSpec]:
        """Every topic, internal ones included."""
        return dict(self._model.topics)

    def running_brokers(self) -> tuple[int, ...]:
        """Brokers whose process runs: unfenced, or started and still fenced."""
        with self._lock:
            return tuple(b for b in self._broker_ids if self._model.phase(b) != "stopped")

    def unfenced_brokers(self) -> tuple[int, ...]:
        """The brokers Metadata lists: started and unfenced."""
        with self._lock:
            return self._model.unfenced()

    def broker_phase(self, broker_id: int) -> Phase:
        """ "stopped", "fenced" (started, catching up with the metadata log) or "unfenced"."""
        with self._lock:
            return self._model.phase(broker_id)

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id as Metadata v10+ reports it (stable for a cluster id and name)."""
        return uuid.uuid5(uuid.NAMESPACE_URL, f"kafka-peer:{self.cluster_id}:topic:{topic}")

    @property
    def requests(self) -> tuple[RequestRecord, ...]:
        """Every request received so far (the latest 10000), oldest first."""
        with self._lock:
            return tuple(self._requests)

    # -- brokers and partitions --------------------------------------------------------------

    @property
    def rejoin_after(self) -> float:
        """The catch-up time of brokers without their own (`catch_up`), in seconds."""
        with self._lock:
            return self._model.default_catch_up

    @rejoin_after.setter
    def rejoin_after(self, seconds: float) -> None:
        with self._lock:
            self._model.set_default_catch_up(seconds)

    def set_catch_up(self, broker_id: int, seconds: float) -> None:
        """The broker's replication catch-up time, in seconds, from its next start on."""
        with self._lock:
            self._model.set_catch_up(broker_id, seconds)

    def catching_up(self, broker_id: int) -> int:
        """How many partitions of the running broker have it out of their ISR."""
        return len(self.catching_up_partitions(broker_id))

    def catching_up_partitions(self, broker_id: int) -> tuple[PartitionKey, ...]:
        """The (topic, partition)s of the running broker that have it out of their ISR."""
        with self._lock:
            self._model.tick()
            return self._model.catching_up(broker_id)

    def stop_broker(self, broker_id: int) -> None:
        """Stop a broker (no-op if stopped): its listener closes, its connections are reset.

        Like a KRaft broker that shut down and was fenced, it leaves Metadata's broker list
        (DescribeCluster v2 still lists it, fenced, when asked to include fenced brokers) and
        every ISR but the ones it is the last member of; partitions it led move to the first
        remaining ISR member in replica order, or have no leader (-1).
        """
        with self._lock:
            if self._model.phase(broker_id) == "stopped":
                return
            self._generation[broker_id] += 1
        self._call(self._close_listener(broker_id))
        with self._lock:
            self._model.stop_broker(broker_id)
        log.info("broker %d stopped", broker_id)

    def start_broker(self, broker_id: int) -> None:
        """Restart a broker (no-op if running) on the same port; it starts fenced.

        After `unfence_delay` seconds its listener opens and it is in Metadata; over its
        catch-up time it rejoins the ISRs of its partitions one by one (`catching_up` counts
        those left). Leadership it lost does not come back on its own: see
        `elect_preferred_leaders`, or ElectLeaders from a client.
        """
        with self._lock:
            if not self._model.start_broker(broker_id):
                return
            self._generation[broker_id] += 1
            generation = self._generation[broker_id]
            delay = self._model.unfence_delay
        log.info("broker %d started, fenced for %.3gs", broker_id, delay)
        if delay <= 0:
            self._call(self._unfence(broker_id, generation))
            return
        loop = self._loop
        if loop is None:
            raise RuntimeError("the simulated cluster is not started")
        asyncio.run_coroutine_threadsafe(self._unfence_later(broker_id, generation, delay), loop)

    def stop_node(self, node_id: int) -> None:
        """Stop every role `node_id` has: its broker and/or its controller (combined mode)."""
        if node_id not in self._broker_ids and node_id not in self._voters:
            raise ValueError(f"unknown node {node_id}")
        if node_id in self._broker_ids:
            self.stop_broker(node_id)
        if node_id in self._voters:
            self.stop_voter(node_id)

    def start_node(self, node_id: int) -> None:
        """Start every role `node_id` has: its controller and/or its broker."""
        if node_id not in self._broker_ids and node_id not in self._voters:
            raise ValueError(f"unknown node {node_id}")
        if node_id in self._voters:
            self.start_voter(node_id)
        if node_id in self._broker_ids:
            self.start_broker(node_id)

    def set_isr(self, topic: str, partition: int, isr: Sequence[int]) -> None:
        """Set a partition's ISR (unfenced replicas only); a leader outside it is replaced.

        Replicas left out stay out until their broker restarts, like lagging followers.
        """
        with self._lock:
            self._model.tick()
            self._model.set_isr(topic, partition, isr)

    def elect_preferred_leaders(self) -> int:
        """Move leadership back to each partition's first replica if it is an unfenced ISR member.

        Returns how many partitions changed leader (Kafka does this on its own only every
        `leader.imbalance.check.interval.seconds`, 300 s by default).
        """
        with self._lock:
            self._model.tick()
            return self._model.elect_preferred_leaders()

    def partition_state(self, topic: str, partition: int) -> PartitionState:
        with self._lock:
            self._model.tick()
            return self._model.partition_state(topic, partition)

    def start_reassignment(self, topic: str, partition: int, target: Sequence[int]) -> None:
        """Start moving a partition to `target`; see `ClusterModel.start_reassignment`."""
        with self._lock:
            self._model.tick()
            self._model.start_reassignment(topic, partition, target)

    def finish_reassignment(self, topic: str, partition: int) -> None:
        """The adding replicas caught up: they join the ISR and the reassignment completes."""
        with self._lock:
            self._model.tick()
            self._model.finish_reassignment(topic, partition)

    # -- the KRaft quorum --------------------------------------------------------------------

    def set_voter_lag(self, voter_id: int, ms: int, *, offsets: int = 0) -> None:
        """Make a running follower's last_caught_up_timestamp trail the leader's by `ms`.

        `offsets` also holds its log_end_offset that many records behind the high watermark.
        """
        with self._lock:
            self._model.set_voter_lag(voter_id, ms, offsets=offsets)

    def stop_voter(self, voter_id: int) -> None:
        """Stop a controller (no-op if stopped): the leader's view of it freezes.

        A stopped leader is replaced (epoch + 1) by the running voter with the longest log if
        a majority of voters still runs, and knows nothing of the stopped voter (-1 times);
        without a majority the quorum has no leader (-1).
        """
        with self._lock:
            if self._model.stop_voter(voter_id):
                log.info("voter %d stopped; quorum leader %d", voter_id, self._model.quorum_leader)

    def start_voter(self, voter_id: int) -> None:
        """Restart a controller (no-op if running): it fetches again, caught up after a delay.

        Until then its lastCaughtUpTimestamp stays where it was. A leaderless quorum that
        regains a majority elects a leader.
        """
        with self._lock:
            if self._model.start_voter(voter_id):
                log.info("voter %d started; quorum leader %d", voter_id, self._model.quorum_leader)

    def set_quorum_catch_up(self, node_id: int, seconds: float) -> None:
        """How long a voter (or observer broker) is behind the leader after its next start."""
        with self._lock:
            self._model.set_quorum_catch_up(node_id, seconds)

    def quorum_catching_up(self, node_id: int) -> bool:
        with self._lock:
            return self._model.quorum_catching_up(node_id)

    def set_quorum_leader(self, voter_id: int) -> None:
        """Make a running voter the quorum leader (a new epoch if it changes)."""
        with self._lock:
            self._model.set_quorum_leader(voter_id)

    def advance_quorum(self, records: int = 1) -> None:
        """Append records to the metadata log: the high watermark and running replicas move."""
        with self._lock:
            self._model.advance_quorum(records)

    def quorum_state(self) -> QuorumState:
        with self._lock:
            return self._model.quorum_state()

    # -- helpers (hold the lock) -------------------------------------------------------------

    def _controller_id(self) -> int:
        if self._controller_id_from == "quorum_leader":
            return self._model.quorum_leader
        alive = self._model.unfenced()
        return random.choice(alive) if alive else -1

    def _directory_id(self, node_id: int) -> uuid.UUID:
        return uuid.uuid5(uuid.NAMESPACE_URL, f"kafka-peer:{self.cluster_id}:dir:{node_id}")

    # -- the loop thread: listeners and connections -----------------------------------------

    def _call(self, coro: Coroutine[Any, Any, None], timeout: float = 10) -> None:
        if self._loop is None:
            coro.close()
            raise RuntimeError("the simulated cluster is not started")
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _unfence_later(self, broker_id: int, generation: int, delay: float) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._unfencings.add(task)
        try:
            await asyncio.sleep(delay)  # the simulated metadata catch-up, not a synchronisation
            await self._unfence(broker_id, generation)
        except Exception:
            log.exception("broker %d: unfencing failed", broker_id)
        finally:
            self._unfencings.discard(task)

    async def _unfence(self, broker_id: int, generation: int) -> None:
        """Open the listener, then unfence, unless the broker was stopped in between."""
        async with self._listener_locks[broker_id]:
            with self._lock:
                if self._generation[broker_id] != generation:
                    return
            await self._open_listener_locked(broker_id)
            with self._lock:
                if self._generation[broker_id] != generation:
                    return  # stopped meanwhile: its stop closes the listener next
                self._model.unfence(broker_id)
        log.info("broker %d unfenced on port %d", broker_id, self._ports[broker_id])

    async def _open_listener(self, broker_id: int) -> None:
        async with self._listener_locks[broker_id]:
            await self._open_listener_locked(broker_id)

    async def _open_listener_locked(self, broker_id: int) -> None:
        if broker_id in self._servers:
            return
        if broker_id not in self._reserved:
            reserved = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            reserved.bind((HOST, 0))
            self._reserved[broker_id] = reserved
            with self._lock:
                self._ports[broker_id] = reserved.getsockname()[1]
        server = await asyncio.start_server(
            functools.partial(self._serve, broker_id),
            HOST,
            self._ports[broker_id],
            reuse_address=True,
            reuse_port=True,  # beside its reservation: the same process, both SO_REUSEPORT
        )
        self._servers[broker_id] = server

    async def _close_listener(self, broker_id: int) -> None:
        async with self._listener_locks[broker_id]:
            server = self._servers.pop(broker_id, None)
            if server is not None:
                # Python 3.11's server drops, its socket left open, a connection it accepted
                # but had not yet given a transport when it closed: stop accepting, let the
                # accepted ones get theirs (one turn of the loop), then close.
                loop = asyncio.get_running_loop()
                for listening in server.sockets:
                    loop.remove_reader(listening.fileno())
                await asyncio.sleep(0)
                server.close()
                await server.wait_closed()
            for writer in list(self._connections[broker_id]):
                _reset(writer)
            tasks = list(self._tasks[broker_id])
            if tasks:
                await asyncio.wait(tasks, timeout=5)

    async def _shutdown(self) -> None:
        pending = list(self._unfencings)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)
        for broker in self._broker_ids:
            await self._close_listener(broker)
        while self._reserved:
            self._reserved.popitem()[1].close()
        # A connection accepted just before its listener closed is still on its way to
        # `_serve`, which resets it: let it get there, or its transport outlives the loop and
        # warns as unclosed in a later test.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while (others := asyncio.all_tasks() - {asyncio.current_task()}) and (
            left := deadline - loop.time()
        ) > 0:
            await asyncio.wait(others, timeout=left)

    async def _serve(
        self, broker_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        if broker_id not in self._servers:  # accepted just before the listener closed
            _reset(writer)
            return
        self._connections[broker_id].add(writer)
        self._tasks[broker_id].add(task)
        try:
            while True:
                size = Int32.decode(io.BytesIO(await reader.readexactly(4)))
                if not 0 <= size <= MAX_FRAME_BYTES:
                    log.warning("broker %d: invalid frame size %d; closing", broker_id, size)
                    break
                response = self._handle(broker_id, await reader.readexactly(size))
                if response is None:
                    break
                writer.write(response)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except Exception:
            log.exception("broker %d: failed to serve a request; closing", broker_id)
        finally:
            self._connections[broker_id].discard(writer)
            self._tasks[broker_id].discard(task)
            writer.close()

    # -- requests ----------------------------------------------------------------------------

    def _handle(self, broker_id: int, payload: bytes) -> bytes | None:
        """One request frame in, one response frame out; None closes the connection."""
        try:
            # The v1 header is a prefix of the v2 (flexible) one: enough to route the request.
            header = RequestHeader.decode(io.BytesIO(payload), flexible=False)
        except Exception:
            log.warning("broker %d: undecodable request header; closing", broker_id)
            return None
        key, version = header.request_api_key, header.request_api_version
        supported = API_VERSIONS.get(key)
        served = supported is not None and supported[0] <= version <= supported[1]
        with self._lock:
            self._requests.append(
                RequestRecord(
                    broker_id, key, version, header.correlation_id, header.client_id, served
                )
            )
        if key == ApiKey.ApiVersions and not served:
            # Kafka answers a too-new ApiVersions in v0 so that any client can read it.
            log.info("broker %d: ApiVersions v%d unsupported; answering v0", broker_id, version)
            response = self._unsupported_api_versions()
            return _encode(response, header.correlation_id)
        if not served:
            log.warning(
                "broker %d: closing connection: %s v%d is not served (client %s)",
                broker_id,
                _api_name(key),
                version,
                header.client_id,
            )
            return None
        try:
            request = _REQUEST_CLASSES[key].decode(payload, version=version, header=True)
        except Exception:
            log.warning(
                "broker %d: undecodable %s v%d; closing", broker_id, _api_name(key), version
            )
            return None
        handlers: dict[int, Callable[[int, Any, int], Any]] = {
            ApiKey.ApiVersions: self._api_versions,
            ApiKey.Metadata: self._metadata,
            ApiKey.DescribeConfigs: self._describe_configs,
            ApiKey.DescribeCluster: self._describe_cluster,
            ApiKey.DescribeQuorum: self._describe_quorum,
            ApiKey.ElectLeaders: self._elect_leaders,
            ApiKey.ListPartitionReassignments: self._list_partition_reassignments,
        }
        with self._lock:
            self._model.tick()
            response = handlers[key](broker_id, request, version)
        log.debug("broker %d: %s v%d answered", broker_id, _api_name(key), version)
        return _encode(response, header.correlation_id)

    @staticmethod
    def _unsupported_api_versions() -> Any:
        low, high = API_VERSIONS[ApiKey.ApiVersions]
        return ApiVersionsResponse(
            version=0,
            error_code=Errors.UnsupportedVersionError.errno,
            api_keys=[
                ApiVersionsResponse.ApiVersion(
                    api_key=ApiKey.ApiVersions, min_version=low, max_version=high
                )
            ],
        )

    def _api_versions(self, broker_id: int, request: Any, version: int) -> Any:
        features: dict[str, Any] = {}
        if version >= 3:  # tagged fields: only encoded when passed to the constructor
            features["supported_features"] = [
                ApiVersionsResponse.SupportedFeatureKey(
                    name="metadata.version", min_version=1, max_version=METADATA_VERSION_LEVEL
                )
            ]
            features["finalized_features_epoch"] = 1
            features["finalized_features"] = [
                ApiVersionsResponse.FinalizedFeatureKey(
                    name="metadata.version",
                    max_version_level=METADATA_VERSION_LEVEL,
                    min_version_level=METADATA_VERSION_LEVEL,
                )
            ]
        return ApiVersionsResponse(
            version=version,
            error_code=0,
            api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
                for key, (low, high) in sorted(API_VERSIONS.items())
            ],
            throttle_time_ms=0,
            **features,
        )

    def _metadata(self, broker_id: int, request: Any, version: int) -> Any:
        # KRaftMetadataCache lists only unfenced brokers; fenced ones are offline replicas.
        brokers = [
            MetadataResponse.MetadataResponseBroker(
                node_id=b, host=HOST, port=self._ports[b], rack=self._model.racks.get(b)
            )
            for b in self._model.unfenced()
        ]
        include_ops = version >= 8 and request.include_topic_authorized_operations
        names = self._model.topics
        if request.topics is None or (version == 0 and not request.topics):
            topics = [self._metadata_topic(name, version, include_ops) for name in names]
            topics.sort(key=lambda topic: topic.name)
        else:
            topics = []
            for wanted in request.topics:
                name = wanted.name
                if name is None and version >= 10:
                    name = next((t for t in names if self.topic_id(t) == wanted.topic_id), None)
                    if name is None:
                        topics.append(
                            _MetadataTopic(
                                error_code=Errors.UnknownTopicIdError.errno,
                                name=None if version >= 12 else "",
                                topic_id=wanted.topic_id,
                                is_internal=False,
                                partitions=[],
                                authorized_operations=None,
                            )
                        )
                        continue
                topics.append(self._metadata_topic(name, version, include_ops))
        cluster_ops = version in range(8, 11) and request.include_cluster_authorized_operations
        return MetadataResponse(
            version=version,
            throttle_time_ms=0,
            brokers=brokers,
            cluster_id=self.cluster_id,
            controller_id=self._controller_id(),
            topics=topics,
            authorized_operations=set(_CLUSTER_OPERATIONS) if cluster_ops else None,
            error_code=0,
        )

    def _metadata_topic(self, name: str, version: int, include_ops: bool) -> Any:
        if name not in self._model.topics:
            return _MetadataTopic(
                error_code=Errors.UnknownTopicOrPartitionError.errno,
                name=name,
                topic_id=None,
                is_internal=False,
                partitions=[],
                authorized_operations=None,
            )
        partitions = []
        for state in self._model.partitions_of(name):
            replicas, isr = list(state.replicas), list(state.isr)
            error = 0
            if state.leader == -1:
                error = Errors.LeaderNotAvailableError.errno
            elif version == 0:
                # v0 clients are told only about replicas they can reach.
                replicas = [r for r in replicas if r not in state.offline_replicas]
                isr = [r for r in isr if r not in state.offline_replicas]
                if len(replicas) < len(state.replicas):
                    error = Errors.ReplicaNotAvailableError.errno
            partitions.append(
                _MetadataPartition(
                    error_code=error,
                    partition_index=state.partition,
                    leader_id=state.leader,
                    leader_epoch=state.leader_epoch,
                    replica_nodes=replicas,
                    isr_nodes=isr,
                    offline_replicas=list(state.offline_replicas),
                )
            )
        return _MetadataTopic(
            error_code=0,
            name=name,
            topic_id=self.topic_id(name),
            is_internal=self._model.topics[name].internal,
            partitions=partitions,
            authorized_operations=set(_TOPIC_OPERATIONS) if include_ops else None,
        )

    def _describe_configs(self, broker_id: int, request: Any, version: int) -> Any:
        include_synonyms = version >= 1 and request.include_synonyms
        include_docs = version >= 3 and request.include_documentation
        results = []
        for resource in request.resources:
            error, message, entries = self._config_resource(broker_id, resource)
            keys = resource.configuration_keys
            results.append(
                _DescribeConfigsResult(
                    error_code=error,
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=[
                        _config_entry(name, definition, synonyms, include_synonyms, include_docs)
                        for name, definition, synonyms in entries
                        if keys is None or name in keys
                    ],
                )
            )
        return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)

    def _config_resource(
        self, broker_id: int, resource: Any
    ) -> tuple[int, str | None, list[tuple[str, _ConfigDef, list[tuple[str, str, int]]]]]:
        """(error code, error message, [(name, definition, synonyms by precedence)])."""
        static = {**self._static_broker_configs, "node.id": str(broker_id)}
        name = resource.resource_name
        entries = []
        if resource.resource_type == ConfigResourceType.TOPIC:
            if name not in self._model.topics:
                error = Errors.UnknownTopicOrPartitionError
                return error.errno, f"Topic {name!r} does not exist.", []
            spec = self._model.topics[name]
            overrides = dict(spec.configs)
            if spec.min_insync_replicas is not None:
                overrides["min.insync.replicas"] = str(spec.min_insync_replicas)
            for definition in _CONFIGS:
                if definition.topic_name is None:
                    continue
                synonyms = []
                if definition.topic_name in overrides:
                    synonyms.append(
                        (
                            definition.topic_name,
                            overrides[definition.topic_name],
                            ConfigSourceType.DYNAMIC_TOPIC_CONFIG.value,
                        )
                    )
                synonyms += _broker_synonyms(definition, static)
                entries.append((definition.topic_name, definition, synonyms))
            return 0, None, entries
        if resource.resource_type == ConfigResourceType.BROKER:
            if name == "":
                return 0, None, []  # no cluster-wide dynamic defaults are set
            if name != str(broker_id):
                error = Errors.InvalidRequestError
                message = f"Unexpected broker id, expected {broker_id} or empty string, but "
                return error.errno, f"{message}received {name}", []
            for definition in _CONFIGS:
                synonyms = _broker_synonyms(definition, static)
                entries.append((definition.broker_name, definition, synonyms))
            return 0, None, entries
        error = Errors.InvalidRequestError
        return error.errno, f"Unsupported resource type: {resource.resource_type}", []

    def _describe_cluster(self, broker_id: int, request: Any, version: int) -> Any:
        if version >= 1 and request.endpoint_type != 1:
            return DescribeClusterResponse(
                version=version,
                throttle_time_ms=0,
                error_code=Errors.UnsupportedEndpointTypeError.errno,
                error_message="The broker only supports the BROKERS endpoint type.",
                endpoint_type=request.endpoint_type,
                cluster_id=self.cluster_id,
                controller_id=-1,
                brokers=[],
                authorized_operations=None,
            )
        # Fenced brokers (stopped, or started and not yet unfenced) only when asked for (v2).
        include_fenced = version >= 2 and request.include_fenced_brokers
        unfenced = self._model.unfenced()
        brokers = [
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=b,
                host=HOST,
                port=self._ports[b],
                rack=self._model.racks.get(b),
                is_fenced=b not in unfenced,
            )
            for b in self._broker_ids
            if b in unfenced or include_fenced
        ]
        include_ops = request.include_cluster_authorized_operations
        return DescribeClusterResponse(
            version=version,
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            endpoint_type=1,
            cluster_id=self.cluster_id,
            controller_id=self._controller_id(),
            brokers=brokers,
            authorized_operations=set(_CLUSTER_OPERATIONS) if include_ops else None,
        )

    def _describe_quorum(self, broker_id: int, request: Any, version: int) -> Any:
        topics = request.topics
        valid = (
            len(topics) == 1
            and topics[0].topic_name == METADATA_TOPIC
            and len(topics[0].partitions) == 1
            and topics[0].partitions[0].partition_index == 0
        )
        if not valid:
            error = Errors.UnknownTopicOrPartitionError
            return DescribeQuorumResponse(
                version=version,
                error_code=0,
                error_message=None,
                topics=[
                    _QuorumTopic(
                        topic_name=topic.topic_name,
                        partitions=[
                            _quorum_error(p.partition_index, error) for p in topic.partitions
                        ],
                    )
                    for topic in topics
                ],
                nodes=[],
            )
        if self._model.quorum_leader == -1:
            partition = _quorum_error(0, Errors.NotLeaderForPartitionError)
            return DescribeQuorumResponse(
                version=version,
                error_code=0,
                error_message=None,
                topics=[_QuorumTopic(topic_name=METADATA_TOPIC, partitions=[partition])],
                nodes=[],
            )
        snapshot = self._model.quorum_state()

        def replica_state(replica: QuorumReplica) -> Any:
            return _ReplicaStateData(
                replica_id=replica.replica_id,
                replica_directory_id=self._directory_id(replica.replica_id),
                log_end_offset=replica.log_end_offset,
                last_fetch_timestamp=replica.last_fetch_timestamp,
                last_caught_up_timestamp=replica.last_caught_up_timestamp,
            )

        partition = _QuorumPartition(
            partition_index=0,
            error_code=0,
            error_message=None,
            leader_id=snapshot.leader_id,
            leader_epoch=snapshot.leader_epoch,
            high_watermark=snapshot.high_watermark,
            current_voters=[replica_state(r) for r in snapshot.voters],
            observers=[replica_state(r) for r in snapshot.observers],
        )
        # Controller endpoints are reported but not served: `.invalid` never resolves.
        nodes = [
            DescribeQuorumResponse.Node(
                node_id=voter,
                listeners=[
                    DescribeQuorumResponse.Node.Listener(
                        name="CONTROLLER", host=f"controller-{voter}.sim.invalid", port=9093
                    )
                ],
            )
            for voter in self._voters
        ]
        return DescribeQuorumResponse(
            version=version,
            error_code=0,
            error_message=None,
            topics=[_QuorumTopic(topic_name=METADATA_TOPIC, partitions=[partition])],
            nodes=nodes,
        )

    def _elect_leaders(self, broker_id: int, request: Any, version: int) -> Any:
        """ElectLeaders as `ReplicationControlManager.electLeaders` answers it.

        v0 has no election type (always preferred). A null partition list means every
        partition, and then partitions that needed no election are left out of the answer.
        """
        election = request.election_type if version >= 1 else PREFERRED
        if election not in (PREFERRED, UNCLEAN):
            return ElectLeadersResponse(
                version=version,
                throttle_time_ms=0,
                error_code=Errors.InvalidRequestError.errno,
                replica_election_results=[],
            )
        results = []
        if request.topic_partitions is None:
            for topic in sorted(self._model.topics):
                outcomes = [
                    (index, *self._model.elect(topic, index, election))
                    for index in range(self._model.topics[topic].partitions)
                ]
                outcomes = [o for o in outcomes if o[1] is not Errors.ElectionNotNeededError]
                results.append(_election_result(topic, outcomes))
        else:
            for wanted in request.topic_partitions:
                outcomes = [
                    (index, *self._model.elect(wanted.topic, index, election))
                    for index in wanted.partitions
                ]
                results.append(_election_result(wanted.topic, outcomes))
        return ElectLeadersResponse(
            version=version, throttle_time_ms=0, error_code=0, replica_election_results=results
        )

    def _list_partition_reassignments(self, broker_id: int, request: Any, version: int) -> Any:
        """In-flight reassignments only; topics or partitions without one are left out."""
        if request.topics is None:
            wanted: list[tuple[str, list[int]]] = [
                (name, list(range(spec.partitions)))
                for name, spec in sorted(self._model.topics.items())
            ]
        else:
            wanted = [(t.name, list(t.partition_indexes)) for t in request.topics]
        topics = []
        for name, indexes in wanted:
            if name not in self._model.topics:
                continue
            count = self._model.topics[name].partitions
            states = [self._model.partition_state(name, i) for i in indexes if 0 <= i < count]
            ongoing = [
                _OngoingTopic.OngoingPartitionReassignment(
                    partition_index=state.partition,
                    replicas=list(state.replicas),
                    adding_replicas=list(state.adding_replicas),
                    removing_replicas=list(state.removing_replicas),
                )
                for state in states
                if state.reassigning
            ]
            if ongoing:
                topics.append(_OngoingTopic(name=name, partitions=ongoing))
        return ListPartitionReassignmentsResponse(
            version=version, throttle_time_ms=0, error_code=0, error_message=None, topics=topics
        )


def _static_configs(
    broker_configs: Mapping[str, str] | None, broker_min_insync_replicas: int | None
) -> dict[str, str]:
    """Validate the brokers' static configuration: known keys, integers where Kafka wants them."""
    static = dict(broker_configs or {})
    unknown = sorted(set(static) - _STATIC_CONFIG_NAMES)
    if unknown:
        raise ValueError(
            f"unknown broker configs {unknown} (known: {', '.join(sorted(_STATIC_CONFIG_NAMES))})"
        )
    if broker_min_insync_replicas is not None:
        if broker_min_insync_replicas < 1:
            raise ValueError("broker_min_insync_replicas must be >= 1")
        given = static.setdefault("min.insync.replicas", str(broker_min_insync_replicas))
        if given != str(broker_min_insync_replicas):
            raise ValueError("broker_min_insync_replicas and broker_configs disagree")
    for definition in _CONFIGS:
        value = static.get(definition.broker_name)
        is_int = definition.config_type == ConfigType.INT
        if (
            value is not None
            and is_int
            and (not (value.isascii() and value.isdigit()) or int(value) < 1)
        ):
            raise ValueError(f"broker config {definition.broker_name}={value!r}: not >= 1")
    return static


def _election_result(
    topic: str, outcomes: list[tuple[int, type[Errors.BrokerResponseError], str | None]]
) -> Any:
    return _ElectionResult(
        topic=topic,
        partition_result=[
            _ElectionResult.PartitionResult(
                partition_id=index, error_code=error.errno, error_message=message
            )
            for index, error, message in outcomes
        ],
    )


def _broker_synonyms(definition: _ConfigDef, static: Mapping[str, str]) -> list[Any]:
    synonyms = []
    if definition.broker_name in static:
        source = ConfigSourceType.STATIC_BROKER_CONFIG.value
        synonyms.append((definition.broker_name, static[definition.broker_name], source))
    if definition.default is not None:
        source = ConfigSourceType.DEFAULT_CONFIG.value
        synonyms.append((definition.broker_name, definition.default, source))
    return synonyms


def _config_entry(
    name: str,
    definition: _ConfigDef,
    synonyms: list[tuple[str, str, int]],
    include_synonyms: bool,
    include_docs: bool,
) -> Any:
    _, value, source = synonyms[0]
    return _ConfigEntry(
        name=name,
        value=value,
        read_only=definition.read_only,
        config_source=source,
        is_default=source == ConfigSourceType.DEFAULT_CONFIG.value,
        is_sensitive=False,
        synonyms=[
            _ConfigSynonym(name=syn_name, value=syn_value, source=syn_source)
            for syn_name, syn_value, syn_source in synonyms
        ]
        if include_synonyms
        else [],
        config_type=definition.config_type.value,
        documentation=definition.doc if include_docs else None,
    )


def _quorum_error(partition_index: int, error: type[Errors.BrokerResponseError]) -> Any:
    """A partition-level DescribeQuorum error, with Kafka's zero defaults elsewhere."""
    return _QuorumPartition(
        partition_index=partition_index,
        error_code=error.errno,
        error_message=error.description,
        leader_id=-1,
        leader_epoch=0,
        high_watermark=0,
        current_voters=[],
        observers=[],
    )


def _encode(response: Any, correlation_id: int) -> bytes:
    # The version was fixed at construction: encode(version=...) with a header set assumes a
    # request header in kafka-python 3.0.12 and fails on a response.
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


def _reset(writer: asyncio.StreamWriter) -> None:
    """Drop a connection with a TCP RST, as a killed broker's peers see it."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _api_name(key: int) -> str:
    try:
        return str(ApiKey(key).name)
    except ValueError:
        return f"ApiKey({key})"

"""A simulated KRaft Kafka cluster that speaks the real Kafka wire protocol, for tests.

Kafka itself cannot run in the test environment, yet rollguard decides when a broker may be
restarted from what the cluster says about itself: which brokers are registered, which
replicas are in sync, what `min.insync.replicas` is in force, and how far each KRaft
controller lags the quorum leader. Mocking kafka-python would test our assumptions about
kafka-python; this peer instead answers kafka-python's real client over real TCP sockets on
127.0.0.1, so the bytes on the wire, the version negotiation and the client's own parsing
are all exercised.

Every request is decoded, and every response encoded, with kafka-python's own protocol
classes (`kafka.protocol.*`), so the peer never hand-rolls a Kafka byte layout. Served:
ApiVersions, Metadata, DescribeConfigs, DescribeCluster and DescribeQuorum. ApiVersions is
served up to v3 only, so the v4 probe kafka-python sends first is refused the way Kafka
refuses it (UNSUPPORTED_VERSION, answered in v0 format) and the client's downgrade path
runs. Any other API, or an unadvertised version, closes the connection, as Kafka does.

The answers follow a mutable simulated state (brokers up or down, ISRs, the KRaft quorum)
that tests change from their own thread while the cluster serves from a background thread
with its own asyncio loop. Where the model simplifies Kafka, the method says so.
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
import time
import uuid
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
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

__all__ = [
    "API_VERSIONS",
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
#: Kafka drops an observer from DescribeQuorum after this long without a fetch.
OBSERVER_SESSION_TIMEOUT_MS = 300_000
#: `socket.request.max.bytes` default: larger frames close the connection.
MAX_FRAME_BYTES = 100 * 1024 * 1024
#: The `metadata.version` feature level reported in ApiVersions v3 (3.9-IV0).
METADATA_VERSION_LEVEL = 21
INITIAL_HIGH_WATERMARK = 1000

#: What the peer serves, by API key: the single source for both ApiVersions and dispatch.
API_VERSIONS: Mapping[int, tuple[int, int]] = MappingProxyType(
    {
        ApiKey.Metadata: (0, 13),
        ApiKey.ApiVersions: (0, 3),
        ApiKey.DescribeConfigs: (0, 4),
        ApiKey.DescribeQuorum: (0, 2),
        ApiKey.DescribeCluster: (0, 2),
    }
)
_REQUEST_CLASSES: Mapping[int, Any] = MappingProxyType(
    {
        ApiKey.Metadata: MetadataRequest,
        ApiKey.ApiVersions: ApiVersionsRequest,
        ApiKey.DescribeConfigs: DescribeConfigsRequest,
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


@dataclass(frozen=True)
class TopicSpec:
    """A topic of the simulated cluster; `min_insync_replicas=None` means no topic override."""

    partitions: int = 1
    replication_factor: int = 1
    min_insync_replicas: int | None = None

    def __post_init__(self) -> None:
        if self.partitions < 1 or self.replication_factor < 1:
            raise ValueError(f"partitions and replication_factor must be >= 1: {self}")
        if self.min_insync_replicas is not None and self.min_insync_replicas < 1:
            raise ValueError(f"min_insync_replicas must be >= 1: {self}")


@dataclass(frozen=True)
class PartitionState:
    """A snapshot of one partition, as the controller sees it."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True)
class QuorumReplica:
    """One voter's or observer's replica state, as DescribeQuorum reports it (times in ms)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True)
class QuorumState:
    """A snapshot of the KRaft quorum of the `__cluster_metadata` log."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[QuorumReplica, ...]
    observers: tuple[QuorumReplica, ...]


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
    read_only: bool
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
    _ConfigDef(None, "node.id", None, ConfigType.INT, True, "The node id of this server."),
)


@dataclass
class _Partition:
    replicas: tuple[int, ...]
    isr: list[int]
    leader: int
    leader_epoch: int = 0

    def ordered(self, members: Iterable[int]) -> list[int]:
        chosen = set(members)
        return [replica for replica in self.replicas if replica in chosen]


@dataclass
class _QuorumMember:
    running: bool = True
    lag_ms: int = 0
    lag_offsets: int = 0
    frozen_leo: int = 0
    frozen_fetch_ms: int = 0
    frozen_caught_up_ms: int = 0


class KafkaClusterSim:
    """A KRaft Kafka cluster on 127.0.0.1: one listener per broker, answers from a mutable state.

    `voters` are the KRaft controller node ids (default: the brokers, i.e. combined mode);
    they may be separate ids that are not brokers. Replicas are assigned round robin over the
    brokers: partition p has replicas brokers[p], brokers[p+1], ... (mod the broker count).

    `broker_min_insync_replicas` is the broker's static `min.insync.replicas`
    (server.properties); None leaves Kafka's default of 1 in force. `rejoin_after` delays a
    restarted broker's return to the ISRs by that many seconds.

    `controller_id_from` chooses what Metadata and DescribeCluster report as the controller:
    "quorum_leader" (the default) reports the KRaft quorum leader; "random_alive_broker" is
    what real KRaft brokers do (any alive broker id, since clients cannot reach controllers).
    """

    def __init__(
        self,
        broker_ids: Sequence[int] = (0, 1, 2),
        voters: Sequence[int] | None = None,
        topics: Mapping[str, TopicSpec] | None = None,
        cluster_id: str = "rollguard-sim",
        *,
        broker_min_insync_replicas: int | None = None,
        rejoin_after: float = 0.0,
        controller_id_from: Literal["quorum_leader", "random_alive_broker"] = "quorum_leader",
    ) -> None:
        self._broker_ids = tuple(broker_ids)
        self._voters = tuple(self._broker_ids if voters is None else voters)
        if not self._broker_ids or len(set(self._broker_ids)) != len(self._broker_ids):
            raise ValueError(f"broker ids must be non-empty and unique: {broker_ids}")
        if not self._voters or len(set(self._voters)) != len(self._voters):
            raise ValueError(f"voters must be non-empty and unique: {voters}")
        if broker_min_insync_replicas is not None and broker_min_insync_replicas < 1:
            raise ValueError("broker_min_insync_replicas must be >= 1")
        if rejoin_after < 0:
            raise ValueError("rejoin_after must be >= 0")
        if controller_id_from not in ("quorum_leader", "random_alive_broker"):
            raise ValueError(f"unknown controller_id_from: {controller_id_from!r}")
        self.cluster_id = cluster_id
        self.rejoin_after = rejoin_after
        self._controller_id_from = controller_id_from
        self._static_broker_configs: dict[str, str] = {}
        if broker_min_insync_replicas is not None:
            self._static_broker_configs["min.insync.replicas"] = str(broker_min_insync_replicas)

        self._lock = threading.RLock()
        self._topics: dict[str, TopicSpec] = dict(topics or {})
        self._partitions: dict[tuple[str, int], _Partition] = {}
        for name, spec in self._topics.items():
            if spec.replication_factor > len(self._broker_ids):
                raise ValueError(
                    f"topic {name!r}: replication factor {spec.replication_factor} exceeds "
                    f"the {len(self._broker_ids)} brokers"
                )
            for index in range(spec.partitions):
                replicas = tuple(
                    self._broker_ids[(index + i) % len(self._broker_ids)]
                    for i in range(spec.replication_factor)
                )
                self._partitions[name, index] = _Partition(replicas, list(replicas), replicas[0])
        self._running: set[int] = set(self._broker_ids)
        self._rejoin_due: dict[int, float] = {}
        self._quorum_leader = self._voters[0]
        self._quorum_epoch = 1
        self._high_watermark = INITIAL_HIGH_WATERMARK
        self._voter_state = {voter: _QuorumMember() for voter in self._voters}
        self._observer_state = {
            broker: _QuorumMember() for broker in self._broker_ids if broker not in self._voters
        }
        self._requests: deque[RequestRecord] = deque(maxlen=10_000)

        # Touched only on the loop thread, except _ports (written under the lock).
        self._ports: dict[int, int] = {}
        self._servers: dict[int, asyncio.Server] = {}
        self._connections: dict[int, set[asyncio.StreamWriter]] = {
            b: set() for b in self._broker_ids
        }
        self._tasks: dict[int, set[asyncio.Task[None]]] = {b: set() for b in self._broker_ids}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

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
        """Close every listener and connection and stop the loop thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
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

    def running_brokers(self) -> tuple[int, ...]:
        with self._lock:
            self._tick()
            return tuple(b for b in self._broker_ids if b in self._running)

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id as Metadata v10+ reports it (stable for a cluster id and name)."""
        return uuid.uuid5(uuid.NAMESPACE_URL, f"kafka-peer:{self.cluster_id}:topic:{topic}")

    @property
    def requests(self) -> tuple[RequestRecord, ...]:
        """Every request received so far (the latest 10000), oldest first."""
        with self._lock:
            return tuple(self._requests)

    # -- brokers and partitions --------------------------------------------------------------

    def stop_broker(self, broker_id: int) -> None:
        """Stop a broker (no-op if stopped): its listener closes, its connections are reset.

        Like a KRaft broker that shut down and was fenced, it leaves Metadata's broker list
        (DescribeCluster v2 still lists it, fenced, when asked to include fenced brokers) and
        every ISR; partitions it led move to the first remaining ISR member in replica order,
        or to leader -1 if none is left. Kafka would keep the last ISR member in a shrinking
        ISR; this model empties it instead.
        """
        self._require_broker(broker_id)
        with self._lock:
            if broker_id not in self._running:
                return
        self._call(self._close_listener(broker_id))
        with self._lock:
            now_ms = _now_ms()
            self._running.discard(broker_id)
            self._rejoin_due.pop(broker_id, None)
            if broker_id in self._observer_state:
                self._freeze(self._observer_state[broker_id], now_ms, is_leader=False)
            for partition in self._partitions.values():
                if broker_id in partition.isr:
                    partition.isr.remove(broker_id)
                    if partition.leader == broker_id:
                        partition.leader = partition.isr[0] if partition.isr else -1
                        partition.leader_epoch += 1
        log.info("broker %d stopped", broker_id)

    def start_broker(self, broker_id: int) -> None:
        """Restart a broker (no-op if running) on the same port; it is in Metadata at once.

        It rejoins the ISR of every partition it replicates immediately, or `rejoin_after`
        seconds later; a partition without a leader elects it. Leadership it lost does not
        come back on its own: see `elect_preferred_leaders`.
        """
        self._require_broker(broker_id)
        with self._lock:
            if broker_id in self._running:
                return
        self._call(self._open_listener(broker_id))
        with self._lock:
            self._running.add(broker_id)
            if broker_id in self._observer_state:
                self._observer_state[broker_id].running = True
            if self.rejoin_after > 0:
                self._rejoin_due[broker_id] = time.monotonic() + self.rejoin_after
            else:
                self._rejoin(broker_id)
        log.info("broker %d started on port %d", broker_id, self.port(broker_id))

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
        """Set a partition's ISR (running replicas only); a leader outside it is replaced."""
        with self._lock:
            self._tick()
            state = self._partition(topic, partition)
            members = list(isr)
            if len(set(members)) != len(members):
                raise ValueError(f"duplicate ISR members: {members}")
            if not set(members) <= set(state.replicas):
                raise ValueError(f"ISR {members} is not a subset of replicas {state.replicas}")
            stopped = [member for member in members if member not in self._running]
            if stopped:
                raise ValueError(f"stopped brokers cannot be in the ISR: {stopped}")
            state.isr = state.ordered(members)
            if state.leader not in state.isr:
                state.leader = state.isr[0] if state.isr else -1
                state.leader_epoch += 1

    def elect_preferred_leaders(self) -> int:
        """Move leadership back to each partition's first replica if it is in the ISR.

        Returns how many partitions changed leader (Kafka does this on its own only every
        `leader.imbalance.check.interval.seconds`, 300 s by default).
        """
        changed = 0
        with self._lock:
            self._tick()
            for state in self._partitions.values():
                preferred = state.replicas[0]
                if state.leader != preferred and preferred in state.isr:
                    state.leader = preferred
                    state.leader_epoch += 1
                    changed += 1
        return changed

    def partition_state(self, topic: str, partition: int) -> PartitionState:
        with self._lock:
            self._tick()
            state = self._partition(topic, partition)
            return PartitionState(
                topic=topic,
                partition=partition,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                replicas=state.replicas,
                isr=tuple(state.isr),
                offline_replicas=tuple(r for r in state.replicas if r not in self._running),
            )

    # -- the KRaft quorum --------------------------------------------------------------------

    def set_voter_lag(self, voter_id: int, ms: int, *, offsets: int = 0) -> None:
        """Make a running follower's last_caught_up_timestamp trail the leader's by `ms`.

        `offsets` also holds its log_end_offset that many records behind the high watermark.
        """
        if ms < 0 or offsets < 0:
            raise ValueError("lag must be >= 0")
        with self._lock:
            member = self._voter(voter_id)
            if voter_id == self._quorum_leader:
                raise ValueError(f"voter {voter_id} is the quorum leader; it cannot lag itself")
            member.lag_ms, member.lag_offsets = ms, offsets

    def stop_voter(self, voter_id: int) -> None:
        """Stop a controller (no-op if stopped): its replica state freezes where it was.

        A stopped leader is replaced by the first running voter (epoch + 1) if a majority of
        voters still runs; without a majority the quorum has no leader (-1).
        """
        with self._lock:
            member = self._voter(voter_id)
            if not member.running:
                return
            self._freeze(member, _now_ms(), is_leader=voter_id == self._quorum_leader)
            self._reelect()
            log.info("voter %d stopped; quorum leader %d", voter_id, self._quorum_leader)

    def start_voter(self, voter_id: int) -> None:
        """Restart a controller (no-op if running).

        A leaderless quorum that regains a majority elects the first running voter.
        """
        with self._lock:
            member = self._voter(voter_id)
            if member.running:
                return
            member.running = True
            self._reelect()
            log.info("voter %d started; quorum leader %d", voter_id, self._quorum_leader)

    def set_quorum_leader(self, voter_id: int) -> None:
        """Make a running voter the quorum leader (a new epoch if it changes)."""
        with self._lock:
            member = self._voter(voter_id)
            if not member.running:
                raise ValueError(f"voter {voter_id} is not running")
            if not self._has_majority():
                raise ValueError("no majority of voters is running; no leader can be elected")
            member.lag_ms = member.lag_offsets = 0
            if voter_id != self._quorum_leader:
                self._quorum_leader = voter_id
                self._quorum_epoch += 1

    def advance_quorum(self, records: int = 1) -> None:
        """Append records to the metadata log: the high watermark and running replicas move."""
        if records < 0:
            raise ValueError("records must be >= 0")
        with self._lock:
            if self._quorum_leader == -1:
                raise ValueError("the quorum has no leader; nothing can be appended")
            self._high_watermark += records

    def quorum_state(self) -> QuorumState:
        with self._lock:
            return self._quorum_snapshot(_now_ms())

    # -- state helpers (hold the lock) -------------------------------------------------------

    def _require_broker(self, broker_id: int) -> None:
        if broker_id not in self._broker_ids:
            raise ValueError(f"unknown broker {broker_id}")

    def _partition(self, topic: str, partition: int) -> _Partition:
        try:
            return self._partitions[topic, partition]
        except KeyError:
            raise ValueError(f"unknown partition {topic}-{partition}") from None

    def _voter(self, voter_id: int) -> _QuorumMember:
        if voter_id not in self._voter_state:
            raise ValueError(f"{voter_id} is not a voter: {self._voters}")
        return self._voter_state[voter_id]

    def _tick(self) -> None:
        """Apply the ISR rejoins that have come due."""
        now = time.monotonic()
        for broker, due in list(self._rejoin_due.items()):
            if now >= due:
                del self._rejoin_due[broker]
                self._rejoin(broker)

    def _rejoin(self, broker_id: int) -> None:
        for state in self._partitions.values():
            if broker_id in state.replicas and broker_id not in state.isr:
                state.isr = state.ordered([*state.isr, broker_id])
                if state.leader == -1:
                    state.leader = broker_id
                    state.leader_epoch += 1
        log.info("broker %d rejoined its ISRs", broker_id)

    def _replica(self, member: _QuorumMember, now_ms: int, is_leader: bool) -> tuple[int, int, int]:
        """(log end offset, last fetch, last caught up) of a quorum member at `now_ms`."""
        if not member.running:
            return member.frozen_leo, member.frozen_fetch_ms, member.frozen_caught_up_ms
        if is_leader:
            return self._high_watermark, now_ms, now_ms
        leo = max(0, self._high_watermark - member.lag_offsets)
        return leo, now_ms, now_ms - member.lag_ms

    def _freeze(self, member: _QuorumMember, now_ms: int, is_leader: bool) -> None:
        leo, fetch, caught_up = self._replica(member, now_ms, is_leader)
        member.frozen_leo = leo
        member.frozen_fetch_ms = fetch
        member.frozen_caught_up_ms = caught_up
        member.running = False

    def _has_majority(self) -> bool:
        running = sum(1 for member in self._voter_state.values() if member.running)
        return running > len(self._voters) // 2

    def _reelect(self) -> None:
        leader = self._quorum_leader
        if not self._has_majority():
            self._quorum_leader = -1
            return
        if leader != -1 and self._voter_state[leader].running:
            return
        self._quorum_leader = next(v for v in self._voters if self._voter_state[v].running)
        self._voter_state[self._quorum_leader].lag_ms = 0
        self._voter_state[self._quorum_leader].lag_offsets = 0
        self._quorum_epoch += 1

    def _quorum_snapshot(self, now_ms: int) -> QuorumState:
        def replica(node: int, member: _QuorumMember) -> QuorumReplica:
            leo, fetch, caught_up = self._replica(member, now_ms, node == self._quorum_leader)
            return QuorumReplica(node, leo, fetch, caught_up)

        observers = tuple(
            replica(broker, member)
            for broker, member in self._observer_state.items()
            if member.running or now_ms - member.frozen_fetch_ms < OBSERVER_SESSION_TIMEOUT_MS
        )
        return QuorumState(
            leader_id=self._quorum_leader,
            leader_epoch=self._quorum_epoch,
            high_watermark=self._high_watermark,
            voters=tuple(replica(v, self._voter_state[v]) for v in self._voters),
            observers=observers,
        )

    def _controller_id(self) -> int:
        if self._controller_id_from == "quorum_leader":
            return self._quorum_leader
        alive = [b for b in self._broker_ids if b in self._running]
        return random.choice(alive) if alive else -1

    def _directory_id(self, node_id: int) -> uuid.UUID:
        return uuid.uuid5(uuid.NAMESPACE_URL, f"kafka-peer:{self.cluster_id}:dir:{node_id}")

    # -- the loop thread: listeners and connections -----------------------------------------

    def _call(self, coro: Coroutine[Any, Any, None], timeout: float = 10) -> None:
        if self._loop is None:
            coro.close()
            raise RuntimeError("the simulated cluster is not started")
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _open_listener(self, broker_id: int) -> None:
        server = await asyncio.start_server(
            functools.partial(self._serve, broker_id),
            HOST,
            self._ports.get(broker_id, 0),
            reuse_address=True,
        )
        self._servers[broker_id] = server
        with self._lock:
            self._ports[broker_id] = server.sockets[0].getsockname()[1]

    async def _close_listener(self, broker_id: int) -> None:
        server = self._servers.pop(broker_id, None)
        if server is not None:
            server.close()
            await server.wait_closed()
        for writer in list(self._connections[broker_id]):
            _reset(writer)
        tasks = list(self._tasks[broker_id])
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    async def _shutdown(self) -> None:
        for broker in self._broker_ids:
            await self._close_listener(broker)

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
        }
        with self._lock:
            self._tick()
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
        alive = [b for b in self._broker_ids if b in self._running]
        brokers = [
            MetadataResponse.MetadataResponseBroker(
                node_id=b, host=HOST, port=self._ports[b], rack=None
            )
            for b in alive
        ]
        include_ops = version >= 8 and request.include_topic_authorized_operations
        if request.topics is None or (version == 0 and not request.topics):
            topics = [self._metadata_topic(name, version, include_ops) for name in self._topics]
            topics.sort(key=lambda topic: topic.name)
        else:
            topics = []
            for wanted in request.topics:
                name = wanted.name
                if name is None and version >= 10:
                    name = next(
                        (t for t in self._topics if self.topic_id(t) == wanted.topic_id), None
                    )
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
        if name not in self._topics:
            return _MetadataTopic(
                error_code=Errors.UnknownTopicOrPartitionError.errno,
                name=name,
                topic_id=None,
                is_internal=False,
                partitions=[],
                authorized_operations=None,
            )
        partitions = []
        for index in range(self._topics[name].partitions):
            state = self._partitions[name, index]
            replicas, isr = list(state.replicas), list(state.isr)
            error = 0
            if state.leader == -1:
                error = Errors.LeaderNotAvailableError.errno
            elif version == 0:
                # v0 clients are told only about replicas they can reach.
                replicas = [r for r in replicas if r in self._running]
                isr = [r for r in isr if r in self._running]
                if len(replicas) < len(state.replicas):
                    error = Errors.ReplicaNotAvailableError.errno
            partitions.append(
                _MetadataPartition(
                    error_code=error,
                    partition_index=index,
                    leader_id=state.leader,
                    leader_epoch=state.leader_epoch,
                    replica_nodes=replicas,
                    isr_nodes=isr,
                    offline_replicas=[r for r in state.replicas if r not in self._running],
                )
            )
        return _MetadataTopic(
            error_code=0,
            name=name,
            topic_id=self.topic_id(name),
            is_internal=False,
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
            if name not in self._topics:
                error = Errors.UnknownTopicOrPartitionError
                return error.errno, f"Topic {name!r} does not exist.", []
            spec = self._topics[name]
            for definition in _CONFIGS:
                if definition.topic_name is None:
                    continue
                synonyms = []
                if definition.topic_name == "min.insync.replicas" and spec.min_insync_replicas:
                    synonyms.append(
                        (
                            definition.topic_name,
                            str(spec.min_insync_replicas),
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
        include_fenced = version >= 2 and request.include_fenced_brokers
        brokers = [
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=b,
                host=HOST,
                port=self._ports[b],
                rack=None,
                is_fenced=b not in self._running,
            )
            for b in self._broker_ids
            if b in self._running or include_fenced
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
        if self._quorum_leader == -1:
            partition = _quorum_error(0, Errors.NotLeaderForPartitionError)
            return DescribeQuorumResponse(
                version=version,
                error_code=0,
                error_message=None,
                topics=[_QuorumTopic(topic_name=METADATA_TOPIC, partitions=[partition])],
                nodes=[],
            )
        snapshot = self._quorum_snapshot(_now_ms())

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
        return ApiKey(key).name
    except ValueError:
        return f"ApiKey({key})"


def _now_ms() -> int:
    return int(time.time() * 1000)

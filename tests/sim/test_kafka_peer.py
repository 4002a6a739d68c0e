"""The Kafka test peer, checked with kafka-python's real KafkaAdminClient and raw protocol frames.

Raw frames are built and parsed with kafka-python's own protocol classes too, so these tests
check the peer against the same encoder and decoder rollguard will use against real brokers.
"""

from __future__ import annotations

import io
import logging
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import kafka.errors as Errors
import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import (
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeQuorumRequest,
    ElectionType,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    MetadataRequest,
)
from kafka.protocol.schemas.fields.codecs import Int32

from rollguard.peers.kafka import API_VERSIONS, KafkaClusterSim, TopicSpec
from rollguard.peers.kafka_model import (
    PREFERRED,
    UNCLEAN,
    ClusterModel,
    QuorumReplica,
    rack_aware,
    round_robin,
)

from helpers import Clock, wait_until

TOPICS = {
    "orders": TopicSpec(partitions=3, replication_factor=3, min_insync_replicas=2),
    "audit": TopicSpec(partitions=1, replication_factor=2),
}
INTERNAL = ["__consumer_offsets", "__transaction_state"]
DEADLINE = 10.0


class RawConnection:
    """A bare Kafka connection: kafka-python's request and response classes over a socket."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.correlation_id = 0

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(Int32.encode(len(payload)) + payload)

    def read_frame(self) -> bytes:
        size = Int32.decode(io.BytesIO(self._read_exactly(4)))
        return self._read_exactly(size)

    def _read_exactly(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed by the peer")
            data += chunk
        return data

    def request(self, request: Any) -> Any:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="raw-test")
        self.sock.sendall(request.encode(header=True, framed=True))
        response_class = request.header.get_response_class()
        response = response_class.decode(self.read_frame(), header=True)
        assert response.header.correlation_id == self.correlation_id
        return response

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def sim() -> Iterator[KafkaClusterSim]:
    with KafkaClusterSim(broker_ids=[0, 1, 2], voters=[0, 1, 2], topics=TOPICS) as cluster:
        yield cluster


@pytest.fixture
def connect() -> Iterator[Callable[[KafkaClusterSim], KafkaAdminClient]]:
    clients: list[KafkaAdminClient] = []

    def make(cluster: KafkaClusterSim) -> KafkaAdminClient:
        client = KafkaAdminClient(
            bootstrap_servers=cluster.bootstrap, client_id="rollguard", request_timeout_ms=5000
        )
        clients.append(client)
        cluster.before_stop.append(client.close)  # the client before its cluster
        return client

    yield make
    for client in clients:
        client.close()


def attempt(call: Callable[[], Any]) -> Any:
    """The call's result, or None if kafka-python raised (to poll through reconnects)."""
    try:
        return call()
    except Errors.KafkaError:
        return None


def topic(admin: KafkaAdminClient, name: str) -> dict[str, Any]:
    [described] = admin.describe_topics([name])
    return dict(described)


def partition(admin: KafkaAdminClient, name: str, index: int) -> dict[str, Any]:
    [found] = [p for p in topic(admin, name)["partitions"] if p["partition_index"] == index]
    return dict(found)


def quorum_partition(admin: KafkaAdminClient) -> dict[str, Any]:
    result = admin.describe_metadata_quorum()
    [metadata_topic] = result["topics"]
    assert metadata_topic["topic_name"] == "__cluster_metadata"
    [found] = metadata_topic["partitions"]
    return dict(found)


def configs(admin: KafkaAdminClient, name: str, **kwargs: Any) -> dict[str, Any]:
    result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)], **kwargs)
    return dict(result["topic"][name])


def broker_configs(admin: KafkaAdminClient, broker: int, **kwargs: Any) -> dict[str, Any]:
    resource = ConfigResource(ConfigResourceType.BROKER, str(broker))
    return dict(admin.describe_configs([resource], **kwargs)["broker"][str(broker)])


def voters_by_id(quorum: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {v["replica_id"]: v for v in quorum["current_voters"]}


def out_of_isr(admin: KafkaAdminClient, name: str, broker: int) -> int | None:
    """How many partitions of `name` have `broker` as a replica but not in their ISR."""
    partitions = attempt(lambda: topic(admin, name)["partitions"])
    if partitions is None:
        return None
    return sum(broker in p["replica_nodes"] and broker not in p["isr_nodes"] for p in partitions)


# -- version negotiation and the wire ---------------------------------------------------------


def test_kafka_python_downgrades_from_refused_api_versions_probe_and_negotiates(
    sim: KafkaClusterSim, connect: Callable[[KafkaClusterSim], KafkaAdminClient]
) -> None:
    admin = connect(sim)
    probe, retry = sim.requests[:2]
    assert (probe.api_key, probe.api_version, probe.served) == (ApiKey.ApiVersions, 4, False)
    assert (retry.api_key, retry.api_version, retry.served) == (ApiKey.ApiVersions, 3, True)
    assert retry.broker_id == probe.broker_id
    assert retry.client_id == "rollguard"
    assert admin.api_versions() == dict(API_VERSIONS)

    admin.describe_cluster()
    admin.describe_metadata_quorum()
    admin.describe_topics()
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "orders")])
    used = {(r.api_key, r.api_version) for r in sim.requests if r.api_key != ApiKey.ApiVersions}
    assert used == {
        (ApiKey.Metadata, 13),
        (ApiKey.DescribeCluster, 2),
        (ApiKey.DescribeQuorum, 2),
        (ApiKey.DescribeConfigs, 4),
    }
    assert all(record.served for record in sim.requests[1:])


@pytest.mark.parametrize("version", [4, 9])
def test_unsupported_api_versions_request_is_answered_in_v0(
    sim: KafkaClusterSim, version: int
) -> None:
    # v9 is newer than kafka-python knows: a v3 body behind a hand-set header version.
    header = RequestHeader(
        request_api_key=ApiKey.ApiVersions,
        request_api_version=version,
        correlation_id=41,
        client_id="future-client",
    )
    body = ApiVersionsRequest(
        version=3, client_software_name="future", client_software_version="9.9"
    ).encode()
    with RawConnection(sim.address(2)) as raw:
        raw.send_frame(bytes(header.encode(flexible=True)) + bytes(body))
        frame = raw.read_frame()
        response = ApiVersionsResponse.decode(frame, version=0, header=True)
        assert response.header.correlation_id == 41
        assert response.error_code == Errors.UnsupportedVersionError.errno
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
            (ApiKey.ApiVersions, 0, 3)
        ]
        # Byte for byte a v0 body behind a v0 response header, nothing more.
        response.with_header(correlation_id=41)
        assert bytes(response.encode(header=True)) == frame
        # The connection stays usable, as Kafka's does, for the downgraded retry.
        retry = raw.request(ApiVersionsRequest(version=3, client_software_name="future"))
        assert retry.error_code == 0
        assert {k.api_key for k in retry.api_keys} == set(API_VERSIONS)


@pytest.fixture(scope="module")
def shared_sim() -> Iterator[KafkaClusterSim]:
    with KafkaClusterSim(topics=TOPICS) as cluster:
        yield cluster


def _round_trip_cases() -> list[tuple[int, int]]:
    return [
        (key, version)
        for key, (low, high) in sorted(API_VERSIONS.items())
        for version in range(low, high + 1)
    ]


@pytest.mark.parametrize(
    ("key", "version"),
    _round_trip_cases(),
    ids=[f"{ApiKey(k).name}-v{v}" for k, v in _round_trip_cases()],
)
def test_every_advertised_version_round_trips(
    shared_sim: KafkaClusterSim, key: int, version: int
) -> None:
    sim = shared_sim
    with RawConnection(sim.address(1)) as raw:
        if key == ApiKey.ApiVersions:
            response = raw.request(
                ApiVersionsRequest(version=version, client_software_name="raw-test")
            )
            assert response.error_code == 0
            advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            assert advertised == dict(API_VERSIONS)
        elif key == ApiKey.Metadata:
            topics = [] if version == 0 else [MetadataRequest.MetadataRequestTopic(name="orders")]
            response = raw.request(MetadataRequest(version=version, topics=topics))
            assert sorted(b.node_id for b in response.brokers) == [0, 1, 2]
            assert {b.port for b in response.brokers} == {sim.port(b) for b in (0, 1, 2)}
            orders = next(t for t in response.topics if t.name == "orders")
            assert [p.replica_nodes for p in orders.partitions] == [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
            assert [p.leader_id for p in orders.partitions] == [0, 1, 2]
            if version >= 1:
                assert response.controller_id == 0
            if version >= 2:
                assert response.cluster_id == "rollguard-sim"
            if version >= 10:
                assert orders.topic_id == sim.topic_id("orders")
        elif key == ApiKey.DescribeConfigs:
            resource = DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=ConfigResourceType.TOPIC,
                resource_name="orders",
                configuration_keys=None,
            )
            response = raw.request(
                DescribeConfigsRequest(
                    version=version,
                    resources=[resource],
                    include_synonyms=True,
                    include_documentation=True,
                )
            )
            [result] = response.results
            assert (result.error_code, result.resource_name) == (0, "orders")
            entry = next(c for c in result.configs if c.name == "min.insync.replicas")
            assert entry.value == "2"
            if version == 0:
                assert entry.is_default is False
            else:
                assert entry.config_source == 1  # DYNAMIC_TOPIC_CONFIG
                assert [s.value for s in entry.synonyms] == ["2", "1"]
            if version >= 3:
                assert entry.config_type == 3  # INT
                assert entry.documentation
        elif key == ApiKey.DescribeCluster:
            response = raw.request(
                DescribeClusterRequest(version=version, include_cluster_authorized_operations=True)
            )
            assert response.error_code == 0
            assert (response.cluster_id, response.controller_id) == ("rollguard-sim", 0)
            assert [b.broker_id for b in response.brokers] == [0, 1, 2]
        elif key == ApiKey.ElectLeaders:
            wanted = ElectLeadersRequest.TopicPartitions(topic="orders", partitions=[0, 9])
            response = raw.request(
                ElectLeadersRequest(version=version, election_type=0, topic_partitions=[wanted])
            )
            if version >= 1:
                assert response.error_code == 0
            [result] = response.replica_election_results
            assert result.topic == "orders"
            assert [(r.partition_id, r.error_code) for r in result.partition_result] == [
                (0, Errors.ElectionNotNeededError.errno),
                (9, Errors.UnknownTopicOrPartitionError.errno),
            ]
            assert result.partition_result[1].error_message == "No such partition as orders-9"
        elif key == ApiKey.ListPartitionReassignments:
            response = raw.request(ListPartitionReassignmentsRequest(version=version, topics=None))
            assert (response.error_code, response.error_message, response.topics) == (0, None, [])
        else:
            assert key == ApiKey.DescribeQuorum
            topic_data = DescribeQuorumRequest.TopicData(
                topic_name="__cluster_metadata",
                partitions=[DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)],
            )
            response = raw.request(DescribeQuorumRequest(version=version, topics=[topic_data]))
            [quorum] = response.topics[0].partitions
            assert (quorum.error_code, quorum.leader_id, quorum.leader_epoch) == (0, 0, 1)
            assert [v.replica_id for v in quorum.current_voters] == [0, 1, 2]
            if version >= 2:
                assert [n.node_id for n in response.nodes] == [0, 1, 2]


def test_unserved_api_or_version_closes_the_connection(
    sim: KafkaClusterSim, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kafka_peer")
    with RawConnection(sim.address(0)) as raw:
        request = FindCoordinatorRequest(version=0, key="group")
        request.with_header(correlation_id=1, client_id="raw-test")
        raw.sock.sendall(request.encode(header=True, framed=True))
        assert raw.closed_by_peer()
    with RawConnection(sim.address(0)) as raw:
        header = RequestHeader(
            request_api_key=ApiKey.Metadata,
            request_api_version=14,
            correlation_id=2,
            client_id="raw-test",
        )
        raw.send_frame(bytes(header.encode(flexible=True)))
        assert raw.closed_by_peer()
    refused = [(r.api_key, r.api_version) for r in sim.requests if not r.served]
    assert refused == [(ApiKey.FindCoordinator, 0), (ApiKey.Metadata, 14)]
    assert "FindCoordinator v0 is not served" in caplog.text
    assert "Metadata v14 is not served" in caplog.text
    # Other connections are unaffected.
    with RawConnection(sim.address(0)) as raw:
        assert raw.request(ApiVersionsRequest(version=3)).error_code == 0


# -- cluster, topics and configs ----------------------------------------------------------------


def test_describe_cluster_reports_brokers_and_quorum_leader(
    sim: KafkaClusterSim, connect: Callable[[KafkaClusterSim], KafkaAdminClient]
) -> None:
    cluster = connect(sim).describe_cluster()
    assert cluster["cluster_id"] == "rollguard-sim"
    assert cluster["controller_id"] == 0
    assert cluster["brokers"] == [
        {"broker_id": b, "host": "127.0.0.1", "port": sim.port(b), "rack": None, "is_fenced": False}
        for b in (0, 1, 2)
    ]


def test_topics_are_assigned_round_robin_and_listed(
    sim: KafkaClusterSim, connect: Callable[[KafkaClusterSim], KafkaAdminClient]
) -> None:
    admin = connect(sim)
    assert sorted(admin.list_topics()) == [*INTERNAL, "audit", "orders"]
    orders = topic(admin, "orders")
    assert orders["error_code"] == 0
    assert orders["topic_id"] == str(sim.topic_id("orders"))
    assert [
        (p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
        for p in orders["partitions"]
    ] == [(0, 0, [0, 1, 2], [0, 1, 2]), (1, 1, [1, 2, 0], [1, 2, 0]), (2, 2, [2, 0, 1], [2, 0, 1])]
    assert partition(admin, "audit", 0)["replica_nodes"] == [0, 1]
    [missing] = admin.describe_topics(["missing"])
    assert missing["error_code"] == Errors.UnknownTopicOrPartitionError.errno


def test_min_insync_replicas_override_versus_default(
    sim: KafkaClusterSim, connect: Callable[[KafkaClusterSim], KafkaAdminClient]
) -> None:
    admin = connect(sim)
    override = configs(admin, "orders")["min.insync.replicas"]
    assert (override["value"], override["config_source"]) == ("2", "DYNAMIC_TOPIC_CONFIG")
    assert override["config_type"] == "INT"
    # kafka-python's default filter ("modified") hides configs left at their defaults ...
    assert "min.insync.replicas" not in configs(admin, "audit")
    # ... which config_filter="all" shows, with where the value comes from.
    default = configs(admin, "audit", config_filter="all", include_synonyms=True)
    entry = default["min.insync.replicas"]
    assert (entry["value"], entry["config_source"]) == ("1", "DEFAULT_CONFIG")
    assert entry["synonyms"] == [
        {"name": "min.insync.replicas", "value": "1", "source": "DEFAULT_CONFIG"}
    ]
    # Asking for named keys only (as rollguard's observer does) returns just those.
    wanted = [
        ConfigResource(ConfigResourceType.TOPIC, name, configs={"min.insync.replicas": None})
        for name in ("orders", "audit")
    ]
    only = admin.describe_configs(wanted, config_filter="all")["topic"]
    assert {name: list(entries) for name, entries in only.items()} == {
        "orders": ["min.insync.replicas"],
        "audit": ["min.insync.replicas"],
    }
    assert [only[name]["min.insync.replicas"]["value"] for name in ("orders", "audit")] == [
        "2",
        "1",
    ]
    with_synonyms = configs(admin, "orders", include_synonyms=True)["min.insync.replicas"]
    assert [(s["value"], s["source"]) for s in with_synonyms["synonyms"]] == [
        ("2", "DYNAMIC_TOPIC_CONFIG"),
        ("1", "DEFAULT_CONFIG"),
    ]


def test_static_broker_min_insync_replicas(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    topics = {"orders": TopicSpec(3, 3, min_insync_replicas=3), "audit": TopicSpec(1, 2)}
    with KafkaClusterSim(topics=topics, broker_min_insync_replicas=2) as sim:
        admin = connect(sim)
        audit = configs(admin, "audit", config_filter="all")["min.insync.replicas"]
        assert (audit["value"], audit["config_source"]) == ("2", "STATIC_BROKER_CONFIG")
        orders = configs(admin, "orders", include_synonyms=True)["min.insync.replicas"]
        assert orders["value"] == "3"
        assert [(s["value"], s["source"]) for s in orders["synonyms"]] == [
            ("3", "DYNAMIC_TOPIC_CONFIG"),
            ("2", "STATIC_BROKER_CONFIG"),
            ("1", "DEFAULT_CONFIG"),
        ]
        broker = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all"
        )["broker"]["1"]
        assert broker["min.insync.replicas"]["value"] == "2"
        assert broker["min.insync.replicas"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert (broker["node.id"]["value"], broker["node.id"]["read_only"]) == ("1", True)
        routed = [r for r in sim.requests if r.api_key == ApiKey.DescribeConfigs]
        assert routed[-1].broker_id == 1  # kafka-python sends BROKER resources to that broker


def test_describe_configs_of_an_unknown_topic(
    sim: KafkaClusterSim, connect: Callable[[KafkaClusterSim], KafkaAdminClient]
) -> None:
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=ConfigResourceType.TOPIC, resource_name="missing", configuration_keys=None
    )
    with RawConnection(sim.address(0)) as raw:
        response = raw.request(DescribeConfigsRequest(version=4, resources=[resource]))
    [result] = response.results
    assert result.error_code == Errors.UnknownTopicOrPartitionError.errno
    assert result.configs == []
    # kafka-python 3.0.12 drops per-resource error codes: an unknown topic has no configs.
    assert configs(connect(sim), "missing") == {}


# -- brokers stopping and starting ----------------------------------------------------------------


def test_stopped_broker_leaves_metadata_and_isr_and_returns_fenced_on_same_port(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    with KafkaClusterSim(topics=TOPICS, unfence_delay=2.0, internal_topics=0) as sim:
        stop_and_restart_broker_1(sim, connect(sim))


def stop_and_restart_broker_1(sim: KafkaClusterSim, admin: KafkaAdminClient) -> None:
    port = sim.port(1)
    sim.stop_broker(1)

    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    state = sim.partition_state("orders", 1)
    assert (state.leader, state.isr, state.offline_replicas) == (2, (2, 0), (1,))
    assert state.leader_epoch == 1

    def isr_without_1() -> list[dict[str, Any]] | None:
        partitions = attempt(lambda: topic(admin, "orders")["partitions"])
        if partitions and all(1 not in p["isr_nodes"] for p in partitions):
            return list(partitions)
        return None

    partitions = wait_until(isr_without_1, DEADLINE, what="broker 1 to leave every ISR")
    assert [p["leader_id"] for p in partitions] == [0, 2, 2]
    assert all(p["offline_replicas"] == [1] for p in partitions)
    with RawConnection(sim.address(0)) as raw:
        metadata = raw.request(MetadataRequest(version=12, topics=None))
    assert sorted(b.node_id for b in metadata.brokers) == [0, 2]
    # Like a fenced KRaft broker: still registered, listed as fenced when asked for.
    brokers = wait_until(lambda: attempt(admin.describe_cluster), DEADLINE)["brokers"]
    assert [(b["broker_id"], b["is_fenced"]) for b in brokers] == [
        (0, False),
        (1, True),
        (2, False),
    ]

    sim.start_broker(1)
    assert sim.port(1) == port
    # Fenced until it has replayed the metadata log; Kafka opens a fixed port only then.
    assert sim.broker_phase(1) == "fenced"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert 1 not in sim.partition_state("orders", 1).isr
    assert sim.partition_state("orders", 1).offline_replicas == (1,)
    wait_until(lambda: sim.broker_phase(1) == "unfenced", DEADLINE, what="broker 1 unfenced")
    socket.create_connection(("127.0.0.1", port), timeout=2).close()

    def isr_with_1() -> list[dict[str, Any]] | None:
        partitions = attempt(lambda: topic(admin, "orders")["partitions"])
        if partitions and all(1 in p["isr_nodes"] for p in partitions):
            return list(partitions)
        return None

    partitions = wait_until(isr_with_1, DEADLINE, what="broker 1 to rejoin every ISR")
    assert [p["leader_id"] for p in partitions] == [0, 2, 2]  # leadership does not come back
    assert sim.elect_preferred_leaders() == 1
    assert partition(admin, "orders", 1)["leader_id"] == 1
    assert [b["is_fenced"] for b in admin.describe_cluster()["brokers"]] == [False] * 3


def test_a_stopped_brokers_port_stays_its_own_until_it_listens_again() -> None:
    # Linux hands a closed listener's ephemeral port to the next outgoing connection; one
    # that took a stopped broker's port failed its restart (CI, stop 55). Nothing but the
    # broker may bind its port while it is down, and a connection to it is still refused.
    with KafkaClusterSim(broker_ids=[0, 1], topics=(), unfence_delay=0, internal_topics=0) as sim:
        port = sim.port(1)
        sim.stop_broker(1)
        for reuse in (False, True):
            with socket.socket() as other:
                if reuse:
                    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                with pytest.raises(OSError, match="in use"):
                    other.bind(("127.0.0.1", port))
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        sim.start_broker(1)
        wait_until(lambda: sim.broker_phase(1) == "unfenced", DEADLINE, what="broker 1 unfenced")
        assert sim.port(1) == port
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with socket.socket() as after:  # the cluster's stop gives the port back
        after.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past its TIME_WAIT
        after.bind(("127.0.0.1", port))


def test_restarted_broker_rejoins_isr_after_delay(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    # `rejoin_after`, the older name, is the catch-up time of every broker.
    with KafkaClusterSim(topics=TOPICS, rejoin_after=0.5, unfence_delay=0.1) as sim:
        assert sim.rejoin_after == 0.5
        admin = connect(sim)
        sim.stop_broker(2)
        sim.start_broker(2)
        started = time.monotonic()
        assert 2 not in sim.partition_state("orders", 0).isr

        def unfenced() -> bool:
            cluster = attempt(admin.describe_cluster)
            return bool(cluster) and [
                b["broker_id"] for b in cluster["brokers"] if not b["is_fenced"]
            ] == [0, 1, 2]

        wait_until(unfenced, DEADLINE, what="broker 2 unfenced")

        def rejoined() -> bool:
            isr = attempt(lambda: partition(admin, "orders", 0)["isr_nodes"])
            return isr == [0, 1, 2] and sim.catching_up(2) == 0

        wait_until(rejoined, DEADLINE, what="broker 2 to rejoin the ISR")
        assert time.monotonic() - started >= 0.45


def test_last_isr_member_stopping_leaves_partition_leaderless(
    sim: KafkaClusterSim, connect: Callable[[KafkaClusterSim], KafkaAdminClient]
) -> None:
    admin = connect(sim)
    sim.stop_broker(0)
    sim.stop_broker(1)
    # Kafka never empties an ISR: the last member stays in it, the partition has no leader.
    state = sim.partition_state("audit", 0)
    assert (state.leader, state.isr, state.offline_replicas) == (-1, (1,), (0, 1))

    def leaderless() -> dict[str, Any] | None:
        found = attempt(lambda: partition(admin, "audit", 0))
        return found if found and found["leader_id"] == -1 else None

    audit = wait_until(leaderless, DEADLINE, what="audit-0 to lose its leader")
    assert audit["error_code"] == Errors.LeaderNotAvailableError.errno
    assert audit["isr_nodes"] == [1]
    sim.start_broker(0)  # not in the ISR: it cannot lead, nor catch up without a leader
    sim.start_broker(1)  # the last ISR member leads again as soon as it is unfenced
    wait_until(
        lambda: sim.partition_state("audit", 0).leader == 1, DEADLINE, what="audit-0 led by 1"
    )
    wait_until(
        lambda: sim.partition_state("audit", 0).isr == (0, 1), DEADLINE, what="0 back in sync"
    )


def test_admin_client_keeps_working_when_brokers_stop(
    sim: KafkaClusterSim, connect: Callable[[KafkaClusterSim], KafkaAdminClient]
) -> None:
    admin = connect(sim)
    admin.describe_cluster()
    for stopped, remaining in ((0, [1, 2]), (1, [2])):
        sim.stop_broker(stopped)
        asked_before = len(sim.requests)  # a stopped broker's listener and connections are gone

        def brokers_up(expected: list[int] = remaining) -> bool:
            cluster = attempt(admin.describe_cluster)
            return (
                bool(cluster)
                and [b["broker_id"] for b in cluster["brokers"] if not b["is_fenced"]] == expected
            )

        wait_until(brokers_up, DEADLINE, what=f"the client to see brokers {remaining}")
        assert wait_until(lambda: attempt(admin.list_topics), DEADLINE) is not None
    # Every request since the last stop went to the one broker left (the client may have needed
    # as few as two: one DescribeCluster, one Metadata).
    assert {r.broker_id for r in sim.requests[asked_before:]} == {2}
    # A new client bootstraps through the one live broker despite the dead ones listed first.
    fresh = connect(sim)
    assert fresh.describe_cluster()["controller_id"] == 0
    assert sorted(fresh.list_topics()) == [*INTERNAL, "audit", "orders"]


def test_set_isr_moves_leadership_and_is_validated(
    sim: KafkaClusterSim, connect: Callable[[KafkaClusterSim], KafkaAdminClient]
) -> None:
    admin = connect(sim)
    sim.set_isr("orders", 0, [2, 1])
    state = sim.partition_state("orders", 0)
    assert (state.leader, state.isr, state.leader_epoch) == (1, (1, 2), 1)
    assert partition(admin, "orders", 0)["isr_nodes"] == [1, 2]
    assert partition(admin, "orders", 0)["leader_epoch"] == 1
    with pytest.raises(ValueError, match="subset"):
        sim.set_isr("audit", 0, [2])
    with pytest.raises(ValueError, match="unknown partition"):
        sim.set_isr("orders", 3, [0])
    sim.stop_broker(2)
    with pytest.raises(ValueError, match="stopped"):
        sim.set_isr("orders", 1, [1, 2])


# -- the KRaft quorum -----------------------------------------------------------------------------


def test_quorum_lag_and_leader_changes(
    sim: KafkaClusterSim, connect: Callable[[KafkaClusterSim], KafkaAdminClient]
) -> None:
    admin = connect(sim)
    sim.set_voter_lag(2, 5000, offsets=7)
    quorum = quorum_partition(admin)
    assert (quorum["leader_id"], quorum["leader_epoch"], quorum["error"]) == (0, 1, None)
    voters = {v["replica_id"]: v for v in quorum["current_voters"]}
    leader = voters[0]
    assert leader["last_caught_up_timestamp"] == leader["last_fetch_timestamp"]
    assert abs(leader["last_caught_up_timestamp"] - time.time() * 1000) < 5000
    assert leader["log_end_offset"] == quorum["high_watermark"]
    assert leader["last_caught_up_timestamp"] - voters[2]["last_caught_up_timestamp"] == 5000
    assert voters[2]["log_end_offset"] == quorum["high_watermark"] - 7
    assert voters[1]["last_caught_up_timestamp"] == leader["last_caught_up_timestamp"]
    assert quorum["observers"] == []  # combined mode: every broker is a voter

    sim.advance_quorum(10)
    sim.stop_voter(0)

    def new_leader() -> dict[str, Any] | None:
        found = attempt(lambda: quorum_partition(admin))
        return found if found and found["leader_id"] == 1 else None

    quorum = wait_until(new_leader, DEADLINE, what="voter 1 to lead")
    assert (quorum["leader_id"], quorum["leader_epoch"], quorum["high_watermark"]) == (1, 2, 1010)
    # A new leader's replica states start empty: it reports -1 for a voter that has not
    # fetched from it (RaftUtil.toReplicaState), here the stopped old leader.
    voter_0 = voters_by_id(quorum)[0]
    assert [voter_0[k] for k in ("log_end_offset", "last_fetch_timestamp")] == [-1, -1]
    assert voter_0["last_caught_up_timestamp"] == -1
    assert admin.describe_cluster()["controller_id"] == 1
    sim.advance_quorum(5)
    assert sim.quorum_state().voters[0].log_end_offset == -1
    assert sim.quorum_state().voters[2].log_end_offset == 1015 - 7

    sim.stop_voter(1)  # one voter of three left: no majority, no leader
    # Kafka's NOT_LEADER_OR_FOLLOWER (6), under kafka-python's older name for it.
    assert "NotLeaderForPartitionError" in quorum_partition(admin)["error"]
    assert admin.describe_cluster()["controller_id"] == -1
    sim.start_voter(0)
    quorum = quorum_partition(admin)
    assert (quorum["leader_id"], quorum["leader_epoch"], quorum["error"]) == (0, 3, None)

    sim.set_quorum_leader(2)
    assert quorum_partition(admin)["leader_id"] == 2
    assert sim.quorum_state().voters[2].log_end_offset == sim.quorum_state().high_watermark


def test_separate_controllers_and_observers(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    with KafkaClusterSim(voters=[100, 101, 102], topics=TOPICS) as sim:
        admin = connect(sim)
        quorum = quorum_partition(admin)
        assert quorum["leader_id"] == 100
        assert [v["replica_id"] for v in quorum["current_voters"]] == [100, 101, 102]
        assert [o["replica_id"] for o in quorum["observers"]] == [0, 1, 2]
        assert admin.describe_cluster()["controller_id"] == 100
        assert [n["node_id"] for n in admin.describe_metadata_quorum()["nodes"]] == [
            100,
            101,
            102,
        ]

        sim.stop_broker(1)  # an observer that stops stays listed, frozen, for a while

        def observer_frozen() -> dict[int, Any] | None:
            found = attempt(lambda: quorum_partition(admin)["observers"])
            observers = {o["replica_id"]: o for o in found or []}
            if sorted(observers) != [0, 1, 2]:
                return None
            fetched = {node: o["last_fetch_timestamp"] for node, o in observers.items()}
            return observers if fetched[1] < fetched[0] else None

        wait_until(observer_frozen, DEADLINE, what="observer 1 to stay listed, frozen")
        with pytest.raises(ValueError, match="not a voter"):
            sim.set_voter_lag(1, 100)
        sim.stop_node(100)
        assert sim.quorum_state().leader_id == 101


def test_controller_id_like_real_kraft_brokers(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    with KafkaClusterSim(
        voters=[100, 101, 102], topics=TOPICS, controller_id_from="random_alive_broker"
    ) as sim:
        admin = connect(sim)
        sim.stop_broker(0)
        seen = set()
        with RawConnection(sim.address(1)) as raw:
            for _ in range(30):
                seen.add(raw.request(MetadataRequest(version=12, topics=[])).controller_id)
        assert seen <= {1, 2}
        # The client may still pick broker 0 once: kafka-python does not retry elsewhere.
        cluster = wait_until(lambda: attempt(admin.describe_cluster), DEADLINE)
        assert cluster["controller_id"] in {1, 2}
        quorum = wait_until(lambda: attempt(lambda: quorum_partition(admin)), DEADLINE)
        assert quorum["leader_id"] == 100


# -- the model under a fake clock: exact timings ------------------------------------------------


def test_a_restarted_broker_is_fenced_then_rejoins_its_isrs_spread_over_its_catch_up() -> None:
    clock = Clock(1_700_000_000.0)
    model = ClusterModel(
        [0, 1, 2],
        [0, 1, 2],
        {"orders": TopicSpec(10, 3, 2)},
        catch_up={1: 40.0},
        unfence_delay=10.0,
        clock=clock,
    )
    led_by_1 = [p for p in range(10) if model.partition_state("orders", p).leader == 1]
    assert led_by_1 == [1, 4, 7]
    model.stop_broker(1)
    assert model.catching_up(1) == ()  # stopped: offline, not catching up
    assert [model.partition_state("orders", p).leader for p in led_by_1] == [2, 2, 2]
    clock.advance(30)
    assert model.start_broker(1)
    assert (model.phase(1), model.unfenced()) == ("fenced", (0, 2))
    assert len(model.catching_up(1)) == 10
    clock.advance(9.99)  # partitions due at 4 s and 8 s wait for the unfencing
    model.tick()
    assert len(model.catching_up(1)) == 10
    assert model.partition_state("orders", 0).offline_replicas == (1,)
    clock.advance(0.01)
    model.unfence(1)
    remaining = [len(model.catching_up(1))]
    for _ in range(8):
        clock.advance(4)
        model.tick()
        remaining.append(len(model.catching_up(1)))
    assert remaining == [8, 7, 6, 5, 4, 3, 2, 1, 0]  # one every 4 s, the last at 40 s
    assert model.partition_state("orders", 0).isr == (0, 1, 2)
    # Leadership does not come back on its own; a preferred election brings it back.
    assert [model.partition_state("orders", p).leader for p in led_by_1] == [2, 2, 2]
    assert model.elect_preferred_leaders() == 3
    assert [model.partition_state("orders", p).leader for p in led_by_1] == [1, 1, 1]


def test_catch_up_is_per_broker_and_rejoin_after_is_the_default() -> None:
    clock = Clock(1_700_000_000.0)
    model = ClusterModel(
        [0, 1, 2],
        [0, 1, 2],
        {"orders": TopicSpec(3, 3)},
        catch_up={0: 6.0},
        default_catch_up=0.0,
        unfence_delay=0.0,
        clock=clock,
    )
    assert (model.catch_up_of(0), model.catch_up_of(1)) == (6.0, 0.0)
    for broker in (0, 1):
        model.stop_broker(broker)
        model.start_broker(broker)
        model.unfence(broker)
    assert (len(model.catching_up(0)), len(model.catching_up(1))) == (3, 0)
    model.set_catch_up(1, 3.0)  # from its next start on
    model.stop_broker(1)
    model.start_broker(1)
    model.unfence(1)
    clock.advance(2.0)
    model.tick()
    assert (len(model.catching_up(0)), len(model.catching_up(1))) == (2, 1)
    with pytest.raises(ValueError, match="finite number of seconds"):
        model.set_catch_up(2, -1.0)
    with pytest.raises(ValueError, match="unknown broker 7"):
        model.set_catch_up(7, 1.0)


def test_the_last_isr_member_stays_in_the_isr_and_leads_once_unfenced() -> None:
    clock = Clock(1_700_000_000.0)
    model = ClusterModel([0, 1], [0, 1], {"audit": TopicSpec(1, 2)}, unfence_delay=1.0, clock=clock)
    model.stop_broker(0)
    model.stop_broker(1)
    assert model.partition_state("audit", 0).isr == (1,)
    assert model.partition_state("audit", 0).leader == -1
    model.start_broker(0)
    model.unfence(0)
    clock.advance(60)
    model.tick()  # caught up long ago, but there is no leader to fetch from
    assert model.catching_up(0) == (("audit", 0),)
    model.start_broker(1)
    assert model.partition_state("audit", 0).leader == -1  # fenced: cannot lead yet
    model.unfence(1)
    state = model.partition_state("audit", 0)
    assert (state.leader, state.isr) == (1, (0, 1))


@pytest.mark.parametrize(
    ("stopped", "restarted", "election", "expected", "leader_after"),
    [
        ((), (), PREFERRED, Errors.ElectionNotNeededError, 0),
        ((0,), (), PREFERRED, Errors.PreferredLeaderNotAvailableError, 1),
        ((0,), (0,), PREFERRED, Errors.NoError, 0),
        ((1, 2, 0), (1,), PREFERRED, Errors.PreferredLeaderNotAvailableError, -1),
        ((), (), UNCLEAN, Errors.ElectionNotNeededError, 0),
        ((0, 1), (), UNCLEAN, Errors.ElectionNotNeededError, 2),
        ((1, 2, 0), (1,), UNCLEAN, Errors.NoError, 1),
        ((1, 2, 0), (), UNCLEAN, Errors.EligibleLeadersNotAvailableError, -1),
    ],
)
def test_election_outcomes_follow_kafkas_controller(
    stopped: tuple[int, ...],
    restarted: tuple[int, ...],
    election: int,
    expected: type[Errors.BrokerResponseError],
    leader_after: int,
) -> None:
    clock = Clock(1_700_000_000.0)
    model = ClusterModel([0, 1, 2], [0, 1, 2], {"orders": TopicSpec(1, 3)}, clock=clock)
    for broker in stopped:
        model.stop_broker(broker)
    for broker in restarted:
        model.start_broker(broker)
        model.unfence(broker)
    clock.advance(60)  # every restarted broker has caught up where it can
    model.tick()
    isr_before = model.partition_state("orders", 0).isr
    assert model.elect("orders", 0, election) == (expected, None)
    state = model.partition_state("orders", 0)
    assert state.leader == leader_after
    if expected is Errors.NoError and election == UNCLEAN:
        assert (isr_before, state.isr) == ((0,), (1,))  # unclean: the ISR is the new leader
    assert model.elect("orders", 5, election) == (
        Errors.UnknownTopicOrPartitionError,
        "No such partition as orders-5",
    )
    assert model.elect("missing", 0, election) == (
        Errors.UnknownTopicOrPartitionError,
        "No such topic as missing",
    )


def test_a_reassignment_reports_the_union_until_its_new_replicas_are_in_sync() -> None:
    model = ClusterModel(
        [0, 1, 2, 3], [0, 1, 2], {"audit": TopicSpec(2, 2)}, clock=Clock(1_700_000_000.0)
    )
    assert model.partition_state("audit", 0).replicas == (0, 1)
    model.start_reassignment("audit", 0, [3, 1])
    state = model.partition_state("audit", 0)
    assert (state.replicas, state.adding_replicas, state.removing_replicas) == (
        (3, 1, 0),
        (3,),
        (0,),
    )
    assert (state.isr, state.leader, state.reassigning) == ((1, 0), 0, True)
    assert model.catching_up(3) == (("audit", 0),)
    with pytest.raises(ValueError, match="already has a reassignment"):
        model.start_reassignment("audit", 0, [2, 1])
    model.stop_broker(3)
    with pytest.raises(ValueError, match=r"adding replicas \[3\] are not running"):
        model.finish_reassignment("audit", 0)
    model.start_broker(3)
    model.unfence(3)
    assert model.partition_state("audit", 0).isr == (1, 0)  # adding: not in sync by itself
    epoch = model.partition_state("audit", 0).leader_epoch
    model.finish_reassignment("audit", 0)
    state = model.partition_state("audit", 0)
    assert (state.replicas, state.isr, state.reassigning) == ((3, 1), (3, 1), False)
    assert (state.leader, state.leader_epoch) == (3, epoch + 1)  # the leader was removed
    # Only reordering, or dropping a replica while the rest is in sync, completes at once.
    model.start_reassignment("audit", 1, [2, 1])
    assert model.partition_state("audit", 1).replicas == (2, 1)
    model.start_reassignment("audit", 1, [2])
    state = model.partition_state("audit", 1)
    assert (state.replicas, state.isr, state.reassigning) == ((2,), (2,), False)
    with pytest.raises(ValueError, match="no reassignment in flight"):
        model.finish_reassignment("audit", 1)
    with pytest.raises(ValueError, match="unknown brokers"):
        model.start_reassignment("audit", 1, [9])


def test_a_controller_only_node_stays_behind_until_its_quorum_catch_up_is_done() -> None:
    clock = Clock(1_700_000_000.0)
    model = ClusterModel(
        [0, 1, 2], [100, 101, 102], {}, quorum_catch_up=2.0, unfence_delay=0.5, clock=clock
    )

    def replica(node: int) -> QuorumReplica:
        state = model.quorum_state()
        [found] = [r for r in (*state.voters, *state.observers) if r.replica_id == node]
        return found

    def now_ms() -> int:
        return int(clock.now * 1000)

    stopped_ms = now_ms()
    model.stop_voter(101)
    clock.advance(5)
    model.advance_quorum(40)
    # While down: the leader's view of it is frozen; the leader itself is always current.
    assert replica(101) == QuorumReplica(101, 1000, stopped_ms, stopped_ms)
    assert replica(100) == QuorumReplica(100, 1040, now_ms(), now_ms())
    model.start_voter(101)
    assert model.quorum_catching_up(101)
    clock.advance(1)
    # Fetching again (fresh fetch time, log end halfway) but not caught up yet.
    assert replica(101) == QuorumReplica(101, 1020, now_ms(), stopped_ms)
    clock.advance(1)
    assert not model.quorum_catching_up(101)
    assert replica(101) == QuorumReplica(101, 1040, now_ms(), now_ms())
    # A leader change: the new leader knows nothing of nodes that have not fetched from it.
    model.stop_voter(102)
    model.stop_voter(100)
    assert model.quorum_leader == -1  # 1 of 3 voters: no majority
    model.start_voter(102)
    assert (model.quorum_leader, model.quorum_epoch) == (101, 2)  # the longest log wins
    assert replica(100) == QuorumReplica(100, -1, -1, -1)
    assert replica(102).last_caught_up_timestamp == -1  # catching up from the new leader
    clock.advance(2)
    assert replica(102) == QuorumReplica(102, 1040, now_ms(), now_ms())
    model.start_voter(100)  # back, under a leader it never fetched from: nothing caught up yet
    assert replica(100) == QuorumReplica(100, 1040, now_ms(), -1)
    clock.advance(2)
    assert replica(100) == QuorumReplica(100, 1040, now_ms(), now_ms())
    # Observers: a stopped broker is forgotten by a new leader; a started one is back.
    model.stop_broker(1)
    model.set_quorum_leader(102)
    assert [o.replica_id for o in model.quorum_state().observers] == [0, 2]
    model.start_broker(1)
    assert model.quorum_catching_up(1)
    model.unfence(1)
    assert not model.quorum_catching_up(1)
    assert [o.replica_id for o in model.quorum_state().observers] == [0, 1, 2]


def test_rack_aware_placement_puts_replicas_on_different_racks() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    brokers = list(racks)
    model = ClusterModel(
        brokers,
        [0, 1, 2],
        {"orders": TopicSpec(12, 3), "audit": TopicSpec(6, 2, placement="round_robin")},
        racks=racks,
        placement="rack_aware",
        clock=Clock(1_700_000_000.0),
    )
    placed = [model.partition_state("orders", p).replicas for p in range(12)]
    assert all(len({racks[r] for r in replicas}) == 3 for replicas in placed)
    assert placed[:3] == [(0, 2, 4), (3, 5, 1), (4, 0, 2)]  # striped: one rack further each
    leaders = [replicas[0] for replicas in placed]
    assert sorted(leaders) == sorted(brokers * 2)  # leadership spread evenly
    audit = [model.partition_state("audit", p).replicas for p in range(6)]
    assert audit == [(b, (b + 1) % 6) for b in range(6)]
    # Without racks all brokers form one rack: still one replica per broker, striped.
    assert rack_aware([0, 1, 2], {}, 3, 2) == [(0, 1), (2, 0), (1, 2)]
    assert round_robin([0, 1, 2], 3, 2) == [(0, 1), (1, 2), (2, 0)]
    with pytest.raises(ValueError, match="unknown brokers"):
        ClusterModel([0], [0], {}, racks={5: "a"})


# -- real timings and features, through kafka-python's KafkaAdminClient --------------------------


def test_a_watcher_sees_a_restarted_broker_fenced_then_catching_up_partition_by_partition(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    topics = {"orders": TopicSpec(partitions=12, replication_factor=3, min_insync_replicas=2)}
    with KafkaClusterSim(
        topics=topics, internal_topics=0, catch_up={1: 3.0}, unfence_delay=0.5
    ) as sim:
        admin = connect(sim)
        sim.stop_broker(1)
        wait_until(lambda: out_of_isr(admin, "orders", 1) == 12, DEADLINE, what="1 out")
        sim.start_broker(1)
        started = time.monotonic()
        # Fenced: registered but in no ISR, absent from Metadata, fenced in DescribeCluster.
        brokers = wait_until(lambda: attempt(admin.describe_cluster), DEADLINE)["brokers"]
        assert {b["broker_id"]: b["is_fenced"] for b in brokers} == {0: False, 1: True, 2: False}
        with RawConnection(sim.address(0)) as raw:
            metadata = raw.request(MetadataRequest(version=12, topics=[]))
        assert sorted(b.node_id for b in metadata.brokers) == [0, 2]
        seen: list[tuple[float, int]] = []

        def caught_up() -> bool:
            count = out_of_isr(admin, "orders", 1)
            if count is not None:
                seen.append((time.monotonic() - started, count))
            return count == 0

        wait_until(caught_up, DEADLINE, interval=0.05, what="broker 1 back in every ISR")
        counts = [count for _, count in seen]
        assert counts == sorted(counts, reverse=True)  # it only goes down
        assert len(set(counts)) >= 4, seen  # gradually, not all at once
        assert seen[-1][0] >= 2.9  # the last partition is due at the end of the window
        assert sim.catching_up(1) == 0 and sim.broker_phase(1) == "unfenced"
        assert all(at >= 0.45 for at, count in seen if count < 12)  # none before unfencing


def test_preferred_leader_election_through_the_admin_client(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    with KafkaClusterSim(topics=TOPICS, catch_up={2: 0.2}, unfence_delay=0.1) as sim:
        admin = connect(sim)
        sim.stop_broker(2)
        sim.start_broker(2)
        wait_until(lambda: sim.catching_up(2) == 0 and sim.broker_phase(2) == "unfenced", 10)
        assert partition(admin, "orders", 2)["leader_id"] == 0  # still where it moved

        def codes(response: Any) -> dict[tuple[str, int], int]:
            return {
                (result.topic, p.partition_id): p.error_code
                for result in response.replica_election_results
                for p in result.partition_result
            }

        # kafka-python lists every partition itself; ELECTION_NOT_NEEDED is not an error.
        first = codes(admin.elect_leaders(ElectionType.PREFERRED))
        moved = {key for key, code in first.items() if code == 0}
        assert ("orders", 2) in moved
        assert set(first.values()) == {0, Errors.ElectionNotNeededError.errno}
        assert len(moved) == sum(
            sim.partition_state(t, p).replicas[0] == 2
            for t, spec in sim.topics().items()
            for p in range(spec.partitions)
        )
        assert partition(admin, "orders", 2)["leader_id"] == 2
        second = codes(admin.elect_leaders(ElectionType.PREFERRED, {"orders": [0, 1, 2]}))
        assert set(second.values()) == {Errors.ElectionNotNeededError.errno}

        sim.stop_broker(1)  # orders-1's preferred leader is gone
        unavailable = Errors.PreferredLeaderNotAvailableError
        with pytest.raises(unavailable):
            admin.elect_leaders(ElectionType.PREFERRED, {"orders": [1]})
        response = admin.elect_leaders(ElectionType.PREFERRED, {"orders": [1]}, raise_errors=False)
        assert codes(response) == {("orders", 1): unavailable.errno}
        sent = {r.api_version for r in sim.requests if r.api_key == ApiKey.ElectLeaders}
        assert sent == {2}


def test_internal_topics_like_a_real_cluster(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    with KafkaClusterSim(topics=TOPICS, broker_min_insync_replicas=2) as sim:
        admin = connect(sim)
        described = {t["name"]: t for t in admin.describe_topics()}
        assert sorted(described) == [*INTERNAL, "audit", "orders"]
        assert [described[name]["is_internal"] for name in sorted(described)] == [
            True,
            True,
            False,
            False,
        ]
        for name in INTERNAL:
            partitions = described[name]["partitions"]
            assert len(partitions) == 50
            assert all(len(p["replica_nodes"]) == 3 for p in partitions)
        resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in INTERNAL]
        found = admin.describe_configs(resources, config_filter="all")["topic"]
        offsets, transactions = (found[name] for name in INTERNAL)
        # __consumer_offsets takes the broker's min.insync.replicas; the transaction
        # coordinator sets transaction.state.log.min.isr (2) on its topic.
        assert [offsets["min.insync.replicas"][k] for k in ("value", "config_source")] == [
            "2",
            "STATIC_BROKER_CONFIG",
        ]
        assert [transactions["min.insync.replicas"][k] for k in ("value", "config_source")] == [
            "2",
            "DYNAMIC_TOPIC_CONFIG",
        ]
        assert offsets["cleanup.policy"]["value"] == transactions["cleanup.policy"]["value"]
        assert offsets["cleanup.policy"]["value"] == "compact"
        assert transactions["unclean.leader.election.enable"]["value"] == "false"
        admin.close()  # before its cluster stops (see the quorum fetch timeout's test)

    with KafkaClusterSim(
        broker_ids=[0, 1],
        topics={},
        internal_topics=4,
        broker_configs={"transaction.state.log.min.isr": "1"},
    ) as small:
        admin = connect(small)
        partitions = topic(admin, "__transaction_state")["partitions"]
        assert [len(p["replica_nodes"]) for p in partitions] == [2] * 4
        value = configs(admin, "__transaction_state")["min.insync.replicas"]["value"]
        assert value == "1"
    with KafkaClusterSim(topics=TOPICS, internal_topics=0) as bare:
        assert sorted(connect(bare).list_topics()) == ["audit", "orders"]


def test_controller_only_node_stop_and_start_as_describe_quorum_reports_it(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    with KafkaClusterSim(
        voters=[100, 101, 102], topics=TOPICS, internal_topics=0, quorum_catch_up=1.5
    ) as sim:
        admin = connect(sim)
        sim.stop_node(101)

        def stale_by_300ms() -> dict[str, Any] | None:
            voters = voters_by_id(quorum_partition(admin))
            lag = voters[100]["last_caught_up_timestamp"] - voters[101]["last_caught_up_timestamp"]
            return voters[101] if lag >= 300 else None

        down = wait_until(stale_by_300ms, DEADLINE, what="voter 101 to fall behind")
        assert down["last_fetch_timestamp"] == down["last_caught_up_timestamp"]
        sim.start_node(101)
        started_ms = time.time() * 1000
        assert sim.quorum_catching_up(101)
        catching_up = voters_by_id(quorum_partition(admin))[101]
        if sim.quorum_catching_up(101):  # answered within the 1.5 s catch-up
            assert catching_up["last_fetch_timestamp"] >= started_ms - 50
            assert catching_up["last_caught_up_timestamp"] == down["last_caught_up_timestamp"]

        def follows_the_leader() -> bool:
            voters = voters_by_id(quorum_partition(admin))
            leader = voters[100]["last_caught_up_timestamp"]
            return bool(voters[101]["last_caught_up_timestamp"] == leader)

        wait_until(follows_the_leader, DEADLINE, what="voter 101 caught up")
        assert time.time() * 1000 - started_ms >= 1400


def test_list_partition_reassignments_through_the_admin_client(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    with KafkaClusterSim(broker_ids=[0, 1, 2, 3], voters=[0, 1, 2], topics=TOPICS) as sim:
        admin = connect(sim)
        assert admin.list_partition_reassignments() == {}
        sim.start_reassignment("audit", 0, [3, 1])
        in_flight = {"replicas": [3, 1, 0], "adding_replicas": [3], "removing_replicas": [0]}
        assert admin.list_partition_reassignments() == {TopicPartition("audit", 0): in_flight}
        assert admin.list_partition_reassignments({"audit": [0]}) == {
            TopicPartition("audit", 0): in_flight
        }
        assert admin.list_partition_reassignments({"orders": [0], "missing": [0]}) == {}
        described = partition(admin, "audit", 0)
        assert (described["replica_nodes"], described["isr_nodes"]) == ([3, 1, 0], [1, 0])
        sim.finish_reassignment("audit", 0)
        assert admin.list_partition_reassignments() == {}
        described = partition(admin, "audit", 0)
        assert (described["replica_nodes"], described["isr_nodes"]) == ([3, 1], [3, 1])
        assert described["leader_id"] == 3
        sent = {
            r.api_version for r in sim.requests if r.api_key == ApiKey.ListPartitionReassignments
        }
        assert sent == {0}


def test_broker_configs_report_the_quorum_fetch_timeout_and_its_source(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    with KafkaClusterSim(topics=TOPICS) as sim:
        first = connect(sim)
        entry = broker_configs(first, 0, config_filter="all")["controller.quorum.fetch.timeout.ms"]
        # Closed before its cluster stops: a client left to reconnect to a stopped cluster
        # leaks a socket whose ResourceWarning fails a later test (CI26).
        first.close()
        assert [entry[k] for k in ("value", "config_source", "read_only")] == [
            "2000",
            "DEFAULT_CONFIG",
            True,
        ]
    custom = {"controller.quorum.fetch.timeout.ms": "4000"}
    with KafkaClusterSim(topics=TOPICS, broker_configs=custom) as sim:
        admin = connect(sim)
        # kafka-python's default filter ("modified") keeps dynamic configs only: ask for all.
        assert "controller.quorum.fetch.timeout.ms" not in broker_configs(admin, 2)
        found = broker_configs(admin, 2, include_synonyms=True, config_filter="all")
        entry = found["controller.quorum.fetch.timeout.ms"]
        assert (entry["value"], entry["config_source"]) == ("4000", "STATIC_BROKER_CONFIG")
        assert [(s["value"], s["source"]) for s in entry["synonyms"]] == [
            ("4000", "STATIC_BROKER_CONFIG"),
            ("2000", "DEFAULT_CONFIG"),
        ]
        assert "controller.quorum.fetch.timeout.ms" not in configs(admin, "orders")
        assert configs(admin, "orders")["min.insync.replicas"]["value"] == "2"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"broker_configs": {"num.io.threads": "8"}}, "unknown broker configs"),
        ({"broker_configs": {"controller.quorum.fetch.timeout.ms": "2s"}}, "not >= 1"),
        (
            {"broker_configs": {"min.insync.replicas": "3"}, "broker_min_insync_replicas": 2},
            "disagree",
        ),
        ({"internal_topics": -1}, "internal_topics"),
        ({"catch_up": {0: float("inf")}}, "finite number of seconds"),
        ({"unfence_delay": -0.5}, "unfence_delay"),
        ({"topics": {"t": TopicSpec(configs={"retention.ms": "1"})}}, "unknown topic configs"),
        ({"placement": "random"}, "unknown placement"),
    ],
)
def test_bad_constructor_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KafkaClusterSim(**kwargs)


def test_racks_are_reported_and_drive_rack_aware_placement(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    racks = {0: "az-1", 1: "az-1", 2: "az-2", 3: "az-2"}
    with KafkaClusterSim(
        broker_ids=[0, 1, 2, 3],
        voters=[0, 1, 2],
        topics={"orders": TopicSpec(8, 2, 2)},
        racks=racks,
        placement="rack_aware",
        internal_topics=2,
    ) as sim:
        admin = connect(sim)
        cluster = admin.describe_cluster()
        assert {b["broker_id"]: b["rack"] for b in cluster["brokers"]} == racks
        with RawConnection(sim.address(3)) as raw:
            metadata = raw.request(MetadataRequest(version=12, topics=[]))
        assert {b.node_id: b.rack for b in metadata.brokers} == racks
        for name in ("orders", "__consumer_offsets"):
            for p in topic(admin, name)["partitions"]:
                assert len({racks[r] for r in p["replica_nodes"]}) == 2, (name, p)

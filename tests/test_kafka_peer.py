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
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import (
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeQuorumRequest,
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
from kafka_peer import API_VERSIONS, KafkaClusterSim, TopicSpec

from helpers import wait_until

TOPICS = {
    "orders": TopicSpec(partitions=3, replication_factor=3, min_insync_replicas=2),
    "audit": TopicSpec(partitions=1, replication_factor=2),
}
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
    return described


def partition(admin: KafkaAdminClient, name: str, index: int) -> dict[str, Any]:
    [found] = [p for p in topic(admin, name)["partitions"] if p["partition_index"] == index]
    return found


def quorum_partition(admin: KafkaAdminClient) -> dict[str, Any]:
    result = admin.describe_metadata_quorum()
    [metadata_topic] = result["topics"]
    assert metadata_topic["topic_name"] == "__cluster_metadata"
    [found] = metadata_topic["partitions"]
    return found


def configs(admin: KafkaAdminClient, name: str, **kwargs: Any) -> dict[str, Any]:
    result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)], **kwargs)
    return result["topic"][name]


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
    assert sorted(admin.list_topics()) == ["audit", "orders"]
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


def test_stopped_broker_leaves_metadata_and_isr_and_returns_on_same_port(
    sim: KafkaClusterSim, connect: Callable[[KafkaClusterSim], KafkaAdminClient]
) -> None:
    admin = connect(sim)
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
            return partitions
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
    socket.create_connection(("127.0.0.1", port), timeout=2).close()

    def isr_with_1() -> list[dict[str, Any]] | None:
        partitions = attempt(lambda: topic(admin, "orders")["partitions"])
        if partitions and all(1 in p["isr_nodes"] for p in partitions):
            return partitions
        return None

    partitions = wait_until(isr_with_1, DEADLINE, what="broker 1 to rejoin every ISR")
    assert [p["leader_id"] for p in partitions] == [0, 2, 2]  # leadership does not come back
    assert sim.elect_preferred_leaders() == 1
    assert partition(admin, "orders", 1)["leader_id"] == 1
    assert [b["is_fenced"] for b in admin.describe_cluster()["brokers"]] == [False] * 3


def test_restarted_broker_rejoins_isr_after_delay(
    connect: Callable[[KafkaClusterSim], KafkaAdminClient],
) -> None:
    with KafkaClusterSim(topics=TOPICS, rejoin_after=0.5) as sim:
        admin = connect(sim)
        sim.stop_broker(2)
        sim.start_broker(2)
        started = time.monotonic()
        cluster = wait_until(lambda: attempt(admin.describe_cluster), DEADLINE)
        assert [b["broker_id"] for b in cluster["brokers"] if not b["is_fenced"]] == [0, 1, 2]
        assert 2 not in sim.partition_state("orders", 0).isr

        def rejoined() -> bool:
            isr = attempt(lambda: partition(admin, "orders", 0)["isr_nodes"])
            return isr == [0, 1, 2]

        wait_until(rejoined, DEADLINE, what="broker 2 to rejoin the ISR")
        assert time.monotonic() - started >= 0.45


def test_last_isr_member_stopping_leaves_partition_leaderless(
    sim: KafkaClusterSim, connect: Callable[[KafkaClusterSim], KafkaAdminClient]
) -> None:
    admin = connect(sim)
    sim.stop_broker(0)
    sim.stop_broker(1)
    state = sim.partition_state("audit", 0)
    assert (state.leader, state.isr) == (-1, ())

    def leaderless() -> dict[str, Any] | None:
        found = attempt(lambda: partition(admin, "audit", 0))
        return found if found and found["leader_id"] == -1 else None

    audit = wait_until(leaderless, DEADLINE, what="audit-0 to lose its leader")
    assert audit["error_code"] == Errors.LeaderNotAvailableError.errno
    sim.start_broker(1)
    assert sim.partition_state("audit", 0).leader == 1


def test_admin_client_keeps_working_when_brokers_stop(
    sim: KafkaClusterSim, connect: Callable[[KafkaClusterSim], KafkaAdminClient]
) -> None:
    admin = connect(sim)
    admin.describe_cluster()
    for stopped, remaining in ((0, [1, 2]), (1, [2])):
        sim.stop_broker(stopped)

        def brokers_up(expected: list[int] = remaining) -> bool:
            cluster = attempt(admin.describe_cluster)
            return (
                bool(cluster)
                and [b["broker_id"] for b in cluster["brokers"] if not b["is_fenced"]] == expected
            )

        wait_until(brokers_up, DEADLINE, what=f"the client to see brokers {remaining}")
        assert wait_until(lambda: attempt(admin.list_topics), DEADLINE) is not None
    assert {r.broker_id for r in sim.requests[-3:]} == {2}
    # A new client bootstraps through the one live broker despite the dead ones listed first.
    fresh = connect(sim)
    assert fresh.describe_cluster()["controller_id"] == 0
    assert sorted(fresh.list_topics()) == ["audit", "orders"]


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

    def stopped_voter_frozen() -> dict[str, Any] | None:
        found = quorum_partition(admin)
        fetched = {v["replica_id"]: v["last_fetch_timestamp"] for v in found["current_voters"]}
        return found if fetched[0] < fetched[1] else None

    quorum = wait_until(stopped_voter_frozen, DEADLINE, what="voter 0's fetch time to freeze")
    assert (quorum["leader_id"], quorum["leader_epoch"]) == (1, 2)
    voters = {v["replica_id"]: v for v in quorum["current_voters"]}
    assert voters[0]["log_end_offset"] == quorum["high_watermark"] == 1010
    assert admin.describe_cluster()["controller_id"] == 1
    sim.advance_quorum(5)
    assert sim.quorum_state().voters[0].log_end_offset == 1010  # stopped: frozen

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

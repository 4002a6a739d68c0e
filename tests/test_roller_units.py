"""The roller's smaller parts: inventory, journal, Kafka admin view, properties, selectors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from kafka_peer import KafkaClusterSim, TopicSpec

from roller.journal import EventLog, FileJournalStore, NodeRecord, NodeStatus, RollRecord, RollState
from roller.kafka_admin import AdminUnavailable, KafkaObserver, cluster_view, read_client_properties
from roller.kubernetes import parse_selector
from roller.model import Role
from roller.platform import load_inventory
from shared.errors import ConfigError

from helpers import wait_until


def test_inventory_is_read_with_roles_and_commands(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(
        "nodes:\n"
        "  - {id: 0, name: kafka-0, roles: [broker, controller], agent: 'https://a:8443',\n"
        "     restart: 'ssh kafka-0 sudo systemctl restart kafka'}\n"
        "  - {id: 1, agent: 'https://b:8443', restart: 'true'}\n"
    )
    first, second = load_inventory(path)
    assert first.node.roles == frozenset({Role.BROKER, Role.CONTROLLER})
    assert first.restart.startswith("ssh kafka-0")
    assert second.node.name == "node-1" and second.node.roles == frozenset({Role.BROKER})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes: [", "not valid YAML"),
        ("[]", "a mapping with a 'nodes' list"),
        ("nodes: [{id: 0, agent: x}]", "nodes[0] lacks restart"),
        ("nodes: [{id: -1, agent: x, restart: y}]", "id -1 is not a node id"),
        ("nodes: [{id: 0, agent: x, restart: y, roles: [leader]}]", "must be broker and/or"),
        ("nodes: [{id: 0, agent: x, restart: y}, {id: 0, agent: z, restart: y}]", "unique"),
    ],
)
def test_inventory_errors_name_the_file_and_entry(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        load_inventory(path)
    assert str(path) in str(raised.value)


def test_the_roll_journal_round_trips_atomically(tmp_path: Path) -> None:
    store = FileJournalStore(tmp_path)
    record = RollRecord("r1", "2026-11-22T00:00:00.000Z")
    record.nodes["kafka-0"] = NodeRecord(NodeStatus.RESTARTING, "t", "uid-1", "restart")
    store.save(record)
    record.state = RollState.COMPLETED
    store.save(record)
    loaded = store.load("r1")
    assert loaded is not None and loaded.state is RollState.COMPLETED
    assert loaded.nodes["kafka-0"].instance == "uid-1"
    assert json.loads((tmp_path / "roll-r1.json").read_text())["version"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["roll-r1.json"]  # no temporary left over
    assert store.load("nope") is None
    (tmp_path / "roll-bad.json").write_text('{"version": 9}')
    with pytest.raises(ConfigError, match="version 9"):
        store.load("bad")


def test_events_are_json_lines_with_figures(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "e.jsonl", "r1")
    log.write("kafka-1", "wait-recovery", "progressing", remainingSegmentsToRecover=5, eta=None)
    log.write(None, "roll-completed")
    first, second = (json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines())
    assert first["node"] == "kafka-1" and first["remainingSegmentsToRecover"] == 5
    assert "eta" not in first and second["action"] == "roll-completed" and first["ts"].endswith("Z")


def test_cluster_view_from_kafka_python_results() -> None:
    topics = [
        {
            "name": "orders",
            "partitions": [{"partition_index": 0, "replica_nodes": [0, 1, 2], "isr_nodes": [0, 1]}],
        }
    ]
    quorum = {
        "topics": [
            {
                "partitions": [
                    {
                        "leader_id": 1,
                        "current_voters": [
                            {"replica_id": 0, "last_caught_up_timestamp": 100},
                            {"replica_id": 1, "last_caught_up_timestamp": 200},
                            {"replica_id": 2, "last_caught_up_timestamp": -1},
                        ],
                    }
                ]
            }
        ]
    }
    view = cluster_view(topics, {"orders": 2}, quorum, controller_id=0)
    assert view.partitions[0].isr == (0, 1) and view.partitions[0].min_isr == 2
    assert view.active_controller == 1  # the quorum leader, not DescribeCluster's controller_id
    assert view.quorum is not None and view.quorum.voters[2].last_caught_up_ms is None


def test_client_properties_become_kafka_python_settings(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# TLS\nsecurity.protocol=SSL\nssl.ca.location=/ca.pem\n"
        "ssl.endpoint.identification.algorithm=https\n"
    )
    assert read_client_properties(path) == {
        "security_protocol": "SSL",
        "ssl_cafile": "/ca.pem",
        "ssl_check_hostname": True,
    }
    path.write_text("ssl.truststore.location=/t.jks\n")
    with pytest.raises(ConfigError, match="JKS"):
        read_client_properties(path)
    path.write_text("bogus.key=1\n")
    with pytest.raises(ConfigError, match=r":1: bogus.key is not supported"):
        read_client_properties(path)


def test_label_selectors_are_parsed_and_set_terms_refused() -> None:
    pairs = parse_selector("strimzi.io/cluster=prod, tier!=test, app, !canary")
    assert set(pairs) == {"strimzi.io/cluster", "tier", "app", "canary"}
    with pytest.raises(ConfigError, match="set-based"):
        parse_selector("env in (a,b)")


def test_the_observer_reads_partitions_min_isr_and_quorum_from_the_kafka_peer() -> None:
    topics = {"orders": TopicSpec(3, 3, 2), "audit": TopicSpec(1, 3, None)}
    with KafkaClusterSim(broker_ids=[0, 1, 2], voters=[0, 1, 2], topics=topics) as sim:
        observer = KafkaObserver(sim.bootstrap, timeout_ms=5000)
        try:
            view = observer._observe()
            assert {(p.topic, p.min_isr) for p in view.partitions} == {("orders", 2), ("audit", 1)}
            assert view.active_controller == 0 and view.quorum is not None
            sim.stop_broker(2)

            def isr_without_2() -> bool:
                try:
                    current = observer._observe()
                except AdminUnavailable:
                    return False
                return all(2 not in p.isr for p in current.partitions)

            wait_until(isr_without_2, timeout=20, what="broker 2 out of every ISR")
        finally:
            observer.close()


def test_an_unreachable_cluster_is_admin_unavailable() -> None:
    observer = KafkaObserver("127.0.0.1:1", timeout_ms=1000)
    with pytest.raises(AdminUnavailable, match=r"127\.0\.0\.1:1"):
        observer._observe()
    observer.close()

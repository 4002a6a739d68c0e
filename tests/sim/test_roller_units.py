"""The roller's smaller parts: inventory, journal, Kafka admin view, properties, selectors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollguard.peers.kafka import KafkaClusterSim, TopicSpec
from rollguard.roller.kafka_admin import (
    AdminApiError,
    KafkaObserver,
    cluster_view,
    read_client_properties,
)
from rollguard.roller.kubernetes import parse_selector
from rollguard.roller.roll.node.record import How, NodeRecord, Phase
from rollguard.roller.roll.stores.journal import FileJournalStore, RollRecord, RollState
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.errors import ConfigError

from helpers import wait_until


def test_the_roll_journal_round_trips_atomically(tmp_path: Path) -> None:
    store = FileJournalStore(tmp_path)
    record = RollRecord("r1", "2026-11-22T00:00:00.000Z")
    record.nodes["kafka-0"] = NodeRecord(
        "kafka-0", Phase.RESTARTING, "t", reason="restart", how=How.RESTART, instance="uid-1"
    )
    store.save(record)
    record.state = RollState.COMPLETED
    store.save(record)
    loaded = store.load("r1")
    assert loaded is not None and loaded.state is RollState.COMPLETED
    assert loaded.nodes["kafka-0"].instance == "uid-1"
    assert json.loads((tmp_path / "roll-r1.json").read_text())["version"] == 2
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
                            {
                                "replica_id": 1,
                                "last_caught_up_timestamp": 200,
                                "log_end_offset": 5000,
                            },
                            {
                                "replica_id": 2,
                                "last_caught_up_timestamp": -1,
                                "log_end_offset": -1,
                            },
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
    # each voter's log end offset, when reported (-1 and absent: not known)
    assert [v.log_end_offset for v in view.quorum.voters] == [None, 5000, None]


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
    # Read as Java reads it: `:` and whitespace separators, a value continued over lines.
    path.write_text(
        "security.protocol: SASL_SSL\nsasl.mechanism PLAIN\nssl.ca.location=/etc/\\\n  ca.pem\n"
    )
    assert read_client_properties(path) == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "ssl_cafile": "/etc/ca.pem",
    }
    path.write_text(
        'sasl.mechanism=PLAIN\nsasl.jaas.config=PlainLoginModule required \\\n  username="u";\n'
    )
    with pytest.raises(ConfigError, match=r":2: sasl.jaas.config is not supported"):
        read_client_properties(path)
    path.write_text("ssl.ca.location=/c\\u00\n")
    with pytest.raises(ConfigError, match=r"client.properties:1: malformed \\uxxxx escape"):
        read_client_properties(path)


def test_label_selectors_are_parsed_and_set_terms_refused() -> None:
    pairs = parse_selector("strimzi.io/cluster=prod, tier!=test, app, !canary")
    assert set(pairs) == {"strimzi.io/cluster", "tier", "app", "canary"}
    with pytest.raises(ConfigError, match="set-based"):
        parse_selector("env in (a,b)")


def test_the_observer_reads_partitions_min_isr_and_quorum_from_the_kafka_peer() -> None:
    topics = {"orders": TopicSpec(3, 3, 2), "audit": TopicSpec(1, 3, None)}
    with KafkaClusterSim(broker_ids=[0, 1, 2, 3], voters=[0, 1, 2], topics=topics) as sim:
        observer = KafkaObserver(sim.bootstrap, timeout_ms=5000)
        try:
            view = observer._observe()
            assert {(p.topic, p.min_isr, p.internal) for p in view.partitions} == {
                ("orders", 2, False),
                ("audit", 1, False),
                # Internal topics count like any other, each with its own min ISR.
                ("__consumer_offsets", 1, True),
                ("__transaction_state", 2, True),
            }
            assert view.active_controller == 0 and view.quorum is not None
            assert view.quorum_fetch_timeout_ms == 2000 and view.reassignments == ()
            sim.start_reassignment("orders", 1, [0, 1, 2])  # replicas 1, 2, 3: adds 0, drops 3
            (moving,) = observer._observe().reassignments
            assert (moving.name, moving.adding, moving.removing) == ("orders-1", (0,), (3,))
            sim.finish_reassignment("orders", 1)
            sim.stop_broker(2)

            def isr_without_2() -> bool:
                try:
                    current = observer._observe()
                except AdminApiError:
                    return False
                return all(2 not in p.isr for p in current.partitions)

            wait_until(isr_without_2, timeout=20, what="broker 2 out of every ISR")
        finally:
            observer.close()


def test_the_observer_reads_the_clusters_own_quorum_fetch_timeout() -> None:
    configs = {"controller.quorum.fetch.timeout.ms": "4500"}
    with KafkaClusterSim(broker_ids=[0, 1], broker_configs=configs, internal_topics=0) as sim:
        observer = KafkaObserver(sim.bootstrap, timeout_ms=5000)
        try:
            assert observer._observe().quorum_fetch_timeout_ms == 4500
        finally:
            observer.close()


def test_an_unreachable_cluster_is_admin_unavailable() -> None:
    observer = KafkaObserver("127.0.0.1:1", timeout_ms=1000)
    with pytest.raises(AdminApiError, match=r"127\.0\.0\.1:1"):
        observer._observe()
    observer.close()


def test_the_live_table_says_what_each_node_waits_on() -> None:
    from rollguard.roller.model import Node, Role
    from rollguard.roller.roll.cli.display import DETAIL_WIDTH, LiveTable

    nodes = [Node(i, f"kafka-{i}", frozenset({Role.BROKER})) for i in range(2)]
    table = LiveTable(nodes)
    reason = "orders-0 has ISR [0, 1] = min.insync.replicas 2 with this node; waiting on node 2"
    table.update(nodes[0], f"waiting until safe: {reason}", None)
    table.update(nodes[1], "catching up: 12 partitions not yet in sync", None)
    assert table.rows["kafka-0"][:2] == ("waiting until safe", reason[: DETAIL_WIDTH - 1] + "…")
    assert table.rows["kafka-1"][:2] == ("catching up", "12 partitions not yet in sync")


def test_the_journal_keeps_a_rolls_target_version_and_refuses_one_that_is_not(
    tmp_path: Path,
) -> None:
    store = FileJournalStore(tmp_path)
    store.save(RollRecord("r1", "2026-11-28T00:00:00.000Z", kafka_version="4.4.0"))
    loaded = store.load("r1")
    assert loaded is not None and loaded.kafka_version == "4.4.0"
    assert json.loads(store.path("r1").read_text())["kafkaVersion"] == "4.4.0"
    # A roll without one writes none, and reads back as none (journals from before it too).
    store.save(RollRecord("r2", "2026-11-28T00:00:00.000Z"))
    assert "kafkaVersion" not in json.loads(store.path("r2").read_text())
    assert (plain := store.load("r2")) is not None and plain.kafka_version is None
    data = json.loads(store.path("r1").read_text())
    data["kafkaVersion"] = "4.4.0; rm -rf /"
    with pytest.raises(ConfigError) as raised:
        RollRecord.from_json(data)
    assert "kafkaVersion '4.4.0; rm -rf /' is not a Kafka version" in str(raised.value)

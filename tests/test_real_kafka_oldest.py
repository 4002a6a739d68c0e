"""The agent on the oldest Kafka rollguard supports, 4.0.0 (the first release without ZooKeeper,
and one without eligible leader replicas by default): 3 combined KRaft nodes.

The newest 4.x gets the whole tier (tests/test_real_kafka.py); here, what differs by version:
the recovery gauges' names and shapes, the states a recovery runs in, and the min ISR the
roller reads, on a cluster whose min.insync.replicas is a plain broker default.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from rollguard.peers.realcluster import RealCluster, real_cluster
from rollguard.peers.realkafka import OLDEST
from rollguard.roller.roll.kafka_admin import KafkaObserver

from helpers import Pki
from real_kafka import (
    assert_one_stretch_of_recovering,
    kafka_build_logged,
    look,
    until_running_again,
)


@pytest.fixture(scope="module")
def cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    folder = tmp_path_factory.mktemp("real-kafka-oldest")
    with real_cluster(folder, pki, data_mb=20, combined=3, version=OLDEST) as real:
        yield real


def test_the_roller_reads_the_min_isr_of_every_topic(cluster: RealCluster) -> None:
    observer = KafkaObserver(cluster.kafka.bootstrap)
    try:
        view = asyncio.run(observer.observe())
    finally:
        observer.close()
    assert "__consumer_offsets" in {p.topic for p in view.partitions}
    assert {p.min_isr for p in view.partitions} == {2}


def test_each_node_reports_the_kafka_it_runs_as_its_own_log_says(cluster: RealCluster) -> None:
    for node_id, node in cluster.kafka.nodes.items():
        seen = look(cluster, node_id)
        logged = kafka_build_logged(node.log_text())
        assert logged[0] == OLDEST
        assert (seen.body.get("kafkaVersion"), seen.body.get("kafkaCommitId")) == logged, seen


@pytest.mark.timeout(300)
def test_a_real_recovery_on_4_0_is_reported_with_its_logs_counting_down(
    cluster: RealCluster,
) -> None:
    before = look(cluster, 1).body["brokerStartedAt"]
    restarted = time.monotonic()
    cluster.kafka.nodes[1].restart(recover=True, hold=10)
    seen = until_running_again(cluster, 1, before, restarted)
    recovering = [s for s in seen if s.recovery is not None]
    assert recovering and {s.state for s in recovering} <= {1, 2}
    assert_one_stretch_of_recovering([s.recovery["phase"] for s in recovering if s.recovery])
    logs = [s.recovery["remainingLogsToRecover"] for s in recovering if s.recovery]
    assert logs == sorted(logs, reverse=True) and logs[0] > logs[-1]

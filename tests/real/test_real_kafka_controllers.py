"""The roller on a real Kafka with dedicated controllers: 6 brokers in 3 racks, 3 controllers.

Topics with replication 3 and min ISR 2 (the internal ones too), placed by Kafka across the
racks, so both brokers of one rack can restart together: `--max-batch-size 2` rolls the brokers
in three batches, never taking a partition below min ISR, after the controller-only nodes one at
a time with the KRaft quorum led throughout (the test's own observer: the control server's
restart log, a sampler asking DescribeQuorum and every partition's ISR every 100 ms, a canary).
The roll is an upgrade: the cluster formatted at the oldest Kafka, `--kafka-version` the newest,
each node's `install` switching its jars (issue 40: the controllers first); what each node runs
after it is judged by its own log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rollguard.peers.realcluster import RealCluster, real_cluster
from rollguard.peers.realkafka import NEWEST, OLDEST

from helpers import Pki
from real_kafka import events, kafka_build_logged, look, roll, watched

# Three racks: with replication 3 each partition has one replica in each, so both brokers of a
# rack may restart together (in two racks a partition would have two replicas in one of them).
RACKS = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
# The two restarts of a batch are asked at once (each a curl to the control server): within
# this many seconds of each other, even on a loaded machine.
BATCH_S = 10.0


@pytest.fixture(scope="module")
def cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    folder = tmp_path_factory.mktemp("real-kafka-controllers")
    with real_cluster(
        folder,
        pki,
        data_mb=10,
        brokers=6,
        controllers=3,
        racks=RACKS,
        heap="256m",
        version=OLDEST,
    ) as real:
        yield real


def test_a_controller_only_node_answers_broker_state_missing(cluster: RealCluster) -> None:
    for node in cluster.kafka.controllers:
        seen = look(cluster, node.node_id)
        assert seen.status == 503 and seen.body["error"] == "broker-state-missing", seen
        # what it runs, said all the same, as its own log gave it at its start
        logged = kafka_build_logged(node.log_text())
        assert (seen.body["kafkaVersion"], seen.body["kafkaCommitId"]) == logged, seen


@pytest.mark.timeout(900)
def test_controllers_one_at_a_time_then_brokers_two_by_two_a_rack_at_a_time(
    cluster: RealCluster, pki: Pki, tmp_path: Path
) -> None:
    kafka = cluster.kafka
    with watched(cluster, quorum=True) as watch:
        done = roll(cluster, tmp_path, "--max-batch-size", "2", "--kafka-version", NEWEST)
    print(f"\n{watch.summary()}")
    assert done.returncode == 0, done.stdout + done.stderr
    # By the control server's own log: each node once; batches of two brokers together
    assert [cluster.restarts.of(n) for n in kafka.nodes] == [1] * 9
    log = cluster.restarts.log
    assert {r.node_id for r in log[:3]} == {6, 7, 8}, log
    pairs = [log[i : i + 2] for i in range(3, 9, 2)]
    assert all(RACKS[a.node_id] == RACKS[b.node_id] for a, b in pairs), log
    restarts = [e for e in events(tmp_path) if e["action"] == "restart"]
    order = [e["node"] for e in restarts]
    # the controller-only nodes first, one at a time
    assert set(order[:3]) == {"kafka-6", "kafka-7", "kafka-8"}
    assert all(e.get("batch") is None for e in restarts[:3])
    batches: dict[int, set[str]] = {}
    for e in restarts[3:]:
        batches.setdefault(e["batch"], set()).add(e["node"])
    racks = [
        {RACKS[int(n.removeprefix("kafka-"))] for n in members} for members in batches.values()
    ]
    assert len(batches) == 3 and all(len(r) == 1 for r in racks), batches
    # The test's own eyes: never below min ISR, the quorum always led, no canary send lost
    watch.assert_safe(together=BATCH_S)
    # Every node upgraded, by its own log; each one's install asked before its restart
    assert {n: kafka_build_logged(node.log_text())[0] for n, node in kafka.nodes.items()} == (
        dict.fromkeys(kafka.nodes, NEWEST)
    )
    for r in log:
        asked = [i for i in cluster.restarts.installs if i[0] == r.node_id and i[2] <= r.at]
        assert asked and asked[-1][1] == NEWEST, (r, cluster.restarts.installs)

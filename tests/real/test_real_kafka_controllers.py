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

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rollguard.peers.realcluster import RealCluster, real_cluster
from rollguard.peers.realkafka import NEWEST, OLDEST, described, kafka_configs, kafka_lib
from rollguard.shared.javaprops import parse_properties

from helpers import Pki
from real_kafka import as_operator, kafka_build_logged, look, watched

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
        done = as_operator(cluster, tmp_path).roll(
            "--max-batch-size", "2", "--kafka-version", NEWEST
        )
    print(f"\n{watch.summary()}")
    assert done.returncode == 0, done.stdout + done.stderr
    # By the control server's own log: each node once; batches of two brokers together
    assert [cluster.restarts.of(n) for n in kafka.nodes] == [1] * 9
    log = cluster.restarts.log
    assert {r.node_id for r in log[:3]} == {6, 7, 8}, log
    pairs = [log[i : i + 2] for i in range(3, 9, 2)]
    assert all(RACKS[a.node_id] == RACKS[b.node_id] for a, b in pairs), log
    restarts = done.of("restart")
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


def controller_configs(cluster: RealCluster, node_id: int) -> dict[str, str]:
    """Kafka's own `kafka-configs --bootstrap-controller --describe --all` of a controller:
    key -> value in force (its newest tools: the cluster may be formatted older)."""
    controller = f"127.0.0.1:{cluster.kafka.nodes[node_id].controller_port}"
    text = kafka_configs(
        kafka_lib(NEWEST),
        "--bootstrap-controller", controller,
        "--entity-type", "brokers", "--entity-name", str(node_id), "--describe", "--all",
    )  # fmt: skip
    return described(text)


@pytest.mark.timeout(600)
def test_a_controllers_own_configuration_is_applied_live_where_it_takes_it(
    cluster: RealCluster, tmp_path: Path
) -> None:
    """Last in the module. Desired files for the controller-only nodes (asked on their own
    listener): kafka-6 changes max.connections, which the controller takes live by its own
    answer; kafka-7's file is as it runs; kafka-8 changes queued.max.requests, read at start
    only. Judged by the control server's restart log, the JVMs' pids and Kafka's own
    kafka-configs against each controller."""
    controllers = ("kafka-6", "kafka-7", "kafka-8")
    changed = {6: {"max.connections": "5000"}, 8: {"queued.max.requests": "600"}}
    inventory = json.loads(cluster.inventory().read_text())
    for node in inventory["nodes"]:
        if node["name"] not in controllers:
            continue
        deployed = cluster.kafka.nodes[node["id"]].config_file  # read at its next start
        values = {p.key: p.value for p in parse_properties(deployed.read_text())}
        values.update(changed.get(node["id"], {}))
        deployed.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        node["config"] = str(deployed)
    path = tmp_path / "inventory.yaml"
    path.write_text(json.dumps(inventory))
    # The brokers left out (`--only` would restart the controllers whatever their files say).
    only = ("--skip", ",".join(f"kafka-{n}" for n in range(6)))
    target = as_operator(cluster, tmp_path, inventory=path)
    planned = target.plan(*only, "--output", "json", timeout=300)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    entries = {e["node"]: e for e in planned.entries()}
    actions = {n: entries[n]["action"] for n in controllers}
    wanted = {"kafka-6": "configure", "kafka-7": "skip", "kafka-8": "restart"}
    assert actions == wanted, planned.stdout
    hows = {c["key"]: c["how"] for c in entries["kafka-6"]["config"]["changes"]}
    assert hows == {"max.connections": "live-broker"}, entries["kafka-6"]["config"]
    hows = {c["key"]: c["how"] for c in entries["kafka-8"]["config"]["changes"]}
    assert hows == {"queued.max.requests": "restart"}, entries["kafka-8"]["config"]
    pids = {n: cluster.kafka.nodes[n].process.pid for n in (6, 7, 8)}  # type: ignore[union-attr]
    before = [cluster.restarts.of(n) for n in (6, 7, 8)]
    with watched(cluster, quorum=True) as watch:
        done = target.roll(*only)
    print(f"\n{done.stderr}\n{watch.summary()}")
    assert done.returncode == 0, done.stdout + done.stderr
    watch.assert_safe()
    # The test's own record: kafka-8 alone restarted; kafka-6 and kafka-7 the same JVMs.
    after = [cluster.restarts.of(n) for n in (6, 7, 8)]
    assert [a - b for a, b in zip(after, before, strict=True)] == [0, 0, 1]
    assert {n: cluster.kafka.nodes[n].process.pid for n in (6, 7)} == {6: pids[6], 7: pids[7]}
    # Kafka's own tooling, against each controller: the values in force as the files say.
    assert controller_configs(cluster, 6)["max.connections"] == "5000"
    assert controller_configs(cluster, 8)["queued.max.requests"] == "600"
    assert controller_configs(cluster, 7)["max.connections"] != "5000"

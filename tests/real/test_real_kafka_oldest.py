"""The agent on the oldest Kafka rollguard supports, 4.0.0 (the first release without ZooKeeper,
and one without eligible leader replicas by default): 3 combined KRaft nodes; then the upgrade
from it to the newest, by `rollguard roll --kafka-version`.

The newest 4.x gets the whole tier (tests/real/test_real_kafka.py); here, what differs by version:
the recovery gauges' names and shapes, the states a recovery runs in, and the min ISR the
roller reads, on a cluster whose min.insync.replicas is a plain broker default.

The upgrade (issue 40) runs last, on the same cluster: the inventory's `install` command
switches a node's jars (the control server, as a package install would), the roll restarts it
and checks what it came back on. What each node runs is judged by its own log ("Kafka
version: ..." at its latest start), the roll's safety by the test's own watch (restart log with
every node's phase from its own log, ISR and quorum sampler, canary), never by the agent.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rollguard.peers.commandline import rollguard_args
from rollguard.peers.realcluster import RealCluster, real_cluster
from rollguard.peers.realkafka import NEWEST, OLDEST, kafka_features
from rollguard.roller.kafka_admin import KafkaObserver
from rollguard.roller.roll.upgrades.releases import METADATA_LEVELS, RELEASES

from helpers import BIN, Pki
from real_kafka import (
    ROLL_ID,
    as_operator,
    assert_one_stretch_of_recovering,
    kafka_build_logged,
    look,
    until_running_again,
    watched,
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


# -- The upgrade from 4.0.0 to the newest (issue 40) -------------------------------------------


@pytest.fixture(scope="module")
def upgrade_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The upgrade roll's state directory: the failed roll and its `--resume` share it."""
    return tmp_path_factory.mktemp("upgrade")


def logged(cluster: RealCluster) -> dict[int, str]:
    """What each node runs, by its own log at its latest start."""
    return {n: kafka_build_logged(node.log_text())[0] for n, node in cluster.kafka.nodes.items()}


@pytest.mark.timeout(600)
def test_a_node_whose_upgrade_leaves_it_on_4_0_stops_the_roll_before_the_next(
    cluster: RealCluster, upgrade_folder: Path
) -> None:
    assert logged(cluster) == dict.fromkeys(cluster.kafka.nodes, OLDEST)
    first = len(cluster.restarts.log)
    cluster.broken_installs.update(cluster.kafka.nodes)  # each "succeeds" and changes nothing
    try:
        with watched(cluster, quorum=True) as watch:
            done = as_operator(cluster, upgrade_folder).roll("--kafka-version", NEWEST)
    finally:
        cluster.broken_installs.clear()
    print(f"\n{done.stderr}\n{watch.summary()}")
    watch.assert_safe()
    assert done.returncode == 1, done.stdout + done.stderr
    (restart,) = cluster.restarts.log[first:]  # one restart: none after the node that failed
    (install,) = [i for i in cluster.restarts.installs if i[2] <= restart.at]
    assert install[:2] == (restart.node_id, NEWEST)  # asked, before the restart
    name = f"kafka-{restart.node_id}"
    assert (
        f"{name} came back on Kafka {OLDEST}, not on the target {NEWEST}: its binaries or image "
        "were not switched; the roll stops before the next node"
    ) in done.stderr
    assert logged(cluster) == dict.fromkeys(cluster.kafka.nodes, OLDEST)  # by their own logs
    record = done.journal
    assert record is not None and (record["state"], record["kafkaVersion"]) == ("failed", NEWEST)
    nodes = record["nodes"]
    assert isinstance(nodes, dict) and nodes[name]["phase"] == "failed", nodes


@pytest.mark.timeout(900)
def test_the_resumed_upgrade_takes_every_node_to_4_4_through_a_real_recovery(
    cluster: RealCluster, upgrade_folder: Path
) -> None:
    kafka = cluster.kafka
    target = as_operator(cluster, upgrade_folder)
    if target.journal() is None:
        pytest.fail("the failed upgrade before it left no journal to resume")
    # A node other than the active controller (rolled last) comes back into a real log
    # recovery, on the new version: waited for, the others after it.
    recovering = min(n for n in kafka.nodes if n != kafka.quorum_leader())
    cluster.recover_on_next_restart(recovering, hold=15)
    first = len(cluster.restarts.log)
    with watched(cluster, quorum=True) as watch:  # no --kafka-version: the journal's
        done = target.roll("--resume", ROLL_ID, roll_id=None, timeout=840)
    print(f"\n{done.stderr}\n{watch.summary()}")
    watch.assert_safe()
    assert done.returncode == 0, done.stdout + done.stderr
    restarts = cluster.restarts.log[first:]
    assert sorted(r.node_id for r in restarts) == sorted(kafka.nodes), restarts
    assert restarts[-1].node_id != recovering  # the others waited for its recovery
    assert next(r for r in restarts if r.node_id == recovering).kind == "recover"
    assert kafka.nodes[recovering].throttled
    for r in restarts:  # each one's install asked before its restart
        assert any(i[:2] == (r.node_id, NEWEST) and i[2] <= r.at for i in cluster.restarts.installs)
    assert logged(cluster) == dict.fromkeys(kafka.nodes, NEWEST)  # by their own logs
    record = done.journal
    assert record is not None
    assert (record["state"], record["kafkaVersion"]) == ("completed", NEWEST)
    # the agents say it too
    assert {look(cluster, n).body.get("kafkaVersion") for n in kafka.nodes} == {NEWEST}


@pytest.mark.timeout(600)
def test_a_rollback_before_finalize_is_a_roll_like_any_other(
    cluster: RealCluster, tmp_path: Path
) -> None:
    kafka = cluster.kafka
    if set(logged(cluster).values()) != {NEWEST}:
        pytest.fail("the upgrade before it did not bring every node to the newest")
    back = min(n for n in kafka.nodes if n != kafka.quorum_leader())
    name = f"kafka-{back}"
    first = len(cluster.restarts.log)
    with watched(cluster, quorum=True) as watch:
        down = as_operator(cluster, tmp_path / "down").roll(
            "--only", name, "--kafka-version", OLDEST
        )
        # Back up: the nodes already on the newest are left out, only the one on 4.0.0 goes.
        up = as_operator(cluster, tmp_path / "up").roll("--kafka-version", NEWEST)
    print(f"\n{down.stderr}\n{up.stderr}\n{watch.summary()}")
    watch.assert_safe()
    assert down.returncode == 0, down.stdout + down.stderr
    assert up.returncode == 0, up.stdout + up.stderr
    assert [r.node_id for r in cluster.restarts.log[first:]] == [back, back]
    assert logged(cluster) == dict.fromkeys(kafka.nodes, NEWEST)
    left_out = {e["node"]: e["reason"] for e in up.of("skip")}
    others = {f"kafka-{n}" for n in kafka.nodes if n != back}
    assert left_out == dict.fromkeys(others, f"already runs Kafka {NEWEST}"), left_out


def kafka_describe(cluster: RealCluster) -> dict[str, int]:
    """Each feature's finalized level, by Kafka's own `kafka-features.sh describe` (a
    metadata.version by its name, mapped back to its level)."""
    text = kafka_features("--bootstrap-server", cluster.kafka.bootstrap, "describe")
    by_name = {name: level for level, (name, _) in METADATA_LEVELS.items()}
    found = {}
    for feature, level in re.findall(r"Feature: (\S+)\s.*?FinalizedVersionLevel: (\S+)", text):
        found[feature] = (
            by_name[level] if level in by_name else int(level) if level.isdigit() else 0
        )
    assert "metadata.version" in found, text
    return found


def test_the_release_table_is_kafka_s_own_version_mapping() -> None:
    for (major, minor), levels in RELEASES.items():
        text = kafka_features("version-mapping", "--release-version", f"{major}.{minor}")
        mapped = {name: int(level) for name, level in re.findall(r"^(\S+)=(\d+)", text, re.M)}
        assert mapped == levels, (major, minor, text)


def finalize(cluster: RealCluster, *extra: str) -> subprocess.CompletedProcess[str]:
    """`rollguard finalize` on the cluster's inventory (no state dir: it keeps no journal)."""
    command = rollguard_args("finalize", inventory=cluster.inventory(), bootstrap=cluster.bootstrap,
                             tls=cluster.pki, extra=extra)  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


@pytest.mark.timeout(600)
def test_finalize_sets_4_4_s_levels_by_name_and_leaves_the_static_quorum_static(
    cluster: RealCluster, tmp_path: Path
) -> None:
    kafka = cluster.kafka
    if set(logged(cluster).values()) != {NEWEST}:
        pytest.fail("the upgrade before it did not bring every node to the newest")
    before = kafka_describe(cluster)
    # Formatted at 4.0.0: its metadata.version, eligible leader replicas off, a static quorum.
    assert before["metadata.version"] == RELEASES[(4, 0)]["metadata.version"], before
    assert before.get("eligible.leader.replicas.version", 0) == 0, before
    assert before.get("kraft.version", 0) == 0, before
    # rollguard's view of the features is Kafka's
    shown = subprocess.run(
        [str(BIN / "rollguard"), "features", "--bootstrap", kafka.bootstrap, "--output", "json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    features = {e["feature"]: e["finalized"] for e in map(json.loads, shown.stdout.splitlines())}
    assert {f: lvl for f, lvl in features.items() if lvl} == {
        f: lvl for f, lvl in before.items() if lvl
    }
    # Every node must run the release named: refused, and nothing changed.
    wrong = finalize(cluster, "--kafka-version", "4.3.1")
    assert wrong.returncode == 1, wrong.stderr
    assert "every node must be running Kafka 4.3.1 first" in wrong.stderr
    assert f"kafka-0 runs Kafka {NEWEST}, not 4.3.1" in wrong.stderr
    # A dry run: every feature from -> to, Kafka's verdict, the downgrade said; nothing changed.
    dry = finalize(cluster, "--kafka-version", NEWEST, "--dry-run", "--output", "json")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    lines = [json.loads(line) for line in dry.stdout.splitlines()]
    planned = {e["feature"]: e for e in lines if "feature" in e}
    assert (planned["metadata.version"]["from"], planned["metadata.version"]["to"]) == (25, 33)
    assert planned["metadata.version"]["kafka"] == "OK"
    assert "KAFKA-21426" in planned["kraft.version"]["leftOut"]
    # What each feature it raises turns on for clients, said in the dry run.
    raised = [f for f, e in planned.items() if e["changes"]]
    assert raised and all(planned[f].get("turnsOn") for f in raised), planned
    assert lines[-1] == {
        "softwareDowngrade": False,
        "changedMetadata": ["4.3-IV0 (30)", "4.4-IV1 (32)", "4.4-IV2 (33)"],
    }
    assert kafka_describe(cluster) == before
    # The finalize itself, read back with Kafka's own tool: 4.4's levels, kraft.version 0.
    done = finalize(cluster, "--kafka-version", NEWEST)
    print(f"\n{done.stdout}{done.stderr}")
    assert done.returncode == 0, done.stdout + done.stderr
    after = kafka_describe(cluster)
    wanted = {f: lvl for f, lvl in RELEASES[(4, 4)].items() if f != "kraft.version"}
    assert {f: after.get(f, 0) for f in wanted} == wanted, after
    assert after.get("kraft.version", 0) == 0, after
    assert "read back: 4.4-IV2 (33)" in done.stdout
    # ... and after it, a roll back to 4.0.0 is refused before anything: its software cannot
    # run this metadata.version.
    first = len(cluster.restarts.log), len(cluster.restarts.installs)
    back = as_operator(cluster, tmp_path).roll("--kafka-version", OLDEST)
    assert back.returncode == 2, back.stdout + back.stderr
    assert (
        f"--kafka-version {OLDEST}: the cluster's finalized metadata.version is 4.4-IV2 (33), "
        f"and Kafka {OLDEST} runs 4.0-IV3 (25) at most"
    ) in back.stderr
    assert (len(cluster.restarts.log), len(cluster.restarts.installs)) == first

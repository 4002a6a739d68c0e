"""The agent and the roller on a real Apache Kafka (the newest 4.x): 3 combined KRaft nodes.

One cluster for the module (starting one costs ~15 s of two cores): topics with replication 3
and min ISR 2 (the internal ones too), 100 MB in `bulk`, a real `rollguard-agent` beside each
node. The agent's tests restart nodes directly; the last test rolls the whole cluster with
`rollguard roll` (its defaults but a 20 s operation timeout, which a node's real log recovery
outlasts) while an independent ISR sampler and a canary producer and consumer watch from outside.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rollguard.peers import realkafka
from rollguard.peers.realcluster import RealCluster, real_cluster
from rollguard.peers.realkafka import LOADED, RUNNING
from rollguard.roller.kafka_admin import KafkaObserver
from rollguard.shared.wire import parse_time

from helpers import BIN, Pki, wait_until
from real_kafka import (
    as_operator,
    assert_one_stretch_of_recovering,
    follow,
    kafka_build_logged,
    look,
    until_running_again,
    watched,
)


@pytest.fixture(scope="module")
def cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    folder = tmp_path_factory.mktemp("real-kafka")
    with real_cluster(folder, pki, combined=3) as real:
        yield real


def running_again(cluster: RealCluster, node_id: int, started_at: str | None) -> bool:
    seen = look(cluster, node_id)
    return seen.state == 3 and seen.body.get("brokerStartedAt") != started_at


def test_the_roller_reads_every_topics_min_isr_internal_ones_included(
    cluster: RealCluster,
) -> None:
    # Kafka 4.1+ creates clusters with eligible leader replicas: min.insync.replicas is then a
    # cluster-level setting, which DescribeConfigs reports as every topic's effective value
    observer = KafkaObserver(cluster.kafka.bootstrap)
    try:
        view = asyncio.run(observer.observe())
    finally:
        observer.close()
    topics = {p.topic for p in view.partitions}
    assert {"orders", "bulk", "canary", "__consumer_offsets"} <= topics
    assert {p.min_isr for p in view.partitions} == {2}
    assert {len(p.replicas) for p in view.partitions} == {3}


def test_a_running_broker_reports_running_its_jvm_start_and_the_kafka_it_runs(
    cluster: RealCluster,
) -> None:
    for node_id, node in cluster.kafka.nodes.items():
        seen = look(cluster, node_id)
        assert seen.status == 200 and seen.state == 3, seen
        assert "recovery" not in seen.body and seen.body["brokerStartedAt"].endswith("Z")
        # the version and commit Kafka's own log gave at its start (AppInfoParser)
        logged = kafka_build_logged(node.log_text())
        assert (seen.body["kafkaVersion"], seen.body["kafkaCommitId"]) == logged
        assert logged[0] == realkafka.NEWEST


@pytest.mark.timeout(300)
def test_a_real_recovery_is_reported_in_starting_or_recovery_with_its_logs_counting_down(
    cluster: RealCluster,
) -> None:
    node = cluster.kafka.nodes[2]
    before = look(cluster, 2).body["brokerStartedAt"]
    node.stop()  # a controlled shutdown: the old JVM serves JMX until it has exited
    restarted = time.monotonic()
    node.prepare_recovery()
    node.start(throttle_loading=True, hold=10)
    seen = until_running_again(cluster, 2, before, restarted)
    # once the old JVM is gone, the agent stops serving its sample within a couple of seconds
    first_new = next(s for s in seen if s.status != 200 or s.body.get("brokerStartedAt") != before)
    assert first_new.at - restarted < 3.0, seen[:5]
    recovering = [s for s in seen if s.recovery is not None]
    assert recovering, f"no recovery seen in {len(seen)} answers"
    assert {s.state for s in recovering} <= {1, 2}
    assert_one_stretch_of_recovering([s.recovery["phase"] for s in recovering if s.recovery])
    logs = [s.recovery["remainingLogsToRecover"] for s in recovering if s.recovery]
    assert logs == sorted(logs, reverse=True) and logs[0] > logs[-1]
    assert recovering[-1].at - recovering[0].at > 5, "the throttled recovery lasted too little"
    assert node.throttled


@pytest.mark.timeout(180)
def test_a_clean_restart_is_never_reported_as_a_recovery(cluster: RealCluster) -> None:
    node = cluster.kafka.nodes[1]
    before = look(cluster, 1).body["brokerStartedAt"]
    restarted = time.monotonic()
    node.restart()
    seen = []
    for answer in follow(cluster, 1, until=restarted + 120, every=0.1):
        seen.append(answer)
        if answer.state == 3 and answer.body.get("brokerStartedAt") != before:
            break
    phases = {s.recovery["phase"] for s in seen if s.recovery}
    assert phases <= {"loading"}, phases
    assert seen[-1].state == 3, seen[-5:]


def test_a_killed_broker_is_unavailable_at_once_then_recovers_what_was_not_checkpointed(
    cluster: RealCluster,
) -> None:
    node = cluster.kafka.nodes[1]
    before = look(cluster, 1).body["brokerStartedAt"]
    node.kill()
    killed = time.monotonic()
    gone = wait_until(lambda: (s := look(cluster, 1)).status == 503 and s, 5, what="503")
    assert gone.body["error"] in {"jmx-unreachable", "jmx-timeout"}
    assert gone.at - killed < 3.0
    node.start()
    wait_until(lambda: running_again(cluster, 1, before), 120, interval=0.5, what="RUNNING")


# The roll's --operation-timeout, and the least time the recovering node's log recovery is held
# to: a real recovery that outlasts the timeout (issue 37: a 288 s recovery with a 30 s timeout
# ended the roll the moment it completed), then the seconds a real broker spends in STARTING
# after it (catching up with the metadata log, registering). The timeout must still let the
# other nodes' clean restarts through on a loaded machine: a combined node spent 35 s in
# NOT_RUNNING after a clean restart beside make test (its controller replaying the metadata
# log; nothing a roller can see moves), which a 20 s timeout failed. 50 s, not 60: the held
# recovery ends 66-67 s after its restart on a rare run (CI41, CI48: a recovery thread ran
# between two of the holder's scans), which is still more than 50 + 10.
OPERATION_TIMEOUT = 50.0
HOLD = 75.0
REGISTERING = 10.0


@pytest.mark.timeout(900)
def test_a_roll_waits_out_a_real_recovery_longer_than_its_operation_timeout(
    cluster: RealCluster, pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At 1 % of a core a node's data recovers in 35-45 s whatever the hold, at 0.4 % in 65 s on
    # an idle machine (short of the 75 s asked): 0.2 %, then full speed once the 75 s are over.
    monkeypatch.setattr(realkafka, "HOLD_CPU", 0.002)
    kafka = cluster.kafka
    # Not the active controller (rolled last): the roller must wait for its recovery before
    # restarting the nodes after it.
    recovering = min(n for n in kafka.nodes if n != kafka.quorum_leader())
    name = f"kafka-{recovering}"
    cluster.recover_on_next_restart(recovering, hold=HOLD, registering=REGISTERING)
    with watched(cluster) as watch:
        done = as_operator(cluster, tmp_path).roll("--operation-timeout", f"{OPERATION_TIMEOUT:g}s")
    print(f"\n{done.stderr}\n{watch.summary()}")
    # The test's own eyes first (its control server's restart log with every node's phase from
    # its own Kafka log, the ISR and quorum sampler, the canary), not the roller's word: no
    # restart while any node loaded or recovered its logs, never below min ISR nor leaderless,
    # never blind for more than 2 s, every canary send acknowledged and read back.
    watch.assert_safe()
    assert done.returncode == 0, done.stdout + done.stderr
    # each node restarted once ...
    assert [cluster.restarts.of(n) for n in kafka.nodes] == [1, 1, 1], cluster.restarts.log
    # ... the recovering node's recovery really outlasted the operation timeout ...
    node = kafka.nodes[recovering]
    restart = next(r for r in cluster.restarts.log if r.node_id == recovering)
    assert node.throttled and node.loading_began is not None and node.loading_ended is not None
    assert node.loading_ended - restart.at > OPERATION_TIMEOUT + 10, (restart, node.loading_ended)
    # ... then was not RUNNING for seconds more (its lifecycle thread held), by its own log:
    # when the harness froze that thread in time. It freezes it once it reads "Loaded" in the
    # log; on a loaded machine that read once came after the broker's RUNNING (CI14, 1.6 s
    # after "Loaded"), and then this run did not stage the stretch (the rule has its table).
    (loaded,), running = node.moments(LOADED), node.moments(RUNNING)
    assert running and node.frozen_at is not None, (running, node.frozen_at)  # no freezer?
    if node.frozen_at < running[-1]:
        assert running[-1] - node.frozen_at >= REGISTERING - 1, (node.frozen_at, running)
    else:
        print(f"not staged: loaded {loaded}, frozen {node.frozen_at}, RUNNING {running[-1]}")
    # ... and it was not the last one restarted: the others waited for it.
    assert cluster.restarts.log[-1].node_id != recovering, cluster.restarts.log
    # the recovering broker was waited for, with progress, never restarted again; the others'
    # clean starts loaded their logs for a moment (waited for too: never restart a loading log)
    waits: dict[str, list[float]] = {}
    for e in done.of("wait-recovery"):
        waits.setdefault(e["node"], []).append(parse_time(e["ts"]).timestamp())
    assert max(waits[name]) - min(waits[name]) > 10, waits
    assert all(max(t) - min(t) < 10 for node, t in waits.items() if node != name), waits
    assert f"{name}: recovering: " in done.stderr, done.stderr

    # the agents' timelines and the roll's events, collected: the recovery is on record
    collected = subprocess.run(
        [
            str(BIN / "rollguard"),
            "collect",
            "--inventory",
            str(cluster.inventory()),
            *pki.client_flags(),
            "--out",
            str(tmp_path / "dataset"),
            "--events",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert collected.returncode == 0, collected.stderr
    timeline = pq.read_table(tmp_path / "dataset" / "timeline").to_pylist()
    ours = sorted((r for r in timeline if r["node"] == name), key=lambda r: r["seq"])
    # This roll's recovery: the node's timeline also holds the module's earlier ones (the
    # killed broker's), whose last samples may count fewer logs than this one's first.
    since = restart.wall * 1000
    recovered = [r for r in ours if r["recoveryPhase"] == "recovering" and r["ts"] >= since]
    assert {r["brokerState"] for r in recovered} <= {1, 2} and len(recovered) > 3
    logs = [r["remainingLogsToRecover"] for r in recovered]
    assert logs[0] > logs[-1]
    imported = pq.read_table(tmp_path / "dataset" / "events").to_pylist()
    assert {e["action"] for e in imported} >= {"restart", "wait-recovery", "ready"}

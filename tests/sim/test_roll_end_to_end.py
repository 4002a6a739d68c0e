"""`rollguard roll` as operators run it, against a cluster of real processes.

A broker back in a long log recovery, waited for and never restarted, with the timelines and
events collected after the roll, is proven on a real Kafka (tests/real/test_real_kafka.py); here,
what a real Kafka cannot be made to do on demand (stalls, lagging voters, a roller killed).

Broker JVMs with real agents over mutual TLS, the Kafka-protocol peer, restarts through the
inventory's commands; the roller is the installed `rollguard` command in its own process.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from rollguard.peers.cluster import NodePlan, ProcessCluster
from rollguard.peers.commandline import rollguard_args
from rollguard.peers.harness import InventoryRoll

from helpers import Pki


def test_a_healthy_roll_restarts_each_node_once_active_controller_last(
    pki: Pki, tmp_path: Path
) -> None:
    with ProcessCluster(pki, tmp_path) as cluster:
        done = InventoryRoll(cluster, tmp_path).roll()
        assert done.returncode == 0, done.stderr
        assert [n.restarts for n in cluster.nodes.values()] == [1, 1, 1]
    # node 0 leads the quorum (the active controller): it goes last
    assert done.restarted() == ["kafka-1", "kafka-2", "kafka-0"]
    journal = done.journal
    assert journal is not None and journal["state"] == "completed"
    assert {(n["phase"], n["how"]) for n in journal["nodes"].values()} == {("done", "restart")}
    # the whole roll's outcome, each node by name
    assert "roll t1 completed: restarted 3 (kafka-0, kafka-1, kafka-2), skipped 0" in done.stderr


def test_a_stalled_recovery_fails_the_roll_with_the_reason_and_no_restart(
    pki: Pki, tmp_path: Path
) -> None:
    plans = {1: NodePlan(recovery_ms=60000, stall_at=0.2)}
    with ProcessCluster(pki, tmp_path, plans=plans) as cluster:
        done = InventoryRoll(cluster, tmp_path).roll("--stall-timeout", "4")
        assert done.returncode == 1
        assert "kafka-1 is performing log recovery but made no progress for 4s" in done.stderr
        assert [n.restarts for n in cluster.nodes.values()] == [0, 1, 0]
    journal = done.journal
    assert journal is not None and journal["state"] == "failed" and "kafka-1" in journal["reason"]


def test_an_availability_block_defers_the_node_and_rolls_it_once_safe(
    pki: Pki, tmp_path: Path
) -> None:
    with ProcessCluster(pki, tmp_path) as cluster:
        # orders-0 has ISR [0, 1] = min.insync.replicas 2: neither 0 nor 1 may go down
        cluster.kafka.set_isr("orders", 0, [0, 1])
        with InventoryRoll(cluster, tmp_path).start() as running:
            running.until_event("defer")
            # kafka-2 is not in that ISR: it goes first; when it is back it rejoins orders-0's
            # ISR (the replica caught up), and then the others may go
            done = running.wait(240)
            assert done.returncode == 0, done.stderr
    deferred = {e["node"] for e in done.of("defer")}
    assert deferred and deferred <= {"kafka-0", "kafka-1"}
    assert done.restarted()[0] == "kafka-2"
    assert sorted(done.restarted()) == ["kafka-0", "kafka-1", "kafka-2"]


def test_a_lagging_voter_blocks_the_other_controllers_until_it_catches_up(
    pki: Pki, tmp_path: Path
) -> None:
    with ProcessCluster(pki, tmp_path) as cluster:
        cluster.kafka.set_voter_lag(2, 10_000)
        with InventoryRoll(cluster, tmp_path).start() as running:
            running.until(lambda seen: seen.restarted()[:1] == ["kafka-2"],
                          what="the lagging voter rolled first")  # fmt: skip
            running.until(
                lambda seen: any("caught up" in str(e["reason"]) for e in seen.of("defer")),
                what="a quorum deferral",
            )
            cluster.kafka.set_voter_lag(2, 0)
            done = running.wait(240)
            assert done.returncode == 0, done.stderr


def test_a_roller_killed_mid_roll_resumes_without_restarting_anything_twice(
    pki: Pki, tmp_path: Path
) -> None:
    plans = {1: NodePlan(recovery_ms=6000)}
    with ProcessCluster(pki, tmp_path, plans=plans) as cluster:
        target = InventoryRoll(cluster, tmp_path)
        with target.start() as running:
            # kill -9 while kafka-1, just restarted, is recovering
            running.until_event("wait-recovery")
            running.signal(signal.SIGKILL)
            running.wait(10)
        assert cluster.nodes[1].restarts == 1
        done = target.roll("--resume", "t1")
        assert done.returncode == 0, done.stderr
        assert [n.restarts for n in cluster.nodes.values()] == [1, 1, 1]


def test_sigint_interrupts_with_exit_3_and_a_resumable_journal(pki: Pki, tmp_path: Path) -> None:
    plans = {1: NodePlan(recovery_ms=30000)}
    with (
        ProcessCluster(pki, tmp_path, plans=plans) as cluster,
        InventoryRoll(cluster, tmp_path).start() as running,
    ):
        running.until_event("wait-recovery")
        running.signal(signal.SIGINT)
        done = running.wait(30)
        assert done.returncode == 3, done.stderr
        assert "--resume" in done.stderr
    journal = done.journal
    assert journal is not None and journal["state"] == "interrupted"
    assert journal["nodes"]["kafka-1"]["how"] == "restart"  # on record: waited for, never again
    assert journal["nodes"]["kafka-1"]["phase"] in ("restarting", "recovering")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--inventory", "/no/such.yaml"], "inventory /no/such.yaml"),
        (["--poll-interval", "-1"], "--poll-interval: '-1' is not a positive number"),
        (["--resume", "bad id!"], "--resume: 'bad id!'"),
        (["--retry-jitter-factor", "3"], "--retry-jitter-factor 3 must be in [0, 1]"),
    ],
)
def test_bad_roll_settings_exit_2(pki: Pki, tmp_path: Path, args: list[str], message: str) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("nodes: []\n")
    command = rollguard_args(
        "roll", inventory=inventory, bootstrap="127.0.0.1:1", tls=pki, extra=args
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr

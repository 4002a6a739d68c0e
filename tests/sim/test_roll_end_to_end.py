"""`rollguard roll` as operators run it, against a cluster of real processes.

A broker back in a long log recovery, waited for and never restarted, with the timelines and
events collected after the roll, is proven on a real Kafka (tests/real/test_real_kafka.py); here,
what a real Kafka cannot be made to do on demand (stalls, lagging voters, a roller killed).

Broker JVMs with real agents over mutual TLS, the Kafka-protocol peer, restarts through the
inventory's commands; the roller is the installed `rollguard` command in its own process.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rollguard.peers.cluster import NodePlan, ProcessCluster
from rollguard.peers.commandline import rollguard_args

from helpers import Pki, wait_until


def roll_command(cluster: ProcessCluster, pki: Pki, folder: Path, *extra: str) -> list[str]:
    """`rollguard roll` on the cluster (its quick timings), roll id t1, its state in
    folder/state; the roller presents the cluster's own client certificate."""
    assert pki == cluster.pki
    return cluster.roll_command(folder / "state", "t1", *extra)


def events(folder: Path, roll_id: str = "t1") -> list[dict[str, object]]:
    path = folder / "state" / f"events-{roll_id}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def restarts(folder: Path) -> list[str]:
    return [str(e["node"]) for e in events(folder) if e["action"] == "restart"]


@contextlib.contextmanager
def started(command: list[str], **kwargs: object) -> Iterator[subprocess.Popen[str]]:
    """The roller in the background; killed if the test ends before it does."""
    process = subprocess.Popen(command, text=True, **kwargs)  # type: ignore[call-overload]
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def run(command: list[str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def test_a_healthy_roll_restarts_each_node_once_active_controller_last(
    pki: Pki, tmp_path: Path
) -> None:
    with ProcessCluster(pki, tmp_path) as cluster:
        done = run(roll_command(cluster, pki, tmp_path))
        assert done.returncode == 0, done.stderr
        assert [n.restarts for n in cluster.nodes.values()] == [1, 1, 1]
    # node 0 leads the quorum (the active controller): it goes last
    assert restarts(tmp_path) == ["kafka-1", "kafka-2", "kafka-0"]
    journal = json.loads((tmp_path / "state" / "roll-t1.json").read_text())
    assert journal["state"] == "completed"
    assert {(n["phase"], n["how"]) for n in journal["nodes"].values()} == {("done", "restart")}
    # the whole roll's outcome, each node by name
    assert "roll t1 completed: restarted 3 (kafka-0, kafka-1, kafka-2), skipped 0" in done.stderr


def test_a_stalled_recovery_fails_the_roll_with_the_reason_and_no_restart(
    pki: Pki, tmp_path: Path
) -> None:
    plans = {1: NodePlan(recovery_ms=60000, stall_at=0.2)}
    with ProcessCluster(pki, tmp_path, plans=plans) as cluster:
        done = run(roll_command(cluster, pki, tmp_path, "--stall-timeout", "4"))
        assert done.returncode == 1
        assert "kafka-1 is performing log recovery but made no progress for 4s" in done.stderr
        assert [n.restarts for n in cluster.nodes.values()] == [0, 1, 0]
    journal = json.loads((tmp_path / "state" / "roll-t1.json").read_text())
    assert journal["state"] == "failed" and "kafka-1" in journal["reason"]


def test_an_availability_block_defers_the_node_and_rolls_it_once_safe(
    pki: Pki, tmp_path: Path
) -> None:
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with ProcessCluster(pki, tmp_path) as cluster:
        # orders-0 has ISR [0, 1] = min.insync.replicas 2: neither 0 nor 1 may go down
        cluster.kafka.set_isr("orders", 0, [0, 1])
        with started(roll_command(cluster, pki, tmp_path), **pipes) as process:
            wait_until(
                lambda: any(e["action"] == "defer" for e in events(tmp_path)),
                timeout=60,
                what="a deferral",
            )
            # kafka-2 is not in that ISR: it goes first; when it is back it rejoins orders-0's
            # ISR (the replica caught up), and then the others may go
            _, err = process.communicate(timeout=240)
            assert process.returncode == 0, err
    deferred = {e["node"] for e in events(tmp_path) if e["action"] == "defer"}
    assert deferred and deferred <= {"kafka-0", "kafka-1"}
    assert restarts(tmp_path)[0] == "kafka-2"
    assert sorted(restarts(tmp_path)) == ["kafka-0", "kafka-1", "kafka-2"]


def test_a_lagging_voter_blocks_the_other_controllers_until_it_catches_up(
    pki: Pki, tmp_path: Path
) -> None:
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with ProcessCluster(pki, tmp_path) as cluster:
        cluster.kafka.set_voter_lag(2, 10_000)
        with started(roll_command(cluster, pki, tmp_path), **pipes) as process:
            wait_until(
                lambda: restarts(tmp_path)[:1] == ["kafka-2"],
                timeout=60,
                what="the lagging voter rolled first",
            )
            wait_until(
                lambda: any(
                    e["action"] == "defer" and "caught up" in str(e["reason"])
                    for e in events(tmp_path)
                ),
                timeout=60,
                what="a quorum deferral",
            )
            cluster.kafka.set_voter_lag(2, 0)
            _, err = process.communicate(timeout=240)
            assert process.returncode == 0, err


def test_a_roller_killed_mid_roll_resumes_without_restarting_anything_twice(
    pki: Pki, tmp_path: Path
) -> None:
    plans = {1: NodePlan(recovery_ms=6000)}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    with ProcessCluster(pki, tmp_path, plans=plans) as cluster:
        with started(roll_command(cluster, pki, tmp_path), **quiet) as process:
            # kill -9 while kafka-1, just restarted, is recovering
            wait_until(
                lambda: any(e["action"] == "wait-recovery" for e in events(tmp_path)),
                timeout=60,
                what="the recovery wait",
            )
            process.send_signal(signal.SIGKILL)
            process.wait(10)
        assert cluster.nodes[1].restarts == 1
        done = run(roll_command(cluster, pki, tmp_path, "--resume", "t1"))
        assert done.returncode == 0, done.stderr
        assert [n.restarts for n in cluster.nodes.values()] == [1, 1, 1]


def test_sigint_interrupts_with_exit_3_and_a_resumable_journal(pki: Pki, tmp_path: Path) -> None:
    plans = {1: NodePlan(recovery_ms=30000)}
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with (
        ProcessCluster(pki, tmp_path, plans=plans) as cluster,
        started(roll_command(cluster, pki, tmp_path), **pipes) as process,
    ):
        wait_until(
            lambda: any(e["action"] == "wait-recovery" for e in events(tmp_path)),
            timeout=60,
            what="the recovery wait",
        )
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 3, err
        assert "--resume" in err
    journal = json.loads((tmp_path / "state" / "roll-t1.json").read_text())
    assert journal["state"] == "interrupted"
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
    done = run(command, timeout=30)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr

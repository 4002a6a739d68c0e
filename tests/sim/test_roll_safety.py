"""`rollguard roll` on a cluster whose timings follow a real one, as operators run it.

Real broker JVMs with real agents over mutual TLS, the Kafka-protocol peer (brokers start
fenced and rejoin their ISRs over a catch-up time; internal topics; reassignments; a
controller-only voter), restarts through the inventory's commands. Every test watches the
cluster independently of the roller: a thread samples every partition's ISR from the peer and
records any moment a partition went below its min.insync.replicas or offline.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rollguard.peers.cluster import DEFAULT_TOPICS, ProcessCluster
from rollguard.peers.commandline import rollguard_args
from rollguard.peers.harness import InventoryRoll
from rollguard.peers.kafka import TopicSpec

from helpers import Pki


class IsrWatch:
    """Samples every partition of the peer every 100 ms: the independent check."""

    def __init__(self, cluster: ProcessCluster, broker_min_isr: int = 1) -> None:
        self.kafka = cluster.kafka
        self.floor = broker_min_isr
        self.violations: list[str] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def min_isr(self, topic: str) -> int:
        spec = self.kafka.topics()[topic]
        if spec.min_insync_replicas is not None:
            return spec.min_insync_replicas
        return int(spec.configs.get("min.insync.replicas", self.floor))

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for topic, spec in self.kafka.topics().items():
                floor = self.min_isr(topic)
                for index in range(spec.partitions):
                    state = self.kafka.partition_state(topic, index)
                    isr = [r for r in state.isr if r not in state.offline_replicas]
                    if len(state.replicas) > 1 and not isr:
                        self.violations.append(f"{topic}-{index} offline")
                    elif len(state.replicas) > floor and len(isr) < floor:
                        self.violations.append(f"{topic}-{index} ISR {isr} < {floor}")
            self.samples += 1

    def __enter__(self) -> IsrWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.fixture
def cluster(pki: Pki, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ProcessCluster]:
    options = getattr(request, "param", {})
    with ProcessCluster(pki, tmp_path, **options) as made:
        yield made


SAFETY_WAIT = ("--safety-wait", "2m")


@pytest.mark.parametrize("cluster", [{"catch_up": {1: 30.0}}], indirect=True)
def test_a_catch_up_of_30_s_is_waited_for_and_a_second_roller_is_refused(
    cluster: ProcessCluster, target: InventoryRoll
) -> None:
    with IsrWatch(cluster) as watch, target.start(*SAFETY_WAIT) as first:
        first.until_event("catch-up", "kafka-1", timeout=90)
        # One roll per cluster: a second roller, and a resume of the running roll, are refused
        # within seconds, naming the holder, its roll and since when.
        began = time.monotonic()
        second = target.roll(roll_id="t2")
        resumed = target.roll("--resume", "t1")
        assert time.monotonic() - began < 20
        for refused in (second, resumed):
            assert refused.returncode == 1, refused.stderr
            assert "cluster is being rolled by" in refused.stderr
            assert "(roll t1) since" in refused.stderr
        assert "still running this roll" in resumed.stderr
        done = first.wait(240)
        err = done.output
        assert done.returncode == 0, err
    assert watch.samples > 50 and watch.violations == []
    assert [n.restarts for n in cluster.nodes.values()] == [1, 1, 1]
    log = done.events
    order = done.restarted()
    assert order[0] == "kafka-1"
    # Nobody else was restarted while kafka-1 was still rejoining its ISRs: it took its time.
    restarted_at = [i for i, e in enumerate(log) if e["action"] == "restart"]
    ready_1 = next(
        i for i, e in enumerate(log) if e["action"] == "ready" and e["node"] == "kafka-1"
    )
    assert restarted_at[0] < ready_1 < restarted_at[1]
    counts = [int(e["count"]) for e in log if e["action"] == "catch-up" and e["node"] == "kafka-1"]
    assert counts[0] > counts[-1] > 0, "the count of partitions still catching up went down"
    assert "catching up:" in err and "partitions not yet in sync" in err


def test_an_internal_topic_at_min_isr_defers_its_brokers(
    cluster: ProcessCluster, target: InventoryRoll
) -> None:
    kafka = cluster.kafka
    # __transaction_state-0 has min.insync.replicas 2 (Kafka creates it so): at ISR 2 its
    # in-sync brokers wait; the one out of the ISR goes first and brings it back.
    replicas = kafka.partition_state("__transaction_state", 0).replicas
    held, out = list(replicas[:2]), replicas[2]
    kafka.set_isr("__transaction_state", 0, held)
    with IsrWatch(cluster) as watch:
        done = target.roll(*SAFETY_WAIT)
    assert done.returncode == 0, done.stderr
    assert watch.violations == []
    deferred = {e["node"] for e in done.of("defer") if "__transaction_state-0" in str(e["reason"])}
    # Those of its in-sync brokers tried before the one out of the ISR waited; that one went
    # first, and once it was back in the ISR the others were safe.
    assert deferred and deferred <= {f"kafka-{b}" for b in held}
    assert done.restarted()[0] == f"kafka-{out}"
    assert sorted(done.restarted()) == ["kafka-0", "kafka-1", "kafka-2"]


MOVING = {"topics": {**DEFAULT_TOPICS, "moving": TopicSpec(1, 2, 1)}}


@pytest.mark.parametrize("cluster", [MOVING], indirect=True)
def test_a_reassignment_in_flight_holds_every_broker_of_the_partition(
    cluster: ProcessCluster, target: InventoryRoll
) -> None:
    kafka = cluster.kafka
    assert kafka.partition_state("moving", 0).replicas == (0, 1)
    kafka.start_reassignment("moving", 0, [1, 2])  # adds 2 (not in sync until finished)
    state = kafka.partition_state("moving", 0)
    assert state.adding_replicas == (2,) and state.removing_replicas == (0,), state
    with target.start(*SAFETY_WAIT) as running:
        running.until(
            lambda seen: len({e["node"] for e in seen.of("defer")
                              if "moving-0 is being reassigned" in str(e["reason"])}) == 3,
            what="a deferral of each broker for the reassignment",
        )  # fmt: skip
        assert running.events().restarted() == []  # its current and target replicas: all held
        kafka.finish_reassignment("moving", 0)
        done = running.wait(180)
    assert done.returncode == 0, done.stderr
    assert sorted(done.restarted()) == ["kafka-0", "kafka-1", "kafka-2"]


def test_the_safety_budget_spent_without_progress_fails_naming_what_never_became_safe(
    cluster: ProcessCluster, target: InventoryRoll
) -> None:
    cluster.kafka.set_isr("orders", 0, [0, 1])  # broker 2 out until it restarts; it will not
    done = target.roll("--only", "kafka-0,kafka-1", "--safety-wait", "4s")
    assert done.returncode == 1
    assert "no restart became safe: 4s without progress (--safety-wait)" in done.stderr
    assert "orders-0 has ISR [0, 1] = min.insync.replicas 2 with this node" in done.stderr
    assert "waiting on node 2" in done.stderr
    assert [n.restarts for n in cluster.nodes.values()] == [0, 0, 0]
    journal = done.journal
    assert journal is not None and journal["state"] == "failed" and "orders-0" in journal["reason"]


@pytest.mark.parametrize("cluster", [{"controller_only": 1}], indirect=True)
def test_a_controller_only_node_rolls_on_an_inventory(
    cluster: ProcessCluster, target: InventoryRoll
) -> None:
    assert cluster.nodes[3].roles == ["controller"]
    assert cluster.nodes[3].agent.state().status == 503  # no BrokerState: broker-state-missing
    with IsrWatch(cluster) as watch:
        done = target.roll(*SAFETY_WAIT)
    assert done.returncode == 0, done.stderr
    assert watch.violations == []
    assert [n.restarts for n in cluster.nodes.values()] == [1, 1, 1, 1]
    order = done.restarted()
    assert order == ["kafka-1", "kafka-2", "kafka-3", "kafka-0"]  # the active controller last
    ready = done.of("ready")
    assert {e["node"] for e in ready} == {"kafka-0", "kafka-1", "kafka-2", "kafka-3"}


def test_resume_restarts_a_node_whose_recorded_restart_never_happened(
    cluster: ProcessCluster, target: InventoryRoll
) -> None:
    # A roller that recorded its intent for kafka-1 and died before the command ran: the
    # journal says RESTARTING with kafka-1's current identity (its JVM's start time).
    report = cluster.nodes[1].agent.state().json()
    assert isinstance(report, dict) and "brokerStartedAt" in report
    target.state.mkdir()
    (target.state / "roll-t1.json").write_text(
        json.dumps(
            {
                "version": 1,
                "rollId": "t1",
                "startedAt": "2026-11-23T10:00:00.000Z",
                "state": "running",
                "reason": "",
                "nodes": {
                    "kafka-1": {
                        "status": "restarting",
                        "at": "2026-11-23T10:00:01.000Z",
                        "instance": report["brokerStartedAt"],
                        "reason": "restart",
                    }
                },
            }
        )
    )
    done = target.roll(*SAFETY_WAIT, "--resume", "t1")
    assert done.returncode == 0, done.stderr
    assert [n.restarts for n in cluster.nodes.values()] == [1, 1, 1]  # kafka-1 once, not zero
    assert done.of("restart-not-observed", "kafka-1")


def test_a_misfiring_inventory_is_exit_2_naming_the_line(pki: Pki, tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        "nodes:\n"
        "  - id: 0\n"
        "    name: kafka-0\n"
        "    role: [controller]\n"
        "    agent: https://127.0.0.1:8443\n"
        "    restart: 'true'\n"
    )
    command = rollguard_args(
        "roll", inventory=inventory, bootstrap="127.0.0.1:9", tls=pki, state_dir=tmp_path / "state"
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 2
    assert (
        "line 4" in done.stderr
        and "'role'" in done.stderr
        and "did you mean 'roles'" in (done.stderr)
    )
    assert "Traceback" not in done.stderr


def test_plan_honours_json_writes_nothing_and_fails_clearly(
    cluster: ProcessCluster, target: InventoryRoll
) -> None:
    done = target.plan("--output", "json")
    assert done.returncode == 0, done.stderr
    assert [(e["node"], e["action"]) for e in done.entries()] == [
        ("kafka-1", "restart"),
        ("kafka-2", "restart"),
        ("kafka-0", "restart"),
    ]
    assert not target.state.exists()  # no journal, no events, no lease
    unknown = target.plan("--only", "kafka-1,kafka-9")
    assert unknown.returncode == 2 and "--only kafka-9: no such node" in unknown.stderr
    command = target.command("plan")
    bootstrap = command.index("--bootstrap") + 1
    blind = [*command[:bootstrap], "127.0.0.1:9", *command[bootstrap + 1 :]]
    unreachable = target.run([*blind, "--retry-max-retries", "0"])
    assert unreachable.returncode == 1
    assert "the Kafka Admin API cannot be reached" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr
    assert [n.restarts for n in cluster.nodes.values()] == [0, 0, 0]


def test_a_roller_whose_certificate_the_agents_refuse_restarts_nothing(
    cluster: ProcessCluster, target: InventoryRoll, other_pki: Pki
) -> None:
    """A CA rotation gone wrong: every agent refuses the roller's client certificate (a TLS
    alert), which is a configuration error before anything happens, not "unreachable"."""
    command = target.command()
    command[command.index("--cert") + 1] = str(other_pki.client_cert)
    command[command.index("--key") + 1] = str(other_pki.client_key)
    done = target.run(command)
    assert done.returncode == 2, done.stderr
    assert "nothing was restarted" in done.stderr
    for node in ("kafka-0", "kafka-1", "kafka-2"):
        assert f"{node} (" in done.stderr
    assert "refused the roller's client certificate" in done.stderr
    assert [n.restarts for n in cluster.nodes.values()] == [0, 0, 0]
    assert "Traceback" not in done.stderr

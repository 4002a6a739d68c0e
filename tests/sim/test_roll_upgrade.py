"""A roll with a target Kafka version (`--kafka-version`), on the virtual clock: every node
onto the target, the nodes already there left out, a node back on its old version stopping the
roll before the next one, the target kept in the journal for `--resume`.

The simulated cluster follows a real one's timings (recoveries, catch-ups, voters; see
`rollguard.peers.sim`); its agents report the version a node runs once its server has
started, as a real node's app-info MBean does. The real upgrade, 4.0.0 to 4.4.0 on Kafka's own
jars, is in tests/real/test_real_kafka_oldest.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_cli_flags import COMMANDS, DUMMY_TLS, refused, roll_values

from rollguard.peers.harness_sim import SimRoll
from rollguard.peers.sim import SimCluster, VirtualClock, random_cluster
from rollguard.roller.agent_client import AgentReport, AgentUnavailable
from rollguard.roller.model import Node, Role
from rollguard.roller.roll.stores.journal import FileJournalStore, RollRecord, resumed_target
from rollguard.roller.roll.upgrades.finalize import not_ready
from rollguard.shared.errors import ConfigError
from rollguard.shared.states import BrokerState
from rollguard.shared.wire import BrokerStateReport, KafkaBuild

from helpers import run

OLD, NEW = "4.0.0", "4.4.0"
BROKER = Node(0, "kafka-0", frozenset({Role.BROKER}), "https://kafka-0:8443")
CONTROLLER = Node(3, "kafka-3", frozenset({Role.CONTROLLER}), "https://kafka-3:8443")


def ON(state: BrokerState, version: str | None) -> AgentReport:
    build = KafkaBuild(version) if version else None
    return AgentReport("https://kafka-0:8443", BrokerStateReport(state, kafka=build))


def MISSING(version: str) -> AgentUnavailable:
    said = "broker-state-missing"
    return AgentUnavailable("https://kafka-3:8443", 503, said, "no broker", KafkaBuild(version))


def cluster_on(version: str, seed: int = 7, size: int = 5, **kwargs: object) -> SimCluster:
    cluster = random_cluster(random.Random(seed), VirtualClock(), size, **kwargs)  # type: ignore[arg-type]
    for sim in cluster.nodes.values():
        sim.kafka_version = version
    return cluster


@pytest.mark.parametrize("controller_only", [False, True])
def test_every_node_ends_on_the_target_each_restarted_once_and_safely(
    tmp_path: Path, controller_only: bool
) -> None:
    cluster = cluster_on(OLD, controller_only=controller_only)
    done = SimRoll(cluster, tmp_path).roll(kafka_version=NEW)
    assert (done.returncode, done.stderr) == (0, "")
    assert {n.kafka_version for n in cluster.nodes.values()} == {NEW}
    assert sorted(e.name for e in cluster.log) == sorted(cluster.nodes)
    assert cluster.violations.count() == 0, cluster.violations
    assert done.journal is not None and done.journal["kafkaVersion"] == NEW
    (start,) = done.of("roll-start")
    assert start["kafkaVersion"] == NEW
    ready = done.of("ready")
    assert sorted(e["node"] for e in ready) == sorted(cluster.nodes)
    assert {e["kafkaVersion"] for e in ready} == {NEW}


def test_nodes_already_on_the_target_are_left_out_unless_all(tmp_path: Path) -> None:
    cluster = cluster_on(OLD)
    done = ("kafka-1", "kafka-3")
    for name in done:
        cluster.nodes[name].kafka_version = NEW
    rolled = SimRoll(cluster, tmp_path).roll(kafka_version=NEW)
    assert (rolled.returncode, rolled.stderr) == (0, "")
    restarted = [e.name for e in cluster.log]
    assert sorted(restarted) == sorted(set(cluster.nodes) - set(done))
    assert rolled.journal is not None
    nodes = rolled.journal["nodes"]
    assert isinstance(nodes, dict)
    for name in done:
        assert nodes[name]["phase"] == "left-out"
        assert nodes[name]["why"] == f"already runs Kafka {NEW}"
    # --all: every node, those on the target too
    again = cluster_on(NEW, seed=8)
    everything = SimRoll(again).roll(kafka_version=NEW, all_nodes=True)
    assert (everything.returncode, everything.stderr) == (0, "")
    assert sorted(e.name for e in again.log) == sorted(again.nodes)


def test_a_node_back_on_its_old_version_stops_the_roll_before_the_next(tmp_path: Path) -> None:
    cluster = cluster_on(OLD, recovering_at_start=0.0)
    target = SimRoll(cluster, tmp_path)
    entries = target.entries(kafka_version=NEW)
    names = [e.node.name for e in entries if e.action != "skip"]
    broken = names[1]  # the second in the roll's order: one node is restarted before it
    cluster.nodes[broken].install_fails = True
    done = target.roll(kafka_version=NEW)
    assert done.returncode == 1
    assert done.stderr == (
        f"{broken} came back on Kafka {OLD}, not on the target {NEW}: its binaries or image "
        "were not switched; the roll stops before the next node"
    )
    assert [e.name for e in cluster.log] == names[:2]  # nothing restarted after it
    assert cluster.nodes[names[0]].kafka_version == NEW
    assert all(cluster.nodes[n].kafka_version == OLD for n in names[1:])


def test_a_resumed_upgrade_keeps_its_target_and_refuses_another(tmp_path: Path) -> None:
    cluster = cluster_on(OLD, recovering_at_start=0.0)
    first = sorted(cluster.nodes)[0]
    for sim in cluster.nodes.values():
        sim.install_fails = sim.node.name != first  # only the first one's install works
    target = SimRoll(cluster, tmp_path)
    assert target.roll(kafka_version=NEW).returncode == 1
    record = FileJournalStore(tmp_path).load("sim")
    assert record is not None and record.kafka_version == NEW
    # The CLI's --resume without --kafka-version takes the journal's; another one is refused.
    assert resumed_target(record, None) == NEW
    assert resumed_target(record, NEW) == NEW
    with pytest.raises(ConfigError, match=r"an upgrade to Kafka 4\.4\.0; --kafka-version 4\.5\.0"):
        resumed_target(record, "4.5.0")
    # The roller itself refuses to resume it as another roll (nothing restarted).
    restarts = len(cluster.log)
    with pytest.raises(ConfigError, match="resume it without --kafka-version"):
        target.roll(kafka_version="4.5.0", resume=True)
    assert len(cluster.log) == restarts
    # Installs fixed: the resumed roll takes the rest onto the journal's target.
    for sim in cluster.nodes.values():
        sim.install_fails = False
    resumed = target.roll(kafka_version=NEW, resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert {n.kafka_version for n in cluster.nodes.values()} == {NEW}
    assert cluster.violations.count() == 0


def test_a_roll_without_a_target_cannot_be_resumed_as_an_upgrade(tmp_path: Path) -> None:
    record = RollRecord("r1", "2026-11-28T00:00:00.000Z")
    assert resumed_target(record, None) is None
    with pytest.raises(ConfigError, match="a roll without a target version; --kafka-version"):
        resumed_target(record, NEW)


def test_the_plan_shows_each_nodes_version_and_the_target(tmp_path: Path) -> None:
    cluster = cluster_on(OLD, recovering_at_start=0.0)
    cluster.nodes["kafka-2"].kafka_version = NEW
    target = SimRoll(cluster, tmp_path)
    text = target.plan(kafka_version=NEW).stdout.splitlines()
    assert text[1].split()[:4] == ["#", "NODE", "ROLE", "KAFKA"]
    assert any("4.0.0 -> 4.4.0" in line for line in text)
    entries = {e["node"]: e for e in target.plan(kafka_version=NEW, output="json").entries()}
    assert entries["kafka-2"]["action"] == "skip"
    assert entries["kafka-2"]["why"] == f"already runs Kafka {NEW}"
    for name, entry in entries.items():
        assert entry["targetKafkaVersion"] == NEW
        assert entry["kafkaVersion"] == (NEW if name == "kafka-2" else OLD)
        if name != "kafka-2":
            assert entry["why"] == f"runs Kafka {OLD}; the target is {NEW}"
    assert not cluster.log  # a plan restarts nothing


@pytest.mark.parametrize("text", ["4.4.0", "4.1.0-rc2", " 4.4.0 "])
def test_the_target_version_flag_and_its_variable(text: str) -> None:
    assert roll_values("--kafka-version", text)["kafka-version"] == text.strip()
    environ = {"ROLLGUARD_KAFKA_VERSION": text}
    assert roll_values(environ=environ)["kafka-version"] == text.strip()
    assert roll_values()["kafka-version"] is None


@pytest.mark.parametrize("text", ["4.4", "latest", "4.4.0;id", "v4.4.0", ""])
def test_a_target_that_is_not_a_kafka_version_is_refused_before_anything(
    text: str, tmp_path: Path
) -> None:
    refused(
        run([*COMMANDS["roll"], "--kafka-version", text], tmp_path),
        f"--kafka-version: {text!r}: a Kafka version is MAJOR.MINOR.PATCH, such as 4.4.0",
    )


FINALIZE = ["rollguard", "finalize", *DUMMY_TLS, "--bootstrap", "127.0.0.1:1", "--inventory", "i"]


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        ([*FINALIZE], "--kafka-version is required"),
        ([*FINALIZE, "--kafka-version", "3.9.0"], "rollguard knows the feature levels of releases"),
        ([*FINALIZE, "--kafka-version", "4.4.0", "--include-feature", "group.version"],
         "--include-feature: group.version: only kraft.version is left out unless named"),
        (["rollguard", "features", "--bootstrap", "127.0.0.1:1", "--kafka-version", "5.0.0"],
         "Kafka 5.0.0: rollguard knows the feature levels of releases 4.0, 4.1"),
    ],
)  # fmt: skip
def test_finalize_and_features_refuse_bad_input_before_asking_anyone(
    argv: list[str], text: str, tmp_path: Path
) -> None:
    refused(run(argv, tmp_path), text)


def test_features_says_plainly_when_kafka_cannot_be_reached(tmp_path: Path) -> None:
    done = run(["rollguard", "features", "--bootstrap", "127.0.0.1:1"], tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "Kafka Admin API at 127.0.0.1:1" in done.stderr


@pytest.mark.parametrize(
    ("answer", "node", "why"),
    [
        (ON(BrokerState.RUNNING, NEW), BROKER, None),
        (ON(BrokerState.RUNNING, OLD), BROKER, f"kafka-0 runs Kafka {OLD}, not {NEW}"),
        (ON(BrokerState.STARTING, None), BROKER, "kafka-0: STARTING"),
        (ON(BrokerState.RUNNING, None), BROKER, "does not say which Kafka it runs"),
        (MISSING(NEW), CONTROLLER, None),  # a controller-only node, started, on it
        (MISSING(NEW), BROKER, "its agent cannot say (broker-state-missing"),
        (None, BROKER, "no agent to say what it runs"),
    ],
)
def test_finalize_waits_for_every_node_running_the_version(
    answer: AgentReport | AgentUnavailable | None, node: Node, why: str | None
) -> None:
    said = not_ready(node, answer, NEW)
    assert (said is None) is (why is None)
    assert why is None or (said is not None and why in said)

"""Configuration changes on a real Kafka (the newest 4.x): 3 combined KRaft nodes, each with an
agent, one cluster for the module, their files with a sensitive `ssl.truststore.password`
(unused by the PLAINTEXT listeners) and `log.cleaner.threads=2`.

What Kafka says each node runs (DescribeConfigs) against a desired file per node given in the
inventory (`config:`): a read-only key changed is a restart, a dynamic one is live (the broker's
own answer), and a value set for one broker with Kafka's own `kafka-configs` shadows the file's
and is named; `rollguard plan` shows it all, the sensitive value never.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rollguard.peers.realcluster import RealCluster, real_cluster
from rollguard.peers.realkafka import described, kafka_configs
from rollguard.roller.kafka_admin import KafkaObserver
from rollguard.roller.roll.configs.kafka import KafkaConfigs
from rollguard.roller.roll.configs.values import How, Source, running_from_answer
from rollguard.shared.javaprops import parse_properties

from helpers import Pki
from real_kafka import as_operator, watched

SECRET = "truststore-secret-in-the-file"
EXTRA = {"ssl.truststore.password": SECRET, "log.cleaner.threads": "2"}


@pytest.fixture(scope="module")
def cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    folder = tmp_path_factory.mktemp("real-kafka-configs")
    with real_cluster(folder, pki, data_mb=1, combined=3, heap="256m", extra=EXTRA) as real:
        # Kafka's own tooling: num.io.threads=6 for broker 1 only
        kafka_configs(
            real.kafka.lib,
            "--bootstrap-server",
            real.kafka.bootstrap,
            "--entity-type",
            "brokers",
            "--entity-name",
            "1",
            "--alter",
            "--add-config",
            "num.io.threads=6",
        )
        yield real


def configs(cluster: RealCluster) -> KafkaConfigs:
    return KafkaConfigs(KafkaObserver(cluster.kafka.bootstrap))


def test_describe_configs_reads_back_what_the_broker_runs(cluster: RealCluster) -> None:
    reader = configs(cluster)
    try:
        answers = {n: asyncio.run(reader.running(n)) for n in (0, 1)}
    finally:
        reader.close()
    assert SECRET not in json.dumps(answers)  # Kafka never returns a sensitive value
    running = running_from_answer(answers[0])
    node = cluster.kafka.nodes[0]
    assert running["log.dirs"].value == str(node.data_dir)
    assert running["log.dirs"].read_only and running["log.dirs"].source is Source.STATIC
    assert running["node.id"].value == "0" and running["node.id"].read_only
    assert running["log.cleaner.threads"].value == "2"
    assert not running["log.cleaner.threads"].read_only
    secret = running["ssl.truststore.password"]
    assert secret.sensitive and secret.value is None and secret.source is Source.STATIC
    one = running_from_answer(answers[1])["num.io.threads"]
    assert (one.value, one.source) == ("6", Source.DYNAMIC_BROKER)


def desired_files(cluster: RealCluster, folder: Path, **changed: str) -> Path:
    """Each node's file as it runs, with `changed` (dots as `__`), and an inventory naming them."""
    inventory = json.loads(cluster.inventory().read_text())
    for node in inventory["nodes"]:
        running = cluster.kafka.nodes[node["id"]].config_file.read_text()
        values = {p.key: p.value for p in parse_properties(running)}
        values.update({k.replace("__", "."): v for k, v in changed.items()})
        path = folder / f"{node['name']}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        node["config"] = path.name  # relative to the inventory's folder
    path = folder / "inventory.yaml"
    path.write_text(json.dumps(inventory))
    return path


def test_plan_shows_restart_live_and_the_shadowing_override(
    cluster: RealCluster, tmp_path: Path
) -> None:
    inventory = desired_files(
        cluster,
        tmp_path,
        log__dirs="/var/lib/kafka/elsewhere",  # read-only: a restart
        log__cleaner__threads="3",  # dynamic, cluster-wide: live
        num__io__threads="8",  # broker 1 runs 6 set by kafka-configs: shadowed there
    )
    target = as_operator(cluster, tmp_path, inventory=inventory)
    done = target.plan("--output", "json", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert SECRET not in done.stdout + done.stderr
    entries = {e["node"]: e for e in done.entries()}
    for name, entry in entries.items():
        found = {c["key"]: c for c in entry["config"]["changes"]}
        assert found["log.dirs"]["how"] == How.RESTART
        assert "read-only" in found["log.dirs"]["why"]
        assert found["log.cleaner.threads"]["how"] == How.LIVE_CLUSTER
        assert (found["log.cleaner.threads"]["from"], found["log.cleaner.threads"]["to"]) == (
            "2",
            "3",
        )
        secret = found["ssl.truststore.password"]
        assert secret["sensitive"] and not secret["known"] and secret["to"] is None
        io = found.get("num.io.threads")
        if name != "kafka-1":  # the file's 8 is Kafka's default there: nothing changes
            assert io is None, io
            continue
        assert io is not None and (io["from"], io["to"]) == ("6", "8")
        # The roll sets num.io.threads live over broker 1's own value: the file's is then in
        # force, and nothing shadows it after a restart (no advice to delete it).
        assert io["setOver"] == {
            "key": "num.io.threads",
            "source": "DYNAMIC_BROKER_CONFIG",
            "value": "6",
        }
        assert io["shadowedBy"] is None
        assert "is set over live" in io["why"] and "stays in force" not in io["why"]
    text = target.plan(timeout=300)
    assert text.returncode == 0, text.stdout + text.stderr
    assert SECRET not in text.stdout + text.stderr
    assert "kafka-1: 4 keys change: 2 restart, 2 live\n" in text.stdout, text.stdout
    assert "  num.io.threads: 6 -> 8; live-cluster: " in text.stdout
    assert "ssl.truststore.password: (sensitive: not shown), may have changed" in text.stdout


def test_a_per_broker_key_is_live_for_its_broker_only(cluster: RealCluster) -> None:
    reader = configs(cluster)
    try:
        listeners = running_from_answer(asyncio.run(reader.running(0)))["listeners"].value
        said = asyncio.run(reader.live_answers(0, {"listeners": listeners}))
    finally:
        reader.close()
    at_default, at_broker = said["listeners"]
    assert at_default is not None and "broker id must be specified" in at_default
    assert at_broker is None  # validate_only: taken for broker 0, and nothing changed


def test_a_malformed_desired_file_is_exit_2_naming_node_file_and_line(
    cluster: RealCluster, tmp_path: Path
) -> None:
    inventory = desired_files(cluster, tmp_path)
    bad = tmp_path / "kafka-2.properties"
    bad.write_text(bad.read_text() + "broken=\\u12\n")
    lines = len(bad.read_text().splitlines())
    done = as_operator(cluster, tmp_path, inventory=inventory).plan(timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"kafka-2: config {bad}:{lines}: malformed \\uxxxx escape in the value of broken" in (
        done.stderr
    )
    assert "\\u12" not in done.stderr  # never a value's characters: it may be a password
    # Nothing was asked before the files were read: no "asking Kafka" line before the error.
    assert "asking Kafka" not in done.stderr, done.stderr
    assert SECRET not in done.stdout + done.stderr


def test_plan_says_what_the_roll_refuses_as_the_roll_refuses_it(
    cluster: RealCluster, tmp_path: Path
) -> None:
    """A dynamic log.retention.ms of broker 0's (set with Kafka's own kafka-configs) shadows
    log.retention.hours, which only a restart reads: the roll refuses the change (exit 2, nothing
    restarted), and `plan`, the roll's first look, says so for that node instead of `restart`."""
    alter = [
        *("--bootstrap-server", cluster.kafka.bootstrap),
        *("--entity-type", "brokers", "--entity-name", "0", "--alter"),
    ]
    kafka_configs(cluster.kafka.lib, *alter, "--add-config", "log.retention.ms=7200000")
    try:
        inventory = desired_files(cluster, tmp_path, log__retention__hours="48")
        target = as_operator(cluster, tmp_path, "refused", inventory=inventory)
        planned = target.plan("--output", "json", timeout=300)
        assert planned.returncode == 0, planned.stdout + planned.stderr
        entries = {e["node"]: e for e in planned.entries()}
        refused = entries["kafka-0"]
        assert refused["action"] == "fail" and refused["hold"]["kind"] == "fatal", refused
        assert refused["reason"].startswith(
            "kafka-0: log.retention.hours is shadowed by log.retention.ms=7200000 set "
            "dynamically for this broker"
        ), refused["reason"]
        assert "--delete-config log.retention.ms" in refused["reason"]
        assert {entries[n]["action"] for n in ("kafka-1", "kafka-2")} == {"restart"}
        before = [cluster.restarts.of(n) for n in cluster.kafka.nodes]
        done = target.roll(timeout=300)
        assert done.returncode == 2, done.stdout + done.stderr
        assert refused["reason"] in done.stderr, done.stderr  # the plan's words, the roll's
        assert [cluster.restarts.of(n) for n in cluster.kafka.nodes] == before  # none restarted
    finally:
        kafka_configs(cluster.kafka.lib, *alter, "--delete-config", "log.retention.ms")


def kafka_configs_describe(cluster: RealCluster, broker: int) -> dict[str, str]:
    """Kafka's own `kafka-configs --describe --all` of `broker`: key -> value in force."""
    text = kafka_configs(
        cluster.kafka.lib,
        "--bootstrap-server", cluster.kafka.bootstrap,
        "--entity-type", "brokers", "--entity-name", str(broker), "--describe", "--all",
    )  # fmt: skip
    return described(text)


def test_a_roll_applies_live_what_kafka_takes_live_and_restarts_only_for_the_rest(
    cluster: RealCluster, tmp_path: Path
) -> None:
    """Last in the module: it changes the cluster. The desired files change a cluster-wide key
    (log.cleaner.threads 2 -> 3, every broker), a key broker 1 holds a dynamic value of its own
    for (num.io.threads 6 -> 8 there; 8 is the others' default already), and a read-only key on
    kafka-2 only (queued.max.requests 500 -> 600). Kafka's own answers classify them (asserted
    from `plan` first). Judged by the test's own eyes: the control server's restart log and each
    JVM's pid, an ISR sampler and a canary; the values read back with Kafka's `kafka-configs`."""
    inventory = desired_files(cluster, tmp_path, log__cleaner__threads="3", num__io__threads="8")
    two = tmp_path / "kafka-2.properties"
    two.write_text(two.read_text() + "queued.max.requests=600\n")
    # Deployed, as configuration management does before a roll: each node's own server.properties
    # (read at its next start) is its desired file, which the inventory names.
    listed = json.loads(inventory.read_text())
    for node in listed["nodes"]:
        deployed = cluster.kafka.nodes[node["id"]].config_file
        deployed.write_text((tmp_path / node["config"]).read_text())
        node["config"] = str(deployed)
    inventory.write_text(json.dumps(listed))
    target = as_operator(cluster, tmp_path, "configs", inventory=inventory)
    planned = target.plan("--output", "json", timeout=300)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    entries = {e["node"]: e for e in planned.entries()}
    assert {n: e["action"] for n, e in entries.items()} == {
        "kafka-0": "configure",
        "kafka-1": "configure",
        "kafka-2": "restart",
    }, planned.stdout
    # A configured node's reason is its live change, never "restart".
    assert (
        entries["kafka-1"]["reason"].startswith("configuration: ")
        and "live" in (entries["kafka-1"]["reason"])
    ), entries["kafka-1"]
    hows = {c["key"]: c["how"] for c in entries["kafka-2"]["config"]["changes"]}
    assert hows["queued.max.requests"] == How.RESTART  # the broker's own answer: read-only
    assert hows["log.cleaner.threads"] == How.LIVE_CLUSTER
    pids = {n: node.process.pid for n, node in cluster.kafka.nodes.items()}
    restarts = [cluster.restarts.of(n) for n in cluster.kafka.nodes]
    with watched(cluster) as watch:
        done = target.roll(timeout=600)
    print(f"\n{done.stderr}\n{watch.summary()}")
    watch.assert_safe()  # never below min ISR, every canary send acknowledged and read back
    assert done.returncode == 0, done.stdout + done.stderr
    # The test's own record: kafka-2 alone restarted, the others' JVMs the same processes.
    after = [cluster.restarts.of(n) for n in cluster.kafka.nodes]
    assert [a - b for a, b in zip(after, restarts, strict=True)] == [0, 0, 1]
    assert {n: cluster.kafka.nodes[n].process.pid for n in (0, 1)} == {0: pids[0], 1: pids[1]}
    # Kafka's own tooling: every value in force as the files say.
    for broker in (0, 1, 2):
        running = kafka_configs_describe(cluster, broker)
        assert running["log.cleaner.threads"] == "3", (broker, running["log.cleaner.threads"])
        assert running["num.io.threads"] == "8", (broker, running["num.io.threads"])
        expected = "600" if broker == 2 else "500"
        assert running["queued.max.requests"] == expected, broker
    # The roll's record says the same, and never the sensitive value.
    journal = done.journal
    assert journal is not None
    assert {n: (r["phase"], r["how"]) for n, r in journal["nodes"].items()} == {
        "kafka-0": ("done", "live"),
        "kafka-1": ("done", "live"),
        "kafka-2": ("done", "restart"),
    }, journal
    configured = done.of("configure")
    # The cluster-wide key once, at the default, at the first step (whichever node's it is).
    assert [e["cluster"] for e in configured if e["cluster"]] == [["log.cleaner.threads"]]
    assert configured[0]["cluster"] == ["log.cleaner.threads"], configured
    assert {e["node"]: e["keys"] for e in configured}["kafka-1"] == ["num.io.threads"]
    for path in target.state.iterdir():
        assert SECRET not in path.read_text(), path
    assert SECRET not in done.stdout + done.stderr
    print(f"restarts: a plain roll 3, this roll {sum(after) - sum(restarts)}")


def test_roll_all_restarts_every_node_whatever_its_desired_file_says(
    cluster: RealCluster, tmp_path: Path
) -> None:
    """With `config:` files that change only a key Kafka takes live, a roll configures each node
    live without a restart; `--all` restarts every node whatever its file says (as the guide
    says, and as `--only` does), its live keys set first so that no dynamic value of its own
    shadows the file after it. Judged by the control server's restart log, an ISR sampler, a
    canary, and Kafka's own kafka-configs."""
    inventory = desired_files(cluster, tmp_path, log__cleaner__threads="4")
    target = as_operator(cluster, tmp_path, "all", inventory=inventory)
    planned = target.plan("--all", "--output", "json", timeout=300)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    actions = {e["node"]: (e["action"], e["why"]) for e in planned.entries()}
    assert actions == {n: ("restart", "--all") for n in ("kafka-0", "kafka-1", "kafka-2")}, actions
    before = [cluster.restarts.of(n) for n in cluster.kafka.nodes]
    with watched(cluster) as watch:
        done = target.roll("--all", timeout=900)
    print(f"\n{done.stderr}\n{watch.summary()}")
    watch.assert_safe()
    assert done.returncode == 0, done.stdout + done.stderr
    after = [cluster.restarts.of(n) for n in cluster.kafka.nodes]
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1]
    assert "restarted 3 (kafka-0, kafka-1, kafka-2)" in done.stdout, done.stdout
    for broker in (0, 1, 2):
        assert kafka_configs_describe(cluster, broker)["log.cleaner.threads"] == "4", broker
    steps = [
        (e["node"], e["action"]) for e in done.events if e["action"] in ("configure", "restart")
    ]
    # The cluster-wide key live once, at the default, just before the first restart.
    assert [a for _, a in steps] == ["configure", "restart", "restart", "restart"], steps
    assert steps[0][0] == steps[1][0], steps

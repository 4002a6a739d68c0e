"""Every Connect command on a real Kafka Connect: a distributed worker (Kafka Connect 4.3.1 from
Maven Central's jars) on a real one-node KRaft cluster (4.4.0), the file and MirrorMaker 2
connectors on its classpath, a second worker joining and the leader crashing for real rebalances.

The worker's status lags what it does (docs/operations.md, "Kafka Connect"): each wait is
repeated ten times here, so that a judgement taken from the first status read would be caught.
One cluster for the module (the Kafka node and the first worker start in ~12 s)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from test_connect_support import Cli, cli  # noqa: F401

from rollguard.peers.connect import NOT_STOPPED
from rollguard.peers.realconnect import ConnectCluster, rest, single_node_kafka
from rollguard.peers.realkafka import KafkaCluster
from rollguard.roller.connect.autorestart import AutoRestarter, FileStateStore, Metrics
from rollguard.roller.connect.client import ConnectClient
from rollguard.roller.connect.policy import RestartAction, load_overrides
from rollguard.shared.retry import RetryPolicy

from helpers import wait_until

FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SOURCE = "src->dst.MirrorSourceConnector"
CHECKPOINT = "src->dst.MirrorCheckpointConnector"
CYCLES = 10
# Through a rebalance: 409s retried for up to ~40 s, at most 2 s apart.
PATIENT = ["--retry-max-retries", "20", "--retry-max-backoff-ms", "2000"]


class Real:
    """The module's Kafka node and Connect cluster, and what the tests need of them."""

    def __init__(self, kafka: KafkaCluster, connect: ConnectCluster, folder: Path) -> None:
        self.kafka = kafka
        self.connect = connect
        self.folder = folder

    @property
    def url(self) -> str:
        return self.connect.url

    def args(self, *argv: str) -> list[str]:
        return [*argv, "--connect-url", self.url, "--output", "json"]

    def sink(self, name: str, out: Path, *, tasks: int = 2, topic: str = "events") -> None:
        self.connect.create(
            name,
            {
                "connector.class": FILE_SINK,
                "tasks.max": str(tasks),
                "topics": topic,
                "file": str(out / f"{name}.txt"),
            },
        )

    def herder_log(self) -> str:
        return "".join(w.log_text() for w in self.connect.workers)

    def produce(self, topic: str, count: int, prefix: str = "r") -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.kafka.bootstrap, acks="all")
        for i in range(count):
            producer.send(topic, f"{prefix}-{i}".encode(), partition=0)
        producer.flush(30)
        producer.close()

    def end_offset(self, topic: str) -> int:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.kafka.bootstrap)
        try:
            tp = TopicPartition(topic, 0)
            return int(consumer.end_offsets([tp]).get(tp) or 0)
        finally:
            consumer.close()


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Real]:
    folder = tmp_path_factory.mktemp("real-connect")
    kafka = single_node_kafka(folder / "kafka")
    try:
        kafka.create_topics([("events", 2, 1), ("orders", 1, 1)])
        with ConnectCluster(folder / "connect", kafka.bootstrap) as connect:
            yield Real(kafka, connect, folder)
    finally:
        kafka.stop()


def states(real: Real, name: str) -> tuple[str, list[str]]:
    body = real.connect.status(name) or {}
    tasks = sorted(body.get("tasks", []), key=lambda t: t["id"])
    return body.get("connector", {}).get("state", "?"), [t["state"] for t in tasks]


def restarts_logged(real: Real, name: str) -> int:
    return len(re.findall(rf"Task '{re.escape(name)}-\d+' restart successful", real.herder_log()))


def failures_logged(real: Real, task: str) -> int:
    return real.herder_log().count(f"{{id={task}}} Task threw an uncaught")


# ---- restart, stop, resume: ten cycles each -------------------------------------------------


def test_restart_stop_and_resume_wait_for_what_the_worker_shows(
    real: Real,
    cli: Cli,  # noqa: F811
    tmp_path: Path,
) -> None:
    real.sink("rg-cycles", tmp_path)
    real.connect.wait_tasks("rg-cycles", "RUNNING", "RUNNING")
    for cycle in range(CYCLES):
        before = restarts_logged(real, "rg-cycles")
        done = cli(*real.args("connect", "restart", "rg-cycles", "--include-tasks", "--wait"))
        assert done.code == 0, (cycle, done.err)
        # Settled only after the worker really restarted both tasks (its own log says so).
        assert restarts_logged(real, "rg-cycles") == before + 2, cycle
        assert states(real, "rg-cycles") == ("RUNNING", ["RUNNING", "RUNNING"])

        done = cli(*real.args("connect", "stop", "rg-cycles", "--wait"))
        assert done.code == 0, (cycle, done.err)
        assert done.json[-1]["states"]["tasks"] == []
        assert states(real, "rg-cycles") == ("STOPPED", [])

        done = cli(*real.args("connect", "resume", "rg-cycles", "--wait"))
        assert done.code == 0, (cycle, done.err)
        shown = done.json[-1]["states"]
        assert [t["state"] for t in shown["tasks"]] == ["RUNNING", "RUNNING"], cycle
        assert states(real, "rg-cycles") == ("RUNNING", ["RUNNING", "RUNNING"])
    real.connect.delete("rg-cycles")


# ---- a real failure: a file sink writing into a missing folder ------------------------------


def test_a_sink_into_a_missing_folder_fails_at_once_and_restarts_heal_it(
    real: Real,
    cli: Cli,  # noqa: F811
    tmp_path: Path,
) -> None:
    folder = tmp_path / "out"
    real.sink("rg-failing", folder, tasks=1)
    real.connect.wait_tasks("rg-failing", "FAILED", timeout=30)  # at once: no folder
    restart = real.args("connect", "restart", "rg-failing", "--include-tasks")
    # Restarted while the folder is still missing: it fails again, FAILED to FAILED, and the
    # wait says so (when the ~20 ms RESTARTING between is missed, only at the deadline).
    for _ in range(2):
        done = cli(*restart, "--only-failed", "--wait", "--wait-timeout", "10s")
        assert done.code == 1, done.out
        assert "task 0" in done.err and "Couldn't find or create file" in done.err, done.err
    for cycle in range(CYCLES):
        folder.mkdir()
        if cycle % 2:
            done = cli(*real.args("connect", "restart", "--all-failed", "--wait"))
        else:
            done = cli(*restart, "--only-failed", "--wait")
        assert done.code == 0, (cycle, done.err)
        assert states(real, "rg-failing") == ("RUNNING", ["RUNNING"]), cycle
        # The folder goes: a running task does not notice, a restarted one fails at start.
        shutil.rmtree(folder)
        done = cli(*restart, "--wait")
        assert done.code == 1, (cycle, done.out)
        assert "Couldn't find or create file" in done.err, done.err
        assert states(real, "rg-failing") == ("RUNNING", ["FAILED"]), cycle
    real.connect.delete("rg-failing")


def test_the_auto_restart_watcher_heals_a_failed_sink_with_strimzis_backoff(
    real: Real, tmp_path: Path
) -> None:
    missing = tmp_path / "later"
    real.sink("rg-watched", missing, tasks=1)
    real.connect.wait_tasks("rg-watched", "FAILED", timeout=30)
    now = [1_000_000.0]  # the watcher's clock, in seconds

    async def watch() -> list[tuple[float, RestartAction]]:
        seen = []
        async with ConnectClient(real.url, RetryPolicy()) as client:
            watcher = AutoRestarter(
                client,
                FileStateStore(tmp_path / "state.json"),
                load_overrides(None, None),
                connectors=["rg-watched"],
                metrics=Metrics(),
                clock=lambda: now[0],
            )
            # 0, 2, 6 minutes after the first failure: restarted (it fails again each time);
            # in between the backoff holds it.
            for minute in (0, 1, 2, 5, 8):
                now[0] = 1_000_000.0 + minute * 60
                for event in await watcher.check():
                    seen.append((minute, event.action))
                if any(m == minute and a is RestartAction.RESTART for m, a in seen):
                    # until the worker has failed the restarted task again (its log, then its
                    # status: the status alone still shows the old FAILED for a moment)
                    failures = sum(a is RestartAction.RESTART for _, a in seen) + 1
                    await asyncio.to_thread(
                        wait_until,
                        lambda n=failures: failures_logged(real, "rg-watched-0") == n,
                        30,
                        0.02,
                        "the restarted task to fail again",
                    )
                    await asyncio.to_thread(
                        real.connect.wait_tasks, "rg-watched", "FAILED", timeout=30
                    )
            missing.mkdir()
            now[0] = 1_000_000.0 + 20 * 60  # the fourth restart is due at 2+6+12=20 min
            for event in await watcher.check():
                seen.append((20, event.action))
        return seen

    seen = asyncio.run(watch())
    restarts = [minute for minute, action in seen if action is RestartAction.RESTART]
    assert restarts == [0, 2, 8, 20], seen
    assert (1, RestartAction.WAIT) in seen and (5, RestartAction.WAIT) in seen
    real.connect.wait_tasks("rg-watched", "RUNNING", timeout=30)
    real.connect.delete("rg-watched")


# ---- MirrorMaker 2 between two aliases of one cluster ---------------------------------------


MM2_COMMON = {
    "source.cluster.alias": "src",
    "target.cluster.alias": "dst",
    "replication.factor": "1",
    "offset-syncs.topic.replication.factor": "1",
    "checkpoints.topic.replication.factor": "1",
    "sync.topic.acls.enabled": "false",
    "sync.topic.configs.enabled": "false",
    "tasks.max": "1",
}


@pytest.fixture(scope="module")
def mirrored(real: Real) -> Iterator[Real]:
    """150 records in `orders`, mirrored to `src.orders` by a MirrorSourceConnector, a
    consumer group that read 100 of them, and a checkpoint connector for it."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    real.produce("orders", 150)
    consumer = KafkaConsumer(bootstrap_servers=real.kafka.bootstrap, group_id="rg-readers")
    consumer.commit({TopicPartition("orders", 0): OffsetAndMetadata(100, "", -1)})
    consumer.close()
    both = {
        "source.cluster.bootstrap.servers": real.kafka.bootstrap,
        "target.cluster.bootstrap.servers": real.kafka.bootstrap,
    }
    source = {
        "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
        "topics": "orders",
        **MM2_COMMON,
        **both,
    }
    real.connect.create(SOURCE, source)
    checkpoint = {
        "connector.class": "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
        "groups": "rg-readers",
        "emit.checkpoints.interval.seconds": "1",
        "sync.group.offsets.enabled": "false",
        **MM2_COMMON,
        **both,
    }
    real.connect.create(CHECKPOINT, checkpoint)
    wait_until(lambda: real.end_offset("src.orders") == 150, 90, 0.5, "150 records mirrored")
    real.connect.wait_tasks(SOURCE, "RUNNING")
    real.connect.wait_tasks(CHECKPOINT, "RUNNING")
    yield real


def source_offset(real: Real) -> Any:
    _, body = rest(f"{real.url}/connectors/{quote(SOURCE, safe='')}/offsets")
    return {json.dumps(o["partition"], sort_keys=True): o["offset"] for o in body["offsets"]}


def test_mm2_offsets_list_alter_and_reset_on_a_real_worker(
    mirrored: Real,
    cli: Cli,  # noqa: F811
    tmp_path: Path,
) -> None:
    real = mirrored
    key = tmp_path / "src--dst.MirrorSourceConnector.json"
    partition = '{"cluster": "src", "partition": 0, "topic": "orders"}'
    # Offsets appear once flushed (offset.flush.interval.ms, 1 s here): the last record's, 149.
    wait_until(lambda: source_offset(real).get(partition) == {"offset": 149}, 30, 0.2, "149")

    done = cli(*real.args("mm2", "offsets", "list", "--connector", SOURCE, "--to", str(tmp_path)))
    assert done.code == 0, done.err
    listed = json.loads(key.read_text())
    assert listed["offsets"] == [
        {
            "partition": {"cluster": "src", "partition": 0, "topic": "orders"},
            "offset": {"offset": 149},
        }
    ]

    listed["offsets"][0]["offset"]["offset"] = 99
    key.write_text(json.dumps(listed))
    # A running connector: refused by rollguard, nothing sent; the dry run says what would change.
    done = cli(*real.args("mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(key)))
    assert done.code == 1 and "STOPPED" in done.err, done.err
    done = cli(
        *real.args("mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(key)),
        "--dry-run",
    )
    assert done.code == 0, done.err
    assert '{"offset":149} -> {"offset":99}' in done.json[-1]["changes"][0], done.out
    assert states(real, SOURCE)[0] == "RUNNING"

    # --stop --resume: stopped (tasks gone), altered, resumed; the worker re-reads from 100.
    done = cli(
        *real.args("mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(key)),
        "--stop",
        "--resume",
    )
    assert done.code == 0, done.err
    wait_until(lambda: real.end_offset("src.orders") == 200, 60, 0.5, "records 100-149 again")
    wait_until(lambda: source_offset(real).get(partition) == {"offset": 149}, 30, 0.2, "149")

    # The worker's own STOPPED rule, word for word as the peer has it.
    status, refused = rest(
        f"{real.url}/connectors/{quote(SOURCE, safe='')}/offsets", "PATCH", listed
    )
    assert (status, refused["message"]) == (400, NOT_STOPPED.format(name=SOURCE))

    # reset --stop (left STOPPED to check): everything is mirrored again after a resume.
    done = cli(*real.args("mm2", "offsets", "reset", "--connector", SOURCE), "--stop")
    assert done.code == 0, done.err
    assert states(real, SOURCE) == ("STOPPED", [])
    assert source_offset(real) == {}
    # Stopped already: an alter needs no --stop, and leaves it stopped.
    listed["offsets"][0]["offset"]["offset"] = 149
    key.write_text(json.dumps(listed))
    done = cli(*real.args("mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(key)))
    assert done.code == 0, done.err
    assert source_offset(real) == {partition: {"offset": 149}}
    assert states(real, SOURCE) == ("STOPPED", [])
    done = cli(*real.args("mm2", "offsets", "reset", "--connector", SOURCE))
    assert done.code == 0 and source_offset(real) == {}, done.err
    done = cli(*real.args("connect", "resume", SOURCE, "--wait"))
    assert done.code == 0, done.err
    wait_until(lambda: real.end_offset("src.orders") == 350, 60, 0.5, "all 150 again")


def test_mm2_checkpoint_offsets_and_what_the_worker_refuses(
    mirrored: Real,
    cli: Cli,  # noqa: F811
    tmp_path: Path,
) -> None:
    real = mirrored
    done = cli(
        *real.args("mm2", "offsets", "list", "--connector", CHECKPOINT, "--to", str(tmp_path))
    )
    assert done.code == 0, done.err
    # The checkpoint connector's offsets: one per group and partition it checkpointed, named
    # by the mirrored (target) topic, offset 0.
    written = json.loads((tmp_path / "src--dst.MirrorCheckpointConnector.json").read_text())
    assert {"group": "rg-readers", "partition": 0, "topic": "src.orders"} in [
        o["partition"] for o in written["offsets"]
    ], written
    # A checkpoint can be reset (offset 0), not moved: rollguard checks that before sending.
    done = cli(
        *real.args("mm2", "offsets", "reset", "--connector", CHECKPOINT), "--stop", "--resume"
    )
    assert done.code == 0, done.err
    real.connect.wait_tasks(CHECKPOINT, "RUNNING")

    # What only the worker knows: a FileStreamSource's offsets are keyed by "filename".
    source = tmp_path / "in.txt"
    source.write_text("a\nb\n")
    real.connect.create(
        "rg-file-source",
        {"connector.class": FILE_SOURCE, "file": str(source), "topic": "events", "tasks.max": "1"},
    )
    bad = tmp_path / "offsets.json"
    bad.write_text(
        json.dumps({"offsets": [{"partition": {"file": "x"}, "offset": {"position": 1}}]})
    )
    done = cli(
        *real.args("connect", "offsets", "alter", "--connector", "rg-file-source"),
        "--from",
        str(bad),
        "--stop",
    )
    assert done.code == 1, done.out
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and "rg-file-source" in lines[0] and "filename" in lines[0], lines
    # Put back as it was: RUNNING.
    real.connect.wait_tasks("rg-file-source", "RUNNING")
    real.connect.delete("rg-file-source")


# ---- a real rebalance: a second worker joins, then the leader crashes ----------------------


def test_a_rebalance_during_a_restart_and_an_offsets_alter_is_waited_out(
    mirrored: Real,
    cli: Cli,  # noqa: F811
    tmp_path: Path,
) -> None:
    real = mirrored
    real.sink("rg-rebalanced", tmp_path, tasks=2)
    real.connect.wait_tasks("rg-rebalanced", "RUNNING", "RUNNING")
    first = real.connect.workers[0]

    def rebalances() -> int:  # the first worker's group generations so far
        return first.log_text().count("Joined group at generation")

    # A second worker joins: restarts run back to back until the rebalance it causes is over;
    # the cycle that spans it must be waited out like any other.
    joined = threading.Thread(target=real.connect.add_worker)
    start = rebalances()
    joined.start()
    cycles = 0
    while joined.is_alive() or rebalances() == start:
        before = restarts_logged(real, "rg-rebalanced")
        done = cli(
            *real.args("connect", "restart", "rg-rebalanced", "--include-tasks", "--wait"),
            *PATIENT,
        )
        assert done.code == 0, done.err
        assert restarts_logged(real, "rg-rebalanced") >= before + 2
        cycles += 1
        assert cycles < 60, "the second worker never joined"
    real.connect.wait_tasks("rg-rebalanced", "RUNNING", "RUNNING")

    # A worker crashes while an alter --stop --resume runs: the group's leader, so that the
    # stop (which the other worker forwards to the leader: "IO Error trying to forward REST
    # request", HTTP 500) can only go through after the group noticed and chose a new one.
    offsets_file = tmp_path / "src--dst.MirrorSourceConnector.json"
    done = cli(*real.args("mm2", "offsets", "list", "--connector", SOURCE, "--to", str(tmp_path)))
    assert done.code == 0, done.err
    body = json.loads(offsets_file.read_text())
    body["offsets"][0]["offset"]["offset"] = 139
    offsets_file.write_text(json.dumps(body))
    mirrored_before = real.end_offset("src.orders")
    leader = re.findall(r"leader='connect-([\d.]+:\d+)-", first.log_text())[-1]
    leaving = next(w for w in real.connect.workers if w.worker_id == leader and w.running())
    staying = next(w for w in real.connect.workers if w is not leaving and w.running())
    start = staying.log_text().count("Joined group at generation")
    started = time.monotonic()
    left = threading.Thread(target=leaving.kill)
    left.start()
    done = cli(
        "mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(offsets_file),
        "--stop", "--resume", "--connect-url", staying.url, "--output", "json", *PATIENT,
    )  # fmt: skip
    # the group rebalanced while the alter ran
    during = staying.log_text().count("Joined group at generation") > start
    left.join(60)
    assert done.code == 0, (done.err, time.monotonic() - started)
    assert during, "the group rebalanced after the alter, not during it"
    # The alter took: records 140-149 are mirrored again once the connector runs.
    wait_until(
        lambda: real.end_offset("src.orders") == mirrored_before + 10,
        90,
        0.5,
        "records 140-149 mirrored again",
    )
    real.connect.delete("rg-rebalanced")
    shutil.rmtree(tmp_path, ignore_errors=True)

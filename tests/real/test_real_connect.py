"""Every Connect command on a real Kafka Connect: a distributed worker (Kafka Connect 4.3.1 from
Maven Central's jars) on a real one-node KRaft cluster (4.4.0), the file and MirrorMaker 2
connectors on its classpath, a second worker joining and the leader crashing for real rebalances.

The worker's status lags what it does (docs/operations.md, "Kafka Connect"): each wait is
repeated ten times here, so that a judgement taken from the first status read would be caught.
What the worker does asynchronously (a status, an offset flushed or reset, a task restarted,
a rebalance) the test waits for with a deadline, naming what it waits for; and what rollguard
says it did to a restart is checked against the worker's own REST status or its own log, never
taken from rollguard's output alone.
One cluster for the module (the Kafka node and the first worker start in ~12 s)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
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
# How long the worker's own log may take to say what it did (the herder logs a task's restart
# just after starting it, and the new state reaches the status topic after that; under load
# the two can swap).
LOGGED_WITHIN = 15


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


def wait_logged(count: Callable[[], int], wanted: int, what: str) -> None:
    """Until the worker's log counts exactly `wanted` (`count()`): what the worker itself says it
    did, beside what rollguard says."""
    try:
        wait_until(lambda: count() == wanted, LOGGED_WITHIN, 0.2, f"the worker's log: {what}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it counts {count()}, not {wanted}") from None


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
        # Settled: what the worker's own status shows now, and its log says both tasks were
        # really restarted, each once.
        assert states(real, "rg-cycles") == ("RUNNING", ["RUNNING", "RUNNING"])
        wait_logged(
            lambda: restarts_logged(real, "rg-cycles"), before + 2, f"cycle {cycle}: 2 restarts"
        )

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
    wait_logged(lambda: failures_logged(real, "rg-failing-0"), 1, "the task's first failure")
    restart = real.args("connect", "restart", "rg-failing", "--include-tasks")
    failures, restarts = 1, 0
    # Restarted while the folder is still missing: it fails again, FAILED to FAILED, and the
    # wait says so (when the ~20 ms RESTARTING between is missed, only at the deadline). That
    # it was restarted at all, and failed again, only the worker's log can tell.
    for attempt in range(2):
        done = cli(*restart, "--only-failed", "--wait", "--wait-timeout", "10s")
        assert done.code == 1, done.out
        assert "task 0" in done.err and "Couldn't find or create file" in done.err, done.err
        restarts, failures = restarts + 1, failures + 1
        wait_logged(lambda: restarts_logged(real, "rg-failing"), restarts, f"restart {attempt}")
        wait_logged(lambda: failures_logged(real, "rg-failing-0"), failures, "failed again")
    for cycle in range(CYCLES):
        folder.mkdir()
        if cycle % 2:
            done = cli(*real.args("connect", "restart", "--all-failed", "--wait"))
        else:
            done = cli(*restart, "--only-failed", "--wait")
        assert done.code == 0, (cycle, done.err)
        assert states(real, "rg-failing") == ("RUNNING", ["RUNNING"]), cycle
        restarts += 1
        wait_logged(lambda: restarts_logged(real, "rg-failing"), restarts, f"cycle {cycle}")
        assert failures_logged(real, "rg-failing-0") == failures, cycle  # and it did not fail
        # The folder goes: a running task does not notice, a restarted one fails at start.
        shutil.rmtree(folder)
        done = cli(*restart, "--wait")
        assert done.code == 1, (cycle, done.out)
        assert "Couldn't find or create file" in done.err, done.err
        assert states(real, "rg-failing") == ("RUNNING", ["FAILED"]), cycle
        restarts, failures = restarts + 1, failures + 1
        wait_logged(lambda: restarts_logged(real, "rg-failing"), restarts, f"cycle {cycle}")
        wait_logged(lambda: failures_logged(real, "rg-failing-0"), failures, f"cycle {cycle}")
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
    # The worker's own count: four restarts, the first three failed again, the fourth did not.
    wait_logged(lambda: restarts_logged(real, "rg-watched"), 4, "the watcher's 4 restarts")
    assert failures_logged(real, "rg-watched-0") == 4  # the first failure and three again
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


ORDERS_0 = {"cluster": "src", "partition": 0, "topic": "orders"}  # the source's one partition
CHECKPOINTED = {"group": "rg-readers", "partition": 0, "topic": "src.orders"}


def key_of(partition: dict[str, Any]) -> str:
    return json.dumps(partition, sort_keys=True)


def offsets_of(real: Real, name: str) -> dict[str, Any] | None:
    """The worker's own list of `name`'s offsets, partition (`key_of`) -> offset (None: listed
    with offset null); None when the worker does not answer 200."""
    status, body = rest(f"{real.url}/connectors/{quote(name, safe='')}/offsets")
    if status != 200 or not isinstance(body, dict):
        return None
    return {key_of(o["partition"]): o["offset"] for o in body["offsets"]}


def source_offset(real: Real) -> Any:
    """The source's offset for orders-0 as the worker lists it ("none": not listed)."""
    listed = offsets_of(real, SOURCE)
    return None if listed is None else listed.get(key_of(ORDERS_0), "none")


def wait_source_offset(real: Real, offset: int, what: str, timeout: float = 60) -> None:
    """Until the worker lists the source's offset for orders-0 as `offset` (flushed every 1 s)."""
    wanted = {"offset": offset}
    wait_until(lambda: source_offset(real) == wanted, timeout, 0.2, f"{wanted}: {what}")


def wait_reset(real: Real, name: str) -> None:
    """Until the worker lists no offset of `name` at all. Right after a reset a real worker may
    list a partition with offset null (it has no offset: rollguard reads it so) until it has
    read its reset back, then not at all; an offset at any read in between fails at once."""

    def gone() -> bool:
        listed = offsets_of(real, name)
        if listed is None:
            return False
        assert all(v is None for v in listed.values()), (
            f"{name} has offsets after a reset: {listed}"
        )
        return listed == {}

    wait_until(gone, 30, 0.05, f"{name}'s reset partitions to be listed no more")


def test_mm2_offsets_list_alter_and_reset_on_a_real_worker(
    mirrored: Real,
    cli: Cli,  # noqa: F811
    tmp_path: Path,
) -> None:
    real = mirrored
    key = tmp_path / "src--dst.MirrorSourceConnector.json"
    # Offsets appear once flushed (offset.flush.interval.ms, 1 s here): the last record's, 149.
    wait_source_offset(real, 149, "the last mirrored record's offset flushed")

    done = cli(*real.args("mm2", "offsets", "list", "--connector", SOURCE, "--to", str(tmp_path)))
    assert done.code == 0, done.err
    listed = json.loads(key.read_text())
    assert listed["offsets"] == [{"partition": ORDERS_0, "offset": {"offset": 149}}]
    assert (done.json[-1]["withOffset"], done.json[-1]["reset"]) == (1, [])

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
    # Nothing changed, as the worker shows it.
    assert states(real, SOURCE)[0] == "RUNNING" and source_offset(real) == {"offset": 149}

    # --stop --resume: stopped (tasks gone), altered, resumed; the worker re-reads from 100.
    done = cli(
        *real.args("mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(key)),
        "--stop",
        "--resume",
    )
    assert done.code == 0, done.err
    wait_until(lambda: real.end_offset("src.orders") == 200, 60, 0.5, "records 100-149 again")
    wait_source_offset(real, 149, "the re-mirrored records' offsets flushed")

    # The worker's own STOPPED rule, word for word as the peer has it.
    status, refused = rest(
        f"{real.url}/connectors/{quote(SOURCE, safe='')}/offsets", "PATCH", listed
    )
    assert (status, refused["message"]) == (400, NOT_STOPPED.format(name=SOURCE))

    # reset --stop (left STOPPED to check): everything is mirrored again after a resume.
    done = cli(*real.args("mm2", "offsets", "reset", "--connector", SOURCE), "--stop")
    assert done.code == 0, done.err
    assert states(real, SOURCE) == ("STOPPED", [])
    # Listed at once, the reset partition is there with offset null, or no more: no offset
    # either way, and rollguard's list says so (null in the file, named as reset).
    after = tmp_path / "after-reset"
    after.mkdir()
    done = cli(*real.args("mm2", "offsets", "list", "--connector", SOURCE, "--to", str(after)))
    assert done.code == 0, done.err
    written = json.loads((after / key.name).read_text())["offsets"]
    assert written in ([], [{"partition": ORDERS_0, "offset": None}]), written
    assert done.json[-1]["withOffset"] == 0, done.out
    assert done.json[-1]["reset"] == [e["partition"] for e in written], done.out
    wait_reset(real, SOURCE)
    # Stopped already: an alter needs no --stop, and leaves it stopped.
    listed["offsets"][0]["offset"]["offset"] = 149
    key.write_text(json.dumps(listed))
    done = cli(*real.args("mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(key)))
    assert done.code == 0, done.err
    assert states(real, SOURCE) == ("STOPPED", [])
    wait_source_offset(real, 149, "the altered offset listed", timeout=30)
    # A null offset in a file resets that partition, as the worker then shows it.
    reset_file = tmp_path / "reset-orders" / key.name
    reset_file.parent.mkdir()
    reset_file.write_text(json.dumps({"offsets": [{"partition": ORDERS_0, "offset": None}]}))
    done = cli(
        *real.args("mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(reset_file))
    )
    assert done.code == 0, done.err
    assert done.json[-1]["reset"] == [ORDERS_0], done.out
    wait_reset(real, SOURCE)
    # Altered back to 149, then reset as a whole: the worker lists nothing.
    done = cli(*real.args("mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(key)))
    assert done.code == 0, done.err
    wait_source_offset(real, 149, "the altered offset listed", timeout=30)
    done = cli(*real.args("mm2", "offsets", "reset", "--connector", SOURCE))
    assert done.code == 0, done.err
    wait_reset(real, SOURCE)
    assert states(real, SOURCE) == ("STOPPED", [])
    done = cli(*real.args("connect", "resume", SOURCE, "--wait"))
    assert done.code == 0, done.err
    wait_until(lambda: real.end_offset("src.orders") == 350, 60, 0.5, "all 150 again")


def test_mm2_checkpoint_offsets_and_what_the_worker_refuses(
    mirrored: Real,
    cli: Cli,  # noqa: F811
    tmp_path: Path,
) -> None:
    real = mirrored
    # The checkpoint connector's offsets: one per group and partition it checkpointed, named
    # by the mirrored (target) topic, offset 0; there once a checkpoint was emitted (every 1 s,
    # after the source's offset syncs) and flushed (every 1 s).
    wait_until(
        lambda: (offsets_of(real, CHECKPOINT) or {}).get(key_of(CHECKPOINTED)) == {"offset": 0},
        60,
        0.2,
        "the checkpoint of rg-readers on src.orders-0 flushed",
    )
    done = cli(
        *real.args("mm2", "offsets", "list", "--connector", CHECKPOINT, "--to", str(tmp_path))
    )
    assert done.code == 0, done.err
    written = json.loads((tmp_path / "src--dst.MirrorCheckpointConnector.json").read_text())
    assert {"partition": CHECKPOINTED, "offset": {"offset": 0}} in written["offsets"], written
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
    real.connect.wait_tasks("rg-file-source", "RUNNING")  # what it is to be put back to
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

    def generations() -> int:  # the group generations the first worker joined so far
        return first.log_text().count("Joined group at generation")

    # A second worker joins: restarts run back to back until the rebalance it causes is over
    # (the worker answering /health is not that: its join takes two rebalances); each cycle,
    # the one that spans a rebalance too, must be waited out like any other.
    deadline = time.monotonic() + 180
    spanned = cycles = 0
    with ThreadPoolExecutor(1) as pool:
        joining = pool.submit(real.connect.add_worker)
        while not joining.done() or real.connect.rebalanced() is None:
            before, generation = restarts_logged(real, "rg-rebalanced"), generations()
            done = cli(
                *real.args("connect", "restart", "rg-rebalanced", "--include-tasks", "--wait"),
                *PATIENT,
            )
            assert done.code == 0, done.err
            spanned += generations() > generation
            # Both tasks restarted, as the workers' own logs say (restarts that 409 while the
            # group rebalances are retried, so none falls between two generations).
            wait_until(
                lambda before=before: restarts_logged(real, "rg-rebalanced") >= before + 2,
                LOGGED_WITHIN,
                0.05,
                f"the workers' logs: restart {cycles}'s 2 task restarts",
            )
            cycles += 1
            assert time.monotonic() < deadline, f"the join is not over after {cycles} restarts"
        second = joining.result()  # the worker's own failure to start, if it failed
    assert second.running() and spanned, (cycles, spanned)
    group = real.connect.wait_rebalanced()
    real.connect.wait_tasks("rg-rebalanced", "RUNNING", "RUNNING")

    # What the alter below needs: the source RUNNING (the join may have moved it) and its
    # offset for the last record of orders flushed, so everything is mirrored and committed.
    real.connect.wait_tasks(SOURCE, "RUNNING")
    last = real.end_offset("orders") - 1
    wait_source_offset(real, last, "the mirror source caught up and its offset flushed")

    # A worker crashes while an alter --stop --resume runs: the group's leader, so that the
    # stop (which the other worker forwards to the leader: "IO Error trying to forward REST
    # request", HTTP 500) can only go through after the group noticed and chose a new one.
    offsets_file = tmp_path / "src--dst.MirrorSourceConnector.json"
    done = cli(*real.args("mm2", "offsets", "list", "--connector", SOURCE, "--to", str(tmp_path)))
    assert done.code == 0, done.err
    body = json.loads(offsets_file.read_text())
    assert body["offsets"] == [{"partition": ORDERS_0, "offset": {"offset": last}}], body
    body["offsets"][0]["offset"]["offset"] = last - 10
    offsets_file.write_text(json.dumps(body))
    mirrored_before = real.end_offset("src.orders")
    leaving = group.leader
    staying = next(w for w in real.connect.workers if w is not leaving and w.running())
    start = staying.log_text().count("Joined group at generation")
    started = time.monotonic()
    left = threading.Thread(target=leaving.kill)
    left.start()
    done = cli(
        "mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(offsets_file),
        "--stop", "--resume", "--connect-url", staying.url, "--output", "json", *PATIENT,
    )  # fmt: skip
    # the group rebalanced while the alter ran (the staying worker's own log)
    during = staying.log_text().count("Joined group at generation") > start
    left.join(60)
    assert done.code == 0, (done.err, time.monotonic() - started)
    assert during, "the group rebalanced after the alter, not during it"
    # The alter took, as the worker and the data show it: the group settles in a generation
    # after the crash, the source RUNNING, and the last 10 records mirrored again.
    assert real.connect.wait_rebalanced().number > group.number
    real.connect.wait_tasks(SOURCE, "RUNNING")
    wait_until(
        lambda: real.end_offset("src.orders") == mirrored_before + 10,
        90,
        0.5,
        f"records {last - 9}-{last} mirrored again",
    )
    wait_source_offset(real, last, "the re-mirrored records' offsets flushed")
    real.connect.delete("rg-rebalanced")
    shutil.rmtree(tmp_path, ignore_errors=True)

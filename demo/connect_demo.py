"""`make demo-connect`: every Connect and MirrorMaker 2 workflow on a real Kafka Connect.

Real processes throughout: a one-node Apache Kafka 4.4.0 (KRaft), a distributed Kafka Connect
4.3.1 worker from Maven Central's jars (`make kafka`), and the `rollguard` command as a user runs
it. A file sink writing into a folder that does not exist fails at once; rollguard restarts it
(and says that it failed again), the folder appears, the restart heals it; stop and resume wait
for what the worker shows; a MirrorMaker 2 source connector (two aliases of the one cluster)
has its offsets listed, dry-run, altered with `--stop --resume` and re-mirrors from there.

The console output in docs/operations.md ("Kafka Connect") is this script's.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from rollguard.peers.processes import BIN, wait_until
from rollguard.peers.realconnect import ConnectCluster, rest, single_node_kafka

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "demo-connect"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
SOURCE = "src->dst.MirrorSourceConnector"


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def run(*argv: str, url: str) -> int:
    shown = ["rollguard", *argv, "--connect-url", url]
    print("$ " + " ".join(shlex.quote(a) for a in shown), flush=True)
    done = subprocess.run(
        [str(BIN / "rollguard"), *argv, "--connect-url", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    print(done.stdout, end="", flush=True)
    if done.returncode:
        print(f"(exit {done.returncode})", flush=True)
    return done.returncode


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        return int(consumer.end_offsets([tp]).get(tp) or 0)
    finally:
        consumer.close()


def offsets_flushed(url: str) -> bool:
    _, body = rest(f"{url}/connectors/{quote(SOURCE, safe='')}/offsets")
    return isinstance(body, dict) and bool(body.get("offsets"))


def main() -> int:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    say("a one-node Kafka 4.4.0 and a Kafka Connect 4.3.1 worker")
    started = time.monotonic()
    kafka = single_node_kafka(WORK / "kafka")
    try:
        kafka.create_topics([("events", 2, 1), ("orders", 1, 1)])
        with ConnectCluster(WORK / "connect", kafka.bootstrap) as connect:
            url = connect.url
            print(
                f"up in {time.monotonic() - started:.1f}s: Kafka {kafka.bootstrap}, Connect {url}"
            )
            out = WORK / "out"
            connect.create(
                "orders-sink",
                {"connector.class": SINK, "topics": "events", "tasks.max": "2",
                 "file": str(out / "orders.txt")},
            )  # fmt: skip
            connect.wait_tasks("orders-sink", "FAILED", "FAILED", timeout=60)

            say("a file sink writing into a folder that does not exist: FAILED at once")
            run("connect", "status", url=url)
            say("restarted while the folder is still missing: it fails again, and --wait says so")
            run("connect", "restart", "orders-sink", "--include-tasks", "--only-failed",
                "--wait", "--wait-timeout", "20s", url=url)  # fmt: skip
            say("the auto-restart watcher, one pass: restart 1, then Strimzi's 2-minute backoff")
            run("connect", "auto-restart", "--once", "--state-file",
                str(WORK / "auto-restart.json"), url=url)  # fmt: skip
            connect.wait_tasks("orders-sink", "FAILED", "FAILED", timeout=60)
            run("connect", "auto-restart", "--once", "--state-file",
                str(WORK / "auto-restart.json"), url=url)  # fmt: skip
            out.mkdir()
            say(f"{out} exists now: the restart heals it")
            run("connect", "restart", "--all-failed", "--wait", url=url)
            say("a restart of running tasks waits until the worker has really restarted them")
            run("connect", "restart", "orders-sink", "--include-tasks", "--wait", url=url)
            say("stop waits until no task is listed; resume until every task is RUNNING")
            run("connect", "stop", "orders-sink", "--wait", url=url)
            run("connect", "resume", "orders-sink", "--wait", url=url)

            say("MirrorMaker 2: 150 records in orders, mirrored to src.orders")
            producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all")
            for i in range(150):
                producer.send("orders", f"order-{i}".encode(), partition=0)
            producer.flush(30)
            producer.close()
            connect.create(
                SOURCE,
                {
                    "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
                    "source.cluster.alias": "src",
                    "target.cluster.alias": "dst",
                    "source.cluster.bootstrap.servers": kafka.bootstrap,
                    "target.cluster.bootstrap.servers": kafka.bootstrap,
                    "topics": "orders",
                    "tasks.max": "1",
                    "replication.factor": "1",
                    "offset-syncs.topic.replication.factor": "1",
                    "sync.topic.acls.enabled": "false",
                    "sync.topic.configs.enabled": "false",
                },
            )
            wait_until(lambda: end_offset(kafka.bootstrap, "src.orders") == 150, 90, 0.5,
                       "150 records mirrored")  # fmt: skip
            offsets = WORK / "offsets"
            offsets.mkdir()
            key = offsets / "src--dst.MirrorSourceConnector.json"
            wait_until(lambda: offsets_flushed(url), 30, 0.5, "the offsets flushed (1 s here)")
            run("mm2", "offsets", "list", "--connector", SOURCE, "--to", str(offsets), url=url)
            print(key.read_text(), end="")
            body = json.loads(key.read_text())
            body["offsets"][0]["offset"]["offset"] = 99
            key.write_text(json.dumps(body, indent=2) + "\n")
            say("offset 99 written into the file: a dry run, then the alter refused while RUNNING")
            run("mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(offsets),
                "--dry-run", url=url)  # fmt: skip
            run("mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(offsets), url=url)
            say("--stop --resume: stopped, altered, resumed; records 100-149 mirrored again")
            run("mm2", "offsets", "alter", "--connector", SOURCE, "--from", str(offsets),
                "--stop", "--resume", url=url)  # fmt: skip
            wait_until(lambda: end_offset(kafka.bootstrap, "src.orders") == 200, 60, 0.5,
                       "50 records mirrored again")  # fmt: skip
            print(f"src.orders now holds {end_offset(kafka.bootstrap, 'src.orders')} records")
    finally:
        kafka.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

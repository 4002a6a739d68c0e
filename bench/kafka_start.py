"""What a real Kafka node costs to start, with and without the class-data archive the tests use
(rollguard.peers.jvmcds), and what `rollguard` costs to start.

    .venv/bin/python bench/kafka_start.py [--runs 5]

Side by side, interleaved: one single-node KRaft cluster from the newest Kafka jars, started
with no archive and with the archive the tests map; the CPU the JVM used until it logged
"started" (utime + stime from /proc), and the wall time. Then `rollguard --version` and
`rollguard-agent --version`: the whole process's CPU (every test that runs the CLI pays it).
Medians of `--runs`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rollguard.peers import jvmcds, realkafka
from rollguard.peers.realkafka import KafkaCluster

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"


def jvm_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_once(shared: bool) -> tuple[float, float]:
    original = realkafka.with_class_archive
    if not shared:
        realkafka.with_class_archive = lambda command, lib: (command, None)  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as folder:
            cluster = KafkaCluster(Path(folder), combined=1, min_insync_replicas=1)
            cluster.format()
            began = time.monotonic()
            cluster.start()
            took = time.monotonic() - began
            node = cluster.nodes[0]
            assert node.pid is not None
            cpu = jvm_cpu(node.pid)
            node.stop()
            return cpu, took
    finally:
        realkafka.with_class_archive = original  # type: ignore[assignment]


def process_cpu(command: list[str]) -> float:
    before = os.times()
    subprocess.run(command, check=True, capture_output=True)
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    start_once(True)  # makes the archive if there is none yet (written when the node stops)
    lib = realkafka.kafka_lib()
    if not jvmcds.archive_for("java", lib).exists():
        print("no class-data archive was written; is the JDK 13 or newer?", file=sys.stderr)
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(args.runs):
        for shared in (False, True):
            results[shared].append(start_once(shared))
    for shared, runs in results.items():
        cpu = statistics.median(r[0] for r in runs)
        wall = statistics.median(r[1] for r in runs)
        what = "with the archive   " if shared else "without an archive"
        print(
            f"kafka node {what}: {cpu:.2f} s CPU to started, {wall:.2f} s wall "
            f"(median of {len(runs)})"
        )
    for name in ("rollguard", "rollguard-agent"):
        cpu = statistics.median(
            process_cpu([str(BIN / name), "--version"]) for _ in range(args.runs)
        )
        print(f"{name} --version: {cpu:.2f} s CPU (median of {args.runs})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

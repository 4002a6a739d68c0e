"""`make demo`: roll a real 3-node Kafka cluster; one broker comes back into a real log recovery.

Real processes throughout: Apache Kafka 4.4.0 from Maven Central's jars (three combined KRaft
nodes, topics with replication 3 and min ISR 2, 150 MB of data), a `rollguard-agent` beside each
node over mutual TLS reading its JMX, and `rollguard roll` at its defaults driving restarts
through an inventory file, as on VMs (`systemctl restart kafka` is played by a small control
server: a controlled shutdown, then a start). kafka-1 comes back from its restart into a full log
recovery (its clean-shutdown marker and recovery checkpoint deleted, the JVM held to 10 % of a
core while it loads its logs: ~25 s): the roller waits, showing progress and ETA, instead of
restarting it, and finishes the roll when every node is RUNNING and back in its ISRs.

Then `rollguard collect` pulls every agent's recovery timeline (each agent's data dir was
seeded with six simulated days of history first, so the report has a fleet's worth of
recoveries; the last recovery of kafka-1 is this roll's, for real) and the roll's events, and
`rollguard-report` runs the Spark job in local mode and writes report.html.
"""

from __future__ import annotations

import random
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rollguard.peers.commandline import rollguard_args
from rollguard.peers.processes import BIN, make_pki
from rollguard.peers.realcluster import real_cluster

from history import seed  # demo/history.py: the script's own folder is on sys.path

ROOT = Path(__file__).resolve().parent.parent

WORK = ROOT / "build" / "demo-roll"


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def main() -> int:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    started = time.monotonic()
    pki = make_pki(WORK / "pki")
    rng = random.Random(2026)  # noqa: S311 (simulated history, not secrets)
    now_ms = int(time.time() * 1000)
    seeded = sum(
        seed(WORK / "agent-data" / f"kafka-{n}", f"kafka-{n}", days=6, end_ms=now_ms, rng=rng)
        for n in range(3)
    )
    say("1. A real Kafka 4.4.0 cluster: 3 KRaft nodes, 150 MB of data, an agent beside each")
    with real_cluster(WORK, pki, data_mb=150, combined=3, name="demo") as cluster:
        cluster.recover_on_next_restart(1)
        inventory = cluster.inventory()
        print(f"inventory: {inventory}\nKafka bootstrap: {cluster.kafka.bootstrap}")
        tls = [
            *pki.client_flags(),
        ]

        def on_cluster(command: str, roll_id: str | None = None) -> list[str]:
            return rollguard_args(
                command,
                inventory=inventory,
                bootstrap=cluster.bootstrap,
                tls=tls,
                state_dir=WORK / "state" if command == "roll" else None,  # a plan writes nothing
                roll_id=roll_id,
            )

        say("2. rollguard state: every agent reports RUNNING")
        urls = [agent.api for agent in cluster.agents.values()]
        subprocess.run([str(BIN / "rollguard"), "state", *tls, *urls], check=False)

        say("3. rollguard plan: what a roll would do now")
        subprocess.run(on_cluster("plan"), check=False)

        say("4. rollguard roll: kafka-1 will come back into a real log recovery")
        command = on_cluster("roll", roll_id="demo")
        print("$ " + shlex.join(command), flush=True)
        done = subprocess.run(command, check=False)
        restarts = {cluster.node_name(n): cluster.restarts_of(n) for n in cluster.node_ids()}
        say(
            f"restarts per node: {restarts} (each exactly once; kafka-1 never restarted "
            "while recovering)"
        )
        print(f"event log: {WORK / 'state' / 'events-demo.jsonl'}")

        say(f"5. rollguard collect: every agent's timeline ({seeded} seeded records + this roll)")
        dataset = WORK / "dataset"
        collect = [
            str(BIN / "rollguard"),
            "collect",
            "--inventory",
            str(inventory),
            *tls,
            "--out",
            str(dataset),
            "--cluster",
            "demo",
            "--events",
            str(WORK / "state"),
        ]
        print("$ " + shlex.join(collect), flush=True)
        collected = subprocess.run(collect, check=False)
    say("6. rollguard-report: the Spark job (local mode) turns the dataset into a report")
    report = [
        str(BIN / "rollguard-report"),
        "--dataset",
        str(dataset),
        "--out",
        str(WORK / "report"),
    ]
    print("$ " + shlex.join(report), flush=True)
    reported = subprocess.run(report, check=False)
    codes = (done.returncode, collected.returncode, reported.returncode)
    say(f"done in {time.monotonic() - started:.0f}s (exit codes: roll, collect, report {codes})")
    if reported.returncode == 0:
        print(f"open {WORK / 'report' / 'report.html'}")
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())

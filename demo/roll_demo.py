"""`make demo`: roll a simulated 3-broker cluster; one broker comes back into a long log recovery.

Real processes throughout: three Java test brokers (Kafka's MBeans over JMX), three
`rollguard-agent`s over mutual TLS, the Kafka-protocol peer (metadata, ISRs, KRaft quorum
following the brokers), and `rollguard roll` driving restarts through an inventory file, as on
VMs. kafka-1 comes back from its restart into ~25 s of log recovery: the roller waits, showing
progress and ETA, instead of restarting it, and finishes the roll when it is RUNNING.

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

from rollguard.peers.cluster import NodePlan, ProcessCluster
from rollguard.peers.processes import BIN, make_pki

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
    say("1. A simulated cluster: 3 broker JVMs with agents (mTLS), and the Kafka-protocol peer")
    with ProcessCluster(pki, WORK, size=3, plans={1: NodePlan(recovery_ms=25000)}) as cluster:
        inventory = cluster.inventory()
        print(f"inventory: {inventory}\nKafka bootstrap: {cluster.kafka.bootstrap}")
        tls = [
            *pki.client_flags(),
        ]
        common = [
            "--inventory",
            str(inventory),
            "--bootstrap",
            cluster.kafka.bootstrap,
            *tls,
            "--state-dir",
            str(WORK / "state"),
            "--poll-interval",
            "1",
            "--operation-timeout",
            "8s",
        ]

        say("2. rollguard state: every agent reports RUNNING")
        urls = [node.agent.api for node in cluster.nodes.values()]
        subprocess.run([str(BIN / "rollguard"), "state", *tls, *urls], check=False)

        say("3. rollguard plan: what a roll would do now")
        subprocess.run([str(BIN / "rollguard"), "plan", *common], check=False)

        say("4. rollguard roll: kafka-1 will come back into a 25 s log recovery")
        command = [str(BIN / "rollguard"), "roll", *common, "--roll-id", "demo"]
        print("$ " + shlex.join(command), flush=True)
        done = subprocess.run(command, check=False)
        restarts = {f"kafka-{n.node_id}": n.restarts for n in cluster.nodes.values()}
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

"""What a roll costs clients, healthy and degraded, with the roll's own canary and its gate: a
real Apache Kafka, `rollguard roll --canary rollguard-canary --canary-max-p99 250ms`, side by
side.

    .venv/bin/python bench/canary_roll.py [--rounds 3] [--degraded 20] [--json PATH]

One real KRaft cluster (3 combined nodes, `rollguard.peers.realcluster`: topics orders, bulk
and canary, replication 3, min ISR 2, 1 MB in bulk, an agent beside each node). Each round
rolls it twice, in alternating order:
- healthy: the roll alone;
- degraded: once the roll's first restart is in the control server's log, the cluster throttles
  every client (Kafka's own kafka-configs: a default client quota, producer_byte_rate=256 bytes a
  second per broker) for `--degraded` seconds, then lifts it.

Watched by the bench's own canary (acks=all, idempotent, a send every 100 ms, and a consumer;
another client id than the roll's, under the same default quota) and an ISR sampler, never by
the product: failed sends, p99 and max send latency, the consumer's longest gap, samples below
min ISR, restarts and restarts made while the cluster was throttled (the control server's own
log), the roll's wall time. Beside them, the roll's own word: how long its canary's gate held
(`gate-closed` to `gate-open`), and its canary's baseline p99 and worst p99 of a restart.
Medians over the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rollguard.peers.commandline import rollguard_args
from rollguard.peers.processes import make_pki
from rollguard.peers.realclients import Canary, IsrSampler
from rollguard.peers.realcluster import RealCluster, real_cluster
from rollguard.peers.realkafka import kafka_configs
from rollguard.shared.wire import parse_time

THROTTLE = "producer_byte_rate=256"
FLAGS = ("--canary", "rollguard-canary", "--canary-max-p99", "250ms", "--canary-baseline", "5s")


def quota(cluster: RealCluster, *change: str) -> None:
    """Kafka's own `kafka-configs` on the default client quota (every client id)."""
    kafka_configs(
        cluster.kafka.lib,
        "--bootstrap-server",
        cluster.kafka.bootstrap.split(",")[0],
        "--entity-type",
        "clients",
        "--entity-default",
        "--alter",
        *change,
    )


def degrade(cluster: RealCluster, before: int, seconds: float, spans: list[float]) -> None:
    """After the roll's first restart, the throttle for `seconds`: its start and end in
    `spans` (monotonic)."""
    deadline = time.monotonic() + 300
    while len(cluster.restarts.log) <= before:
        if time.monotonic() > deadline:
            return
        time.sleep(0.1)  # polling the control server's log
    quota(cluster, "--add-config", THROTTLE)
    spans.append(time.monotonic())
    time.sleep(seconds)  # the degradation's length: what the bench measures against
    try:
        quota(cluster, "--delete-config", THROTTLE.split("=")[0])
    finally:
        spans.append(time.monotonic())


def said(folder: Path, roll_id: str) -> dict[str, Any]:
    """The roll's own word: how long its canary's gate held, its canary's figures."""
    path = folder / "state" / f"events-{roll_id}.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    held, closed = 0.0, None
    for e in events:
        if e["action"] == "gate-closed" and e.get("gate") == "canary" and closed is None:
            closed = parse_time(e["ts"]).timestamp()
        elif e["action"] == "gate-open" and closed is not None:
            held, closed = held + parse_time(e["ts"]).timestamp() - closed, None
    baseline = [e for e in events if e["action"] == "canary-baseline"]
    costs = [e["p99Ms"] for e in events if e["action"] == "canary-cost" and e["p99Ms"]]
    return {
        "gateHeldSeconds": round(held, 1),
        "rollCanaryBaselineP99Ms": baseline[0]["p99Ms"] if baseline else None,
        "rollCanaryWorstRestartP99Ms": max(costs, default=None),
    }


def one_roll(cluster: RealCluster, folder: Path, roll_id: str, degraded: float) -> dict[str, Any]:
    command = rollguard_args(
        "roll",
        inventory=cluster.inventory(),
        bootstrap=cluster.kafka.bootstrap,
        tls=cluster.pki,
        state_dir=folder / "state",
        roll_id=roll_id,
        extra=FLAGS,
    )
    before = len(cluster.restarts.log)
    spans: list[float] = []
    began = time.monotonic()
    with (
        IsrSampler(cluster.kafka.bootstrap, {"*": 2}) as isr,
        Canary(cluster.kafka.bootstrap, "canary") as canary,
    ):
        worker = None
        if degraded:
            worker = threading.Thread(target=degrade, args=(cluster, before, degraded, spans))
            worker.start()
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        took = time.monotonic() - began
        if worker is not None:
            worker.join()
    restarts = [r.at for r in cluster.restarts.log[before:]]
    throttled = [at for at in restarts if len(spans) == 2 and spans[0] <= at <= spans[1]]
    return {
        "returncode": done.returncode,
        "lastLine": done.stderr.strip().splitlines()[-1:],
        "restarts": len(restarts),
        "restartsWhileThrottled": len(throttled),
        "throttledSeconds": round(spans[1] - spans[0], 1) if len(spans) == 2 else 0.0,
        "rollSeconds": round(took, 1),
        "samplesBelowMinIsr": len({low.at for low in isr.lows}),
        **canary.report().row(),
        **said(folder, roll_id),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--degraded", type=float, default=20.0, help="seconds of throttle")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {"healthy": [], "degraded": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pki = make_pki(folder / "pki")
        with real_cluster(folder, pki, data_mb=1, combined=3, heap="256m") as cluster:
            for round_ in range(args.rounds):
                order = ("healthy", "degraded") if round_ % 2 == 0 else ("degraded", "healthy")
                for kind in order:
                    seconds = args.degraded if kind == "degraded" else 0.0
                    row = one_roll(cluster, folder, f"{kind}-{round_}", seconds)
                    rows[kind].append(row)
                    print(kind, round_, json.dumps(row), flush=True)
    keys = (
        "rollSeconds",
        "gateHeldSeconds",
        "restartsWhileThrottled",
        "failed",
        "p99SendMs",
        "maxSendMs",
        "longestConsumerGapS",
        "samplesBelowMinIsr",
        "rollCanaryBaselineP99Ms",
        "rollCanaryWorstRestartP99Ms",
    )
    summary = {
        kind: {key: statistics.median(r[key] for r in found if r[key] is not None) for key in keys}
        for kind, found in rows.items()
    }
    print(json.dumps(summary, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "medians": summary}, indent=2))
    return 0 if all(r["returncode"] == 0 for found in rows.values() for r in found) else 1


if __name__ == "__main__":
    sys.exit(main())

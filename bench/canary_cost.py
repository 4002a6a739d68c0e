"""What the roll's canary costs by itself (`rollguard roll --canary TOPIC`): its own CPU, the
messages a second it sends and reads, and the brokers' CPU with and without it, on a real
Apache Kafka, side by side.

    .venv/bin/python bench/canary_cost.py [--rounds 3] [--seconds 30] [--json PATH]

One real KRaft cluster (3 combined nodes, `rollguard.peers.realcluster`, idle: no other
client). Each round measures, in alternating order, `--seconds` of:
- idle: nothing but the cluster;
- canary: the roll's canary as the roll runs it (`rollguard.roller.roll.canary.client.Canary`, its
  defaults: a send every 100 ms, acks=all, idempotent, and its consumer), in a process of its
  own that reports its CPU time (every thread's) over the measured stretch, after its warm-up.
The brokers' CPU is their JVMs' user + system time over the same stretch (/proc/PID/stat), from
when the canary says its stretch begins to when it says it ended.
Medians over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rollguard.peers.processes import make_pki
from rollguard.peers.realcluster import RealCluster, real_cluster

# The canary in a process of its own: warm, then `seconds` measured, as JSON on stdout.
CHILD = """
import json, sys, time
from rollguard.roller.kafka_admin import KafkaObserver
from rollguard.roller.roll.canary.client import Canary

bootstrap, seconds = sys.argv[1], float(sys.argv[2])
observer = KafkaObserver(bootstrap)
canary = Canary(observer, "rollguard-canary")
canary.prepare()
canary.start()
canary.warm.wait(30)
time.sleep(2)  # past the first sends' metadata and connections
samples, arrivals, _ = canary.samples()
cpu, wall, sent, read = time.process_time(), time.monotonic(), len(samples), len(arrivals)
print("measuring", flush=True)
time.sleep(seconds)  # the measured stretch
samples, arrivals, _ = canary.samples()
cpu, wall = time.process_time() - cpu, time.monotonic() - wall
acked = sum(1 for s in samples[sent:] if s.latency is not None)
print(json.dumps({"cpu": cpu, "wall": wall, "sent": len(samples) - sent, "acked": acked,
                  "read": len(arrivals) - read}), flush=True)
canary.stop()
observer.close()
"""

TICKS = os.sysconf("SC_CLK_TCK")


def broker_cpu(cluster: RealCluster) -> float:
    """Every Kafka JVM's user + system CPU seconds so far."""
    total = 0
    for node in cluster.kafka.nodes.values():
        fields = Path(f"/proc/{node.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def idle(cluster: RealCluster, seconds: float) -> dict[str, Any]:
    before = broker_cpu(cluster)
    time.sleep(seconds)  # the measured stretch
    return {"brokersCpuPerSecond": round((broker_cpu(cluster) - before) / seconds, 4)}


def canary(cluster: RealCluster, seconds: float) -> dict[str, Any]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, cluster.kafka.bootstrap, str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "measuring"  # warm: its stretch begins
    before = broker_cpu(cluster)
    line = child.stdout.readline()  # its figures, once its stretch is over
    spent = broker_cpu(cluster) - before
    child.wait(60)
    said = json.loads(line)
    wall = said["wall"]
    return {
        "brokersCpuPerSecond": round(spent / wall, 4),
        "canaryCpuPerSecond": round(said["cpu"] / wall, 4),
        "sentPerSecond": round(said["sent"] / wall, 2),
        "ackedPerSecond": round(said["acked"] / wall, 2),
        "readPerSecond": round(said["read"] / wall, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {"idle": [], "canary": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pki = make_pki(folder / "pki")
        with real_cluster(folder, pki, data_mb=1, combined=3, heap="256m") as cluster:
            for round_ in range(args.rounds):
                order = ("idle", "canary") if round_ % 2 == 0 else ("canary", "idle")
                for kind in order:
                    run = idle if kind == "idle" else canary
                    row = run(cluster, args.seconds)
                    rows[kind].append(row)
                    print(kind, round_, json.dumps(row), flush=True)
    summary = {
        kind: {key: statistics.median(r[key] for r in found) for key in found[0]}
        for kind, found in rows.items()
    }
    print(json.dumps(summary, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "medians": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

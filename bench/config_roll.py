"""A configuration change on a real Apache Kafka: a plain roll (every node restarted, as a roll
of an inventory without desired files does) against a configuration roll (`config:` per node:
live where Kafka takes it, a restart only for the rest), side by side, what each costs clients.

    .venv/bin/python bench/config_roll.py [--rounds 3] [--data-mb 30] [--json PATH]

One real KRaft cluster (3 combined nodes, `rollguard.peers.realcluster`: topics orders, bulk
and canary, replication 3, min ISR 2, `--data-mb` MB in bulk, an agent beside each node). Each
round deploys a change to every node's server.properties (what configuration management does
before a roll) of the kind tests/real/test_real_kafka_configs.py rolls: log.cleaner.threads
(cluster-wide dynamic), num.io.threads (dynamic) on every node, and queued.max.requests
(read-only) on kafka-2 alone; the next deploy changes them back. Each round rolls two deploys,
one each way, in alternating order (plain first in even rounds, config first in odd ones):
- plain: `rollguard roll` with the inventory alone (every node restarted);
- config: `rollguard roll` with each node's deployed file named in the inventory.

Watched by a canary (acks=all, idempotent, a send every 100 ms, and a consumer) and an ISR
sampler, never by the product: failed sends, p99 and max send latency, the consumer's longest
gap, samples below min ISR, restarts (the control server's own log), the roll's wall time.
Medians over the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rollguard.peers.commandline import rollguard_args
from rollguard.peers.processes import make_pki
from rollguard.peers.realclients import Canary, IsrSampler
from rollguard.peers.realcluster import RealCluster, real_cluster
from rollguard.shared.javaprops import parse_properties

CHANGES = (
    {"log.cleaner.threads": "3", "num.io.threads": "10"},
    {"log.cleaner.threads": "2", "num.io.threads": "8"},
)
READ_ONLY = ({"queued.max.requests": "600"}, {"queued.max.requests": "500"})


def deploy(cluster: RealCluster, folder: Path, round_: int) -> Path:
    """Round `round_`'s change written to each node's server.properties, and an inventory that
    names them."""
    inventory = json.loads(cluster.inventory().read_text())
    for node in inventory["nodes"]:
        path = cluster.kafka.nodes[node["id"]].config_file
        values = {p.key: p.value for p in parse_properties(path.read_text())}
        values.update(CHANGES[round_ % 2])
        if node["name"] == "kafka-2":
            values.update(READ_ONLY[round_ % 2])
        path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        node["config"] = str(path)
    named = folder / f"inventory-{round_}.json"
    named.write_text(json.dumps(inventory))
    return named


def one_roll(cluster: RealCluster, inventory: Path, folder: Path, roll_id: str) -> dict[str, Any]:
    command = rollguard_args(
        "roll",
        inventory=inventory,
        bootstrap=cluster.kafka.bootstrap,
        tls=cluster.pki,
        state_dir=folder / "state",
        roll_id=roll_id,
    )
    before = [cluster.restarts.of(n) for n in cluster.kafka.nodes]
    began = time.monotonic()
    with (
        IsrSampler(cluster.kafka.bootstrap, {"*": 2}) as isr,
        Canary(cluster.kafka.bootstrap, "canary") as canary,
    ):
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        took = time.monotonic() - began
    after = [cluster.restarts.of(n) for n in cluster.kafka.nodes]
    return {
        "returncode": done.returncode,
        "lastLine": done.stdout.strip().splitlines()[-1:] or done.stderr[-300:],
        "restarts": sum(after) - sum(before),
        "rollSeconds": round(took, 1),
        "samplesBelowMinIsr": len({low.at for low in isr.lows}),
        **canary.report().row(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-mb", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {"plain": [], "config": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pki = make_pki(folder / "pki")
        with real_cluster(folder, pki, data_mb=args.data_mb, combined=3, heap="256m") as cluster:
            deploys = 0
            for round_ in range(args.rounds):
                order = ("plain", "config") if round_ % 2 == 0 else ("config", "plain")
                for kind in order:
                    inventory = deploy(cluster, folder, deploys)  # a change for each roll
                    deploys += 1
                    named = inventory if kind == "config" else cluster.inventory()
                    row = one_roll(cluster, named, folder, f"{kind}-{round_}")
                    rows[kind].append(row)
                    print(kind, round_, json.dumps(row), flush=True)
    summary = {
        kind: {
            key: statistics.median(r[key] for r in found)
            for key in (
                "restarts",
                "rollSeconds",
                "failed",
                "p99SendMs",
                "maxSendMs",
                "longestConsumerGapS",
                "samplesBelowMinIsr",
            )
        }
        for kind, found in rows.items()
    }
    print(json.dumps(summary, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "medians": summary}, indent=2))
    return 0 if all(r["returncode"] == 0 for found in rows.values() for r in found) else 1


if __name__ == "__main__":
    sys.exit(main())

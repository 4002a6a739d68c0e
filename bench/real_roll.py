"""What a roll costs clients on a real Apache Kafka: rollguard against a naive roller.

    .venv/bin/python bench/real_roll.py [--version 4.4.0] [--data-mb 150] [--idle 30]
                                        [--rollers rollguard,naive] [--naive-timeout 20]
                                        [--json PATH]

For each roller, a fresh real KRaft cluster (3 combined broker+controller nodes, one JVM each,
`rollguard.peers.realkafka`): topics orders (6), bulk (6) and canary (3), replication 3 and
min.insync.replicas 2 (the internal topics too), `--data-mb` MB in bulk, a real
`rollguard-agent` beside each node and the control server that restarts nodes
(`rollguard.peers.realcluster`). Node 0 is set to come back into a full log recovery
(CPU-throttled to 5 % of a core) on its first restart.

1. Idle: the canary (a producer, acks=all and idempotent, sending every 20 ms, and a consumer)
   and the ISR sampler for `--idle` seconds with nothing happening.
2. The roll, with the canary and the ISR sampler running, until the roll ends and then until
   every partition has its full ISR again ("settle"):
   - rollguard: `rollguard roll` with the inventory, at its defaults (as tests/real/real_kafka.py);
   - upgrade: the same with `--kafka-version` the newest (run it with `--version 4.0.0`): each
     node's `install` command switches its jars before its restart (an upgrade roll's cost
     against a plain one's);
   - naive: each node in id order is restarted through the same control path, then waited for
     up to `--naive-timeout` seconds until the broker answers a client bootstrapped at it alone
     (as `kafka-broker-api-versions --bootstrap-server NODE` in a script); not ready by then
     means restart it again, at most 3 restarts per node, then on to the next node anyway; no
     availability check between nodes, no wait for the ISRs.

Reported: failed sends, p99 and median send latency, the consumer's longest gap, ISR lows
(samples in which a partition was below min ISR 2 or without a leader, and how many partitions),
roll wall time, the time to settle, restarts per node, and each restart's own time from the
restart request to its `Kafka Server started` line in the node's kafka.log (a restart that was
restarted again before that line has none).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollguard.peers.processes import Pki, make_pki
from rollguard.peers.realclients import Canary, IsrSampler
from rollguard.peers.realcluster import RealCluster, real_cluster
from rollguard.peers.realkafka import NEWEST, STARTED, KafkaCluster, KafkaNode

RECOVERING = re.compile(rb"Recovering (\d+) logs from")
LOADED = re.compile(rb"Loaded (\d+) logs in (\d+)ms")
STAMP = re.compile(rb"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),(\d{3})\]")
STARTED_BYTES = re.compile(STARTED.pattern.encode())
MAX_RESTARTS = 3  # the naive roller's, per node


@dataclass
class Restart:
    node_id: int
    kind: str  # "recover" or "clean": what the control server did
    at: float  # wall clock, when the restart was asked for
    mark: int  # the size of the node's kafka.log then
    started: float = 0.0  # wall clock, when the new JVM was started (the old one stopped)


class TimedCluster(RealCluster):
    """RealCluster whose restarts (by rollguard through curl, or by the naive roller) are
    recorded with the time and where the node's log stood."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timed: list[Restart] = []

    def restart(self, node_id: int) -> None:
        node = self.kafka.nodes[node_id]
        mark = node.log_file.stat().st_size if node.log_file.exists() else 0
        kind = "recover" if node_id in self.restarts.recover_next else "clean"
        record = Restart(node_id, kind, time.time(), mark)
        self.timed.append(record)
        super().restart(node_id)
        record.started = time.time()


def rollguard_roll(cluster: RealCluster, folder: Path, *extra: str) -> dict[str, Any]:
    """`rollguard roll` as an operator runs it: the inventory, no timing flag."""
    done = subprocess.run(
        cluster.roll_command(folder / "state", "bench-1", *extra),
        capture_output=True,
        text=True,
        timeout=900,
    )
    return {"returncode": done.returncode, "stderrTail": done.stderr[-1500:]}


def admin_client(kafka: KafkaCluster, client_id: str) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(
        bootstrap_servers=kafka.bootstrap, request_timeout_ms=3000, client_id=client_id
    )


def answers(node: KafkaNode) -> bool:
    """The naive readiness check, as `kafka-broker-api-versions --bootstrap-server NODE` in a
    script: a client bootstrapped at that broker alone gets its answer within 2 s. (Asking the
    cluster instead passes at once: DescribeCluster lists a stopped broker until its session
    expires, and its partitions have leaders elsewhere.)"""
    from kafka import KafkaAdminClient

    try:
        client = KafkaAdminClient(
            bootstrap_servers=[node.bootstrap],
            request_timeout_ms=2000,
            bootstrap_timeout_ms=2000,
            client_id="naive-roller",
        )
    except Exception:
        return False
    client.close()
    return True


def naive_roll(cluster: RealCluster, timeout: float) -> dict[str, Any]:
    """Restart each node in turn; not RUNNING after `timeout` means restart it again."""
    gave_up = []
    seen: list[dict[str, Any]] = []  # per restart: how long until the broker answered
    for node_id in sorted(cluster.kafka.nodes):
        for _ in range(MAX_RESTARTS):
            cluster.restart(node_id)
            deadline = time.monotonic() + timeout
            ready = False
            while time.monotonic() < deadline and not ready:
                ready = answers(cluster.kafka.nodes[node_id])
                if not ready:
                    time.sleep(0.5)
            waited = round(timeout - (deadline - time.monotonic()), 1)
            seen.append({"node": node_id, "readyAfterS": waited if ready else None})
            if ready:
                break
        else:
            gave_up.append(node_id)  # and on to the next node, as the script goes on
    return {"gaveUpOn": gave_up, "naiveReadiness": seen}


def settle(kafka: KafkaCluster, timeout: float = 180) -> float | None:
    """Seconds until every partition has a leader and its full ISR again (None: not by then)."""
    started = time.monotonic()
    admin = admin_client(kafka, "bench-settle")
    try:
        while time.monotonic() - started < timeout:
            try:
                topics = admin.describe_topics()
                if topics and all(
                    p.get("leader_id", -1) >= 0 and set(p["isr_nodes"]) >= set(p["replica_nodes"])
                    for t in topics
                    for p in t["partitions"]
                ):
                    return time.monotonic() - started
            except Exception:
                pass
            time.sleep(0.5)
        return None
    finally:
        admin.close()


def stamp(line_start: bytes) -> float | None:
    match = STAMP.match(line_start)
    if not match:
        return None
    text = match.group(1).decode() + "." + match.group(2).decode()
    # log4j writes the JVM's local time; this machine (and the JVM) run in UTC
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC).timestamp()


def restart_times(cluster: TimedCluster, since: float) -> list[dict[str, Any]]:
    """Each restart's own time from the node's kafka.log: from the restart request to the
    `Kafka Server started` line of the start it made (None if restarted again before)."""
    rows = []
    for i, r in enumerate(cluster.timed):
        log = cluster.kafka.nodes[r.node_id].log_file.read_bytes()
        later = [x.mark for x in cluster.timed[i + 1 :] if x.node_id == r.node_id]
        end = later[0] if later else len(log)
        part = log[r.mark : end]
        started = STARTED_BYTES.search(part)
        running = None
        if started:
            line = part[part.rfind(b"\n", 0, started.start()) + 1 :]
            at = stamp(line)
            running = round(at - r.at, 1) if at is not None else None
        loaded = LOADED.search(part)
        rows.append(
            {
                "node": r.node_id,
                "kind": r.kind,
                "atS": round(r.at - since, 1),
                "stopS": round(r.started - r.at, 1),
                "restartToRunningS": running,
                "recoveredLogs": int(m.group(1)) if (m := RECOVERING.search(part)) else 0,
                "loadedLogsMs": int(loaded.group(2)) if loaded else None,
            }
        )
    return rows


def isr_summary(isr: IsrSampler) -> dict[str, Any]:
    return {
        "samples": isr.samples,
        "samplesWithLow": len({low.at for low in isr.lows}),
        "partitionsLow": len({(low.topic, low.partition) for low in isr.lows}),
        "partitionsWithoutIsr": len(
            {(low.topic, low.partition) for low in isr.lows if not low.isr}
        ),
        "errors": len(isr.errors),
    }


def watched(kafka: KafkaCluster, body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `body` then wait to settle, with the canary and the ISR sampler watching."""
    load = os.getloadavg()[0]
    with (
        IsrSampler(kafka.bootstrap, {"*": 2}) as isr,
        Canary(kafka.bootstrap, "canary", every=0.02) as canary,
    ):
        started = time.monotonic()
        outcome = body()
        took = time.monotonic() - started
        settled = settle(kafka)
    report = canary.report()
    return {
        "tookS": round(took, 1),
        "settleS": None if settled is None else round(settled, 1),
        "loadBefore": round(load, 1),
        **report.row(),
        # sent, neither acknowledged nor failed when the canary stopped (its flush timed out)
        "unacknowledged": report.unanswered,
        "sendErrors": report.errors[:3],
        "consumerErrors": len(canary.consumer_errors),
        "isr": isr_summary(isr),
        **outcome,
    }


def one(roller: str, args: argparse.Namespace, pki: Pki, folder: Path) -> dict[str, Any]:
    print(f"{roller}: starting a fresh cluster", file=sys.stderr, flush=True)
    with real_cluster(
        folder,
        pki,
        data_mb=args.data_mb,
        cluster_class=TimedCluster,
        combined=3,
        version=args.version,
    ) as started:
        assert isinstance(started, TimedCluster)
        return measure(roller, args, pki, folder, started)


def measure(
    roller: str, args: argparse.Namespace, pki: Pki, folder: Path, cluster: TimedCluster
) -> dict[str, Any]:
    kafka = cluster.kafka
    print(f"{roller}: idle {args.idle:.0f} s", file=sys.stderr, flush=True)
    idle = watched(kafka, lambda: time.sleep(args.idle) or {})
    cluster.recover_on_next_restart(0)
    print(f"{roller}: rolling", file=sys.stderr, flush=True)
    since = time.time()
    if roller == "rollguard":
        roll = watched(kafka, lambda: rollguard_roll(cluster, folder))
    elif roller == "upgrade":  # the same roll onto the newest Kafka: each node's jars switched
        target = ("--kafka-version", NEWEST)
        roll = watched(kafka, lambda: rollguard_roll(cluster, folder, *target))
    else:
        roll = watched(kafka, lambda: naive_roll(cluster, args.naive_timeout))
    restarts = restart_times(cluster, since)
    roll["restarts"] = restarts
    roll["restartsPerNode"] = [cluster.restarts.of(n) for n in sorted(kafka.nodes)]
    own = {}
    for node_id in sorted(kafka.nodes):
        mine = [r for r in restarts if r["node"] == node_id]
        if mine and mine[-1]["restartToRunningS"] is not None:
            # from its first restart of the roll to RUNNING after its last
            own[str(node_id)] = round(
                mine[-1]["atS"] + mine[-1]["restartToRunningS"] - mine[0]["atS"], 1
            )
        else:
            own[str(node_id)] = None
    roll["ownRestartToRunningS"] = own
    roll["throttled"] = [n.throttled for n in kafka.nodes.values()]
    return {"idle": idle, "roll": roll}


def fmt(value: Any, suffix: str = "") -> str:
    return "-" if value is None else f"{value}{suffix}"


def table(results: dict[str, dict[str, Any]]) -> str:
    head = (
        "| run | sent | failed | p99 send ms | median send ms | longest consumer gap s "
        "| ISR lows (samples / partitions) | roll s | settle s | restarts per node "
        "| restart to RUNNING per node s |"
    )
    lines = [head, "|" + "---|" * 11]
    for roller, result in results.items():
        for phase in ("idle", "roll"):
            r = result[phase]
            isr = r["isr"]
            name = f"idle ({roller}'s cluster)" if phase == "idle" else roller
            own = r.get("restarts")
            per_node = "-"
            if own is not None:
                per_node = ", ".join(
                    f"{n}: "
                    + " / ".join(fmt(x["restartToRunningS"]) for x in own if x["node"] == n)
                    for n in sorted({x["node"] for x in own})
                )
            lines.append(
                f"| {name} | {r['sent']} | {r['failed']} | {r['p99SendMs']} | {r['medianSendMs']} "
                f"| {r['longestConsumerGapS']} | {isr['samplesWithLow']} / {isr['partitionsLow']} "
                f"| {r['tookS'] if phase == 'roll' else '-'} | {fmt(r['settleS'])} "
                f"| {'/'.join(map(str, r.get('restartsPerNode', []))) or '-'} | {per_node} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default=NEWEST, help="Kafka version (build/kafka/<v>/lib)")
    parser.add_argument("--data-mb", type=int, default=150, help="MB in the bulk topic")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle baseline")
    parser.add_argument("--rollers", default="rollguard,naive")
    parser.add_argument("--naive-timeout", type=float, default=20.0)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    # a SIGTERM ends the run through the finally blocks: every JVM of ours stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    folder = Path(tempfile.mkdtemp(prefix="real-roll-"))
    pki = make_pki(folder / "pki")
    results = {}
    for roller in args.rollers.split(","):
        results[roller] = one(roller, args, pki, folder / roller)
        print(json.dumps({roller: results[roller]["roll"]}, default=str), file=sys.stderr)
    print(table(results))
    document = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "kafka": args.version,
        "dataMb": args.data_mb,
        "naiveTimeoutS": args.naive_timeout,
        "cores": os.cpu_count(),
        "folder": str(folder),
        "results": results,
    }
    if args.json:
        args.json.write_text(json.dumps(document, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

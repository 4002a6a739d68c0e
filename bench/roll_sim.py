"""Roll 100 simulated nodes on a virtual clock: rollguard against a naive roller.

    .venv/bin/python bench/roll_sim.py [--nodes 100] [--scenarios 5] [--seed 1] [--poll 10]
                                       [--recovering-at-start 0.2]

Each scenario is a random cluster (tests/roll_sim.py): restart times 20-120 s, a fifth of the
brokers already in log recovery at the start and a fifth going into recovery when restarted
(1-60 min), a replication catch-up of 10 s to 5 min per broker after each start (the broker
rejoins its partitions' ISRs one by one over it), random partitions with replication 1-3 and
min.insync.replicas 1-2, `__consumer_offsets` and `__transaction_state` (50 partitions each,
RF 3, min ISR 2), three KRaft voters. The same scenarios are rolled by rollguard's `Roller`
and by a naive roller that restarts the nodes in turn, waiting for each to be RUNNING and
restarting it again if it is not after the operation timeout (300 s), with no availability
check and no wait for the ISRs. No real sleeping.

Reported per roller: roll time, restarts, restarts of recovering brokers, restarts that took a
partition below min.insync.replicas, restarts that took a partition offline and restarts that
lost the KRaft majority (the simulation's own checks). For rollguard, its roll time split into
the nodes' own time (each restart until the node is back in every ISR: restart, recovery,
catch-up), the cluster's own waits (no node not yet restarted could have been restarted safely
then: brokers recovering or catching up since before the roll) and the roller's overhead, the
rest; and what the overhead is made of.
"""

from __future__ import annotations

import json
import logging
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rollguard.peers.sim import SimCluster, VirtualClock, default_settings, random_cluster, run_roll
from rollguard.roller.roll.roller import RollSettings
from rollguard.shared.cli import Parser, argument_type
from rollguard.shared.settings import duration_between, integer, number_between

ROOT = Path(__file__).resolve().parent.parent

TIMEOUT = 300.0
POLL = 10.0
COUNTS = ("restarted_recovering", "below_min_isr", "offline", "quorum_lost")


def naive_roll(cluster: SimCluster, poll: float, max_attempts: int = 10) -> None:
    """Restart each node in turn; not ready after the timeout means restart it (again)."""
    clock = cluster.clock

    def wait_ready(node_id: int) -> bool:
        deadline = clock.now + TIMEOUT
        while clock.now < deadline:
            if cluster.by_id[node_id].ready(clock.now):
                return True
            clock.now += poll
        return False

    for sim in sorted(cluster.nodes.values(), key=lambda s: s.node.node_id):
        for _ in range(max_attempts):
            if not sim.ready(clock.now):
                wait_ready(sim.node.node_id)
            cluster.restart_now(sim.node.name)
            if wait_ready(sim.node.node_id):
                break


@dataclass(frozen=True, slots=True)
class Split:
    """rollguard's roll time = own + cluster + latency + held (seconds)."""

    own: float  # each restart until its node is back in sync
    cluster: float  # no node left could have been restarted safely
    latency: float  # within one poll interval after the next restart became possible
    held: float  # a restart had been possible for longer than that

    @property
    def overhead(self) -> float:
        return self.latency + self.held


def split(cluster: SimCluster, poll: float) -> Split:
    """Walk rollguard's restarts: before each, the gap since the previous node was back in
    sync is the cluster's until some node could be restarted, then the roller's; after the
    last, the roller's (noticing the last node in sync)."""
    own = cluster_wait = latency = held = 0.0
    previous = 0.0
    for entry in cluster.log:
        own += entry.own
        cluster_wait += max(0.0, entry.earliest - previous)
        late = entry.at - max(entry.earliest, previous)
        # Within one poll interval of becoming possible is the polling's granularity; longer,
        # the roller was held by something else (see docs/benchmarks.md for what it was).
        latency += min(late, poll)
        held += max(0.0, late - poll)
        previous = entry.synced_at
    latency += cluster.clock.now - previous
    return Split(own, cluster_wait, latency, held)


def scenario(seed: int, nodes: int, recovering: float) -> SimCluster:
    rng = random.Random(seed)
    return random_cluster(
        rng,
        VirtualClock(),
        nodes,
        recovering_at_start=recovering,
        recovery_on_restart=0.2,
        max_recovery=3600,
        catch_up=(10.0, 300.0),
    )


def counts(cluster: SimCluster) -> dict[str, int]:
    v = cluster.violations
    return {key: len(getattr(v, key)) for key in COUNTS}


def run_scenario(
    seed: int, nodes: int, recovering: float, settings: RollSettings
) -> dict[str, Any]:
    ours = scenario(seed, nodes, recovering)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        outcome, reason = run_roll(ours, Path(folder), settings)
    wall = time.perf_counter() - started
    parts = split(ours, settings.poll_interval)
    naive = scenario(seed, nodes, recovering)
    naive_roll(naive, settings.poll_interval)
    baseline = parts.own + parts.cluster
    return {
        "seed": seed,
        "rollguard": {
            "outcome": outcome,
            "reason": reason[:200],
            "roll_s": round(ours.clock.now),
            "restarts": sum(n.restarts for n in ours.nodes.values()),
            **counts(ours),
            "own_s": round(parts.own),
            "cluster_wait_s": round(parts.cluster),
            "latency_s": round(parts.latency),
            "held_s": round(parts.held),
            "overhead": parts.overhead / baseline,
            "latency_share": parts.latency / baseline,
            "held_share": parts.held / baseline,
            "wall_s": round(wall, 2),
        },
        "naive": {
            "roll_s": round(naive.clock.now),
            "restarts": sum(n.restarts for n in naive.nodes.values()),
            **counts(naive),
        },
    }


def main() -> int:
    parser = Parser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=argument_type(integer(1, 100_000)), default=100)
    parser.add_argument("--scenarios", type=argument_type(integer(1, 1000)), default=5)
    parser.add_argument("--seed", type=argument_type(integer()), default=1)
    parser.add_argument(
        "--poll",
        type=argument_type(duration_between("100ms", "10m")),
        default=POLL,
        help="the roller's poll interval",
    )
    parser.add_argument(
        "--recovering-at-start",
        type=argument_type(number_between(0, 1, "share")),
        default=0.2,
        help="the share of brokers in log recovery when the roll starts",
    )
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the roller's own log lines: thousands per roll
    settings = replace(default_settings(), poll_interval=args.poll)
    rows = [
        run_scenario(args.seed + index, args.nodes, args.recovering_at_start, settings)
        for index in range(args.scenarios)
    ]
    print(json.dumps(rows, indent=1))
    print(
        f"poll interval {args.poll:g} s, {args.nodes} nodes, {args.scenarios} scenarios, "
        f"{args.recovering_at_start:.0%} of the brokers recovering at the start"
    )
    for who, keys in (
        ("rollguard", ("roll_s", "restarts", *COUNTS)),
        ("naive", ("roll_s", "restarts", *COUNTS)),
    ):
        for key in keys:
            values = [r[who][key] for r in rows]
            print(f"{who:9} {key:22} median {statistics.median(values):>8}  all {values}")
    for key in ("own_s", "cluster_wait_s", "latency_s", "held_s", "wall_s"):
        values = [r["rollguard"][key] for r in rows]
        print(f"rollguard {key:22} median {statistics.median(values):>8}  all {values}")
    for key in ("overhead", "latency_share", "held_share"):
        values = [r["rollguard"][key] for r in rows]
        shown = ", ".join(f"{v:.2%}" for v in values)
        print(f"rollguard {key:22} median {statistics.median(values):>8.2%}  all [{shown}]")
    return 0 if all(r["rollguard"]["outcome"] == "completed" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

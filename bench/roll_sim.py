"""Roll simulated clusters on a virtual clock: rollguard against a naive roller, and batches.

    .venv/bin/python bench/roll_sim.py [--nodes 100] [--scenarios 5] [--seed 1] [--poll 10]
                                       [--recovering-at-start 0.2] [--part all|serial|batches]
                                       [--batch-nodes 100,300,1000] [--batch-scenarios 2]

The batch part (`--part batches`, see `batch_benchmark`): clusters of 100, 300 and 1,000 brokers
in 3 racks, replication 3 and min.insync.replicas 2, placed rack-aware or at random, rolled on
the virtual clock by rollguard's planner (`rollguard.roller.roll.rules.batch`) at batch sizes 1 (the
serial roll), 3, 10 and unlimited, and by Strimzi's "Kafka Roller 2.0" greedy algorithm at the
same limits; each batch waits until its members are back in every ISR (the next poll after).

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
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rollguard.peers.roller2 import greedy_batch
from rollguard.peers.sim import (
    SimCluster,
    VirtualClock,
    default_settings,
    rack_cluster,
    random_cluster,
    run_roll,
)
from rollguard.roller.model import Node
from rollguard.roller.roll.rules.batch import Placement, next_batch, plan_batches
from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.shared.cli import Parser, argument_type
from rollguard.shared.converters import duration_between, integer, number_between

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
    parser.add_argument(
        "--part",
        choices=("all", "serial", "batches"),
        default="all",
        help="serial: rollguard against the naive roller; batches: batch sizes and greedy",
    )
    parser.add_argument("--batch-nodes", default="100,300,1000", help="cluster sizes, batches")
    parser.add_argument(
        "--batch-scenarios", type=argument_type(integer(1, 100)), default=2, help="per size"
    )
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the roller's own log lines: thousands per roll
    ok = True
    if args.part in ("all", "serial"):
        ok = serial_part(args)
    if args.part in ("all", "batches"):
        sizes = [integer(1, 100_000)(n) for n in args.batch_nodes.split(",")]
        ok = batch_benchmark(sizes, args.batch_scenarios, args.seed, args.poll) and ok
    return 0 if ok else 1


def serial_part(args: Any) -> bool:
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
    return all(r["rollguard"]["outcome"] == "completed" for r in rows)


# ---- batches ---------------------------------------------------------------------------------

UNLIMITED = 0  # a batch size: no limit


def rollguard_batch(pending: list[Node], placement: Placement, max_size: int) -> list[Node]:
    plan = next_batch(
        pending,
        placement.cluster,
        max_size=max_size or len(pending),
        placement=placement,
        explain=False,
    )
    return list(plan.batch.members) if plan.batch is not None else []


Chooser = Callable[[list[Node], Placement, int], list[Node]]


def batch_roll(cluster: SimCluster, choose: Chooser, max_size: int, poll: float) -> int:
    """Roll every broker in batches on the virtual clock: observe, choose, restart the batch,
    and observe again at the first poll after its last member is back in sync. The number of
    batches; the restarts' harm is counted by the simulation (`cluster.violations`)."""
    clock = cluster.clock
    pending = sorted((s.node for s in cluster.nodes.values()), key=lambda n: n.node_id)
    batches = 0
    while pending:
        ready = [n for n in pending if cluster.by_id[n.node_id].ready(clock.now)]
        members = choose(ready, Placement(cluster.cluster_view()), max_size) if ready else []
        if not members:
            clock.now += poll
            if clock.now > 10 * 86400:
                raise RuntimeError(f"no batch possible for 10 days: {len(pending)} left")
            continue
        for member in members:
            cluster.restart_now(member.name)
        batches += 1
        chosen = {m.node_id for m in members}
        pending = [n for n in pending if n.node_id not in chosen]
        synced = max(cluster.nodes[m.name].synced_at() for m in members)
        clock.now += math.ceil((synced - clock.now) / poll) * poll
    return batches


def batch_cluster(seed: int, nodes: int, placement: str) -> SimCluster:
    cluster = rack_cluster(
        random.Random(seed),
        VirtualClock(),
        nodes,
        racks=3,
        placement=placement,
        partitions_per_broker=20,
        replication=(3, 3),
        min_isr=(2, 2),
        recovery_on_restart=0.1,
        catch_up=(10.0, 300.0),
        controllers=0,
    )
    cluster.track_earliest = False
    return cluster


def planning_time(seed: int) -> dict[str, float]:
    """One batch, and a whole plan, for 1,000 brokers in 3 racks and 100,000 partitions."""
    cluster = rack_cluster(
        random.Random(seed), VirtualClock(), 1000, racks=3, partitions_per_broker=100,
        replication=(3, 3), min_isr=(2, 2), controllers=0,
    )  # fmt: skip
    view = cluster.cluster_view()
    nodes = sorted((s.node for s in cluster.nodes.values()), key=lambda n: n.node_id)
    figures = {}
    for name, size in (("batch_of_10", 10), ("batch_unlimited", 1000)):
        started = time.perf_counter()
        next_batch(nodes, view, max_size=size)
        figures[name] = time.perf_counter() - started
    started = time.perf_counter()
    batches, _ = plan_batches(nodes, view, max_size=1000)
    figures["whole_plan_unlimited"] = time.perf_counter() - started
    figures["batches_unlimited"] = len(batches)
    return figures


def batch_benchmark(sizes: list[int], scenarios: int, seed: int, poll: float) -> bool:
    limits = (1, 3, 10, UNLIMITED)
    rows = []
    for nodes in sizes:
        for placement in ("rack_aware", "random"):
            for index in range(scenarios):
                for who, choose in (("rollguard", rollguard_batch), ("greedy", greedy_batch)):
                    for limit in limits:
                        if who == "greedy" and limit == 1:
                            continue  # the same serial roll
                        cluster = batch_cluster(seed + index, nodes, placement)
                        started = time.perf_counter()
                        count = batch_roll(cluster, choose, limit, poll)
                        rows.append({
                            "nodes": nodes, "placement": placement, "seed": seed + index,
                            "who": who, "limit": limit or "unlimited", "batches": count,
                            "roll_s": cluster.clock.now, **counts(cluster),
                            "wall_s": round(time.perf_counter() - started, 1),
                        })  # fmt: skip
                        print(json.dumps(rows[-1]), flush=True)
    print(f"\npoll {poll:g} s, {scenarios} scenarios per size and placement (medians)")
    print("| brokers | placement | roller | limit | batches | roll time | vs serial | "
          "below min ISR | offline |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    ok = True
    for nodes in sizes:
        for placement in ("rack_aware", "random"):
            mine = [r for r in rows if r["nodes"] == nodes and r["placement"] == placement]
            serial = statistics.median(
                r["roll_s"] for r in mine if r["who"] == "rollguard" and r["limit"] == 1
            )
            for who in ("rollguard", "greedy"):
                for limit in limits:
                    group = [r for r in mine if r["who"] == who and r["limit"] == (limit or
                             "unlimited")]  # fmt: skip
                    if not group:
                        continue
                    roll_s = statistics.median(r["roll_s"] for r in group)
                    print(
                        f"| {nodes} | {placement} | {who} | {limit or 'unlimited'} | "
                        f"{statistics.median(r['batches'] for r in group):g} | "
                        f"{roll_s:,.0f} s | {roll_s / serial:.3f} | "
                        f"{sum(r['below_min_isr'] for r in group)} | "
                        f"{sum(r['offline'] for r in group)} |"
                    )
                    ok = ok and all(r["below_min_isr"] == r["offline"] == 0 for r in group
                                    if r["who"] == "rollguard")  # fmt: skip
            for limit in limits[1:]:
                for a, b in zip(
                    (r for r in mine if r["who"] == "rollguard" and r["limit"] == (limit or
                     "unlimited")),
                    (r for r in mine if r["who"] == "greedy" and r["limit"] == (limit or
                     "unlimited")),
                    strict=True,
                ):  # fmt: skip
                    if a["batches"] > b["batches"]:
                        print(f"more batches than greedy: {a} {b}")
    figures = planning_time(seed)
    print("planning, 1,000 brokers and 100,000 partitions: " + ", ".join(
        f"{k} {v:.2f} s" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()
    ))  # fmt: skip
    return ok


if __name__ == "__main__":
    sys.exit(main())

"""The transcript of `plan` on simulated clusters (rollguard.peers.sim): for each case, the
plan's text and JSON, one JSON line a case. Two trees' transcripts compared show whether a
change to the roll changed what `plan` says (issue 51: `plan` became the roll's first look).

    .venv/bin/python bench/plan_transcript.py > after.jsonl
    # in a worktree of the commit before, with its sources first on PYTHONPATH:
    PYTHONPATH=<old>/roller/src:<old>/shared/src:<old>/tests/peers/src \
        .venv/bin/python bench/plan_transcript.py > before.jsonl
    diff before.jsonl after.jsonl

The cases: the roll transcript's random clusters as they stand before their roll (combined
nodes, controller-only ones, racks and batches of two), and a five-node cluster in the states a
plan must explain (a node in log recovery, an agent that cannot be read, a partition at its
min ISR, --only, --skip, --hold, --all, batches, a target version).
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from rollguard.peers.sim import (
    SimCluster,
    SimNode,
    SimPartition,
    VirtualClock,
    default_settings,
    make_roller,
    rack_cluster,
    random_cluster,
)
from rollguard.roller import Node, Role, RollSettings
from rollguard.roller.roll.planning import plan_lines

COMBINED = frozenset({Role.BROKER, Role.CONTROLLER})
BROKER = frozenset({Role.BROKER})


def dump(name: str, cluster: SimCluster, settings: RollSettings) -> None:
    with tempfile.TemporaryDirectory() as d:
        roller = make_roller(cluster, Path(d), settings)

        async def go() -> Any:
            try:
                return await roller.plan(check_agents=False)
            except Exception as exc:  # a plan that cannot be made says so: part of the record
                return f"{type(exc).__name__}: {exc}"
            finally:
                await roller.agents.aclose()

        entries = asyncio.run(go())
        if isinstance(entries, str):
            print(json.dumps({"case": name, "error": entries}, sort_keys=True))
            return
        print(
            json.dumps(
                {
                    "case": name,
                    "text": plan_lines(entries),
                    "json": [e.to_json() for e in entries],
                },
                sort_keys=True,
            )
        )


def node(node_id: int, roles: frozenset[Role] = COMBINED) -> SimNode:
    return SimNode(Node(node_id, f"kafka-{node_id}", roles, f"https://kafka-{node_id}:8443"))


def five_nodes(*, recovering: bool = True, unknown: bool = False) -> SimCluster:
    """kafka-0..2 combined (kafka-0 leads the quorum), kafka-3 and 4 brokers; kafka-1 in log
    recovery (`recovering`); orders-0 (replicas 2, 3, 4; min ISR 2) has lost kafka-4 from its
    ISR, so neither kafka-2 nor kafka-3 may go now; `unknown`: kafka-4's agent cannot be read."""
    nodes = [node(0), node(1), node(2), node(3, BROKER), node(4, BROKER)]
    if recovering:
        nodes[1].down_until, nodes[1].recovery_until = 0.0, 3600.0
        nodes[1].recovery_segments = 500
    partitions = [SimPartition("orders", 0, (2, 3, 4), 2), SimPartition("orders", 1, (0, 3, 4), 1)]
    cluster = SimCluster(nodes, partitions, VirtualClock())
    for sim in nodes:
        sim.rejoin = {i: 0.0 for i, p in enumerate(partitions) if sim.node.node_id in p.replicas}
        sim.catch_up_seconds = 60.0
    nodes[4].rejoin[0] = 1e9  # a follower that never catches up
    if unknown:
        nodes[4].jvm_started_at = 10.0  # no JVM answers its agent yet
    return cluster


def main() -> None:
    for seed in range(6):
        for dedicated in (False, True):
            c = random_cluster(
                random.Random(seed), VirtualClock(), 3 + seed % 3, controller_only=dedicated
            )
            dump(f"random-{seed}-{dedicated}", c, default_settings())
    for seed in range(3):
        c = rack_cluster(
            random.Random(seed), VirtualClock(), 6, racks=3, min_isr=(2, 2), controllers=0
        )
        dump(f"batch-{seed}", c, replace(default_settings(), max_batch_size=2))
        dump(
            f"batch-rack-{seed}", c, replace(default_settings(), max_batch_size=3, rack_aware=True)
        )
    s = RollSettings()
    dump("five", five_nodes(), s)
    dump("five-quiet", five_nodes(recovering=False), s)
    dump("five-unknown", five_nodes(unknown=True), s)
    dump("five-only", five_nodes(), replace(s, only=frozenset({"kafka-0", "kafka-4"})))
    dump("five-skip", five_nodes(), replace(s, skip=frozenset({"kafka-2"})))
    dump("five-hold", five_nodes(), replace(s, hold=frozenset({"kafka-3"})))
    dump("five-all", five_nodes(recovering=False), replace(s, all_nodes=True))
    dump("five-batch", five_nodes(recovering=False), replace(s, max_batch_size=2))
    dump("five-target", five_nodes(), replace(s, kafka_version="4.4.0"))
    dump("five-quiet-target", five_nodes(recovering=False), replace(s, kafka_version="4.4.0"))
    dump("five-typo", five_nodes(), replace(s, only=frozenset({"kafka-O"})))


if __name__ == "__main__":
    main()

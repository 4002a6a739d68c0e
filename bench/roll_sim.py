"""Roll 100 simulated nodes on a virtual clock: rollguard against a naive roller.

    .venv/bin/python bench/roll_sim.py [--nodes 100] [--scenarios 5] [--seed 1]

Each scenario is a random cluster (tests/roll_sim.py): restart times 20-120 s, a fifth of the
brokers already in log recovery at the start and a fifth going into recovery when restarted
(1-60 min), random partitions with replication 1-3 and min.insync.replicas 1-2. The same
scenarios are rolled by rollguard's `Roller` and by a naive roller that restarts whatever is not
ready after the operation timeout (300 s), with no availability check. Reported per roller:
roll time, overhead beyond the nodes' own restart and recovery time, restarts of recovering
brokers and restarts that took a partition below min.insync.replicas. No real sleeping.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from roll_sim import SimCluster, VirtualClock, random_cluster, run_roll  # noqa: E402

from shared.states import BrokerState  # noqa: E402

TIMEOUT = 300.0
POLL = 10.0


def own_time(cluster: SimCluster) -> float:
    """What the nodes themselves need, rolled one at a time: restart plus recovery."""
    total = 0.0
    for sim in cluster.nodes.values():
        total += sim.restart_seconds + sim.recovery_after_restart
        total += max(0.0, sim.recovery_until) if sim.restarts == 0 else 0.0
    return total


def naive_roll(cluster: SimCluster, max_attempts: int = 10) -> None:
    """Restart each node in turn; not ready after the timeout means restart it (again)."""
    clock = cluster.clock

    def wait_ready() -> bool:
        deadline = clock.now + TIMEOUT
        while clock.now < deadline:
            if all(cluster.running(n.node.node_id) for n in [sim]):
                return True
            clock.now += POLL
        return False

    for sim in sorted(cluster.nodes.values(), key=lambda s: s.node.node_id):
        for _ in range(max_attempts):
            if sim.state(clock.now) is not BrokerState.RUNNING and wait_ready():
                pass
            cluster.restart_now(sim.node.name)
            if wait_ready():
                break


def scenario(seed: int, nodes: int) -> SimCluster:
    rng = random.Random(seed)
    return random_cluster(
        rng,
        VirtualClock(),
        nodes,
        recovering_at_start=0.2,
        recovery_on_restart=0.2,
        max_recovery=3600,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--scenarios", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rows = []
    for index in range(args.scenarios):
        seed = args.seed + index
        ours = scenario(seed, args.nodes)
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            outcome, reason = run_roll(ours, Path(folder))
        wall = time.perf_counter() - started
        naive = scenario(seed, args.nodes)
        naive_roll(naive)
        rows.append(
            {
                "seed": seed,
                "rollguard": {
                    "outcome": outcome,
                    "reason": reason[:120],
                    "roll_s": round(ours.clock.now),
                    "own_s": round(own_time(ours)),
                    "overhead_s": round(ours.clock.now - own_time(ours)),
                    "restarts": sum(n.restarts for n in ours.nodes.values()),
                    "restarted_recovering": len(ours.violations.restarted_recovering),
                    "below_min_isr": len(ours.violations.below_min_isr),
                    "cpu_wall_s": round(wall, 2),
                },
                "naive": {
                    "roll_s": round(naive.clock.now),
                    "restarts": sum(n.restarts for n in naive.nodes.values()),
                    "restarted_recovering": len(naive.violations.restarted_recovering),
                    "below_min_isr": len(naive.violations.below_min_isr),
                },
            }
        )
    print(json.dumps(rows, indent=1))
    for who in ("rollguard", "naive"):
        for key in ("roll_s", "restarts", "restarted_recovering", "below_min_isr"):
            values = [r[who][key] for r in rows]
            print(f"{who:9} {key:22} median {statistics.median(values)}  all {values}")
    overhead = [r["rollguard"]["overhead_s"] / r["rollguard"]["own_s"] for r in rows]
    print(f"rollguard overhead beyond own time: median {statistics.median(overhead):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

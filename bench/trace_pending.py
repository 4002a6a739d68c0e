"""Follow a pending node from the roll loop: the call tree, by module, of the loop's look at
one node that needs a restart but is not ready (in log recovery), on the simulated cluster and
the virtual clock (rollguard.peers.sim). Prints the modules visited (in order of first visit),
how many there are, and how many returns cross from one module back to another. `--poll`
follows the loop's whole first poll instead (the cluster, every node's view, the order, the
pending node's look, the others held while it recovers).

    .venv/bin/python bench/trace_pending.py [--poll]
    # another tree (the commit before, in a worktree), its sources first on the path:
    PYTHONPATH=<old>/roller/src:<old>/shared/src:<old>/tests/peers/src \
        .venv/bin/python bench/trace_pending.py

Issue 39 asks that this be at most half of what it was before the roll became one state
machine per node (docs/benchmarks.md gives both trees' figures).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from rollguard.peers.sim import (
    SimCluster,
    SimNode,
    SimPartition,
    VirtualClock,
    run_roll,
    spread_rejoins,
)
from rollguard.roller.model import Node, Role

PRODUCT = "rollguard.roller"
# The loop's entry for one node, before and after the refactor (the first found is followed);
# with --poll, the loop's poll.
ENTRIES = {("pending", "look"), ("roller", "_look")}
POLL = {("roller", "_poll"), ("looks", "poll")}


def cluster() -> SimCluster:
    nodes = [
        SimNode(
            Node(i, f"kafka-{i}", frozenset({Role.BROKER, Role.CONTROLLER}), f"https://kafka-{i}"),
            restart_seconds=30,
            catch_up_seconds=5,
        )
        for i in range(3)
    ]
    # In log recovery when the roll starts: pending, not ready, waited for.
    nodes[1].restarted_at, nodes[1].jvm_started_at, nodes[1].down_until = -30.0, -29.0, -20.0
    nodes[1].recovery_until, nodes[1].recovery_segments = 120.0, 400
    parts = [SimPartition("orders", i, (i % 3, (i + 1) % 3, (i + 2) % 3), 2) for i in range(6)]
    sim = SimCluster(nodes, parts, VirtualClock())
    spread_rejoins(sim)
    return sim


def main() -> int:
    entries = POLL if "--poll" in sys.argv[1:] else ENTRIES
    modules: list[str] = []
    crossings = 0
    depth = 0  # > 0 while inside a followed look
    stack: list[str] = []
    done = False

    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        nonlocal depth, crossings, done
        if done or event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__") or ""
        name = frame.f_code.co_name
        if event == "call":
            short = module.rsplit(".", 1)[-1]
            if depth == 0 and (short, name) in entries:
                depth = 1
                stack.append(module)
                modules.append(module)
                return
            if depth and module.startswith(PRODUCT):
                if module not in modules:
                    modules.append(module)
                stack.append(module)
                depth += 1
            elif depth:
                stack.append("")
                depth += 1
            return
        if depth:
            left = stack.pop()
            depth -= 1
            if stack and left and stack[-1] and stack[-1] != left:
                crossings += 1
            if depth == 0:
                done = True

    sys.setprofile(profile)
    with tempfile.TemporaryDirectory() as folder:
        outcome = run_roll(cluster(), Path(folder))
    sys.setprofile(None)
    print(f"roll: {outcome[0]} {outcome[1]}")
    print(f"modules visited ({len(modules)}):")
    for m in modules:
        print("  " + m)
    print(f"returns across modules: {crossings}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The transcript of simulated rolls (rollguard.peers.sim, the virtual clock): for each case,
its outcome, its journal and its events, without wall-clock stamps: one JSON line a case. Two
trees' transcripts compared show whether a change to the roll changed what it does, records
or says (issue 39's refactor: identical).

    .venv/bin/python bench/roll_transcript.py > after.jsonl
    # in a worktree of the commit before, with its sources first on PYTHONPATH:
    PYTHONPATH=<old>/roller/src:<old>/shared/src:<old>/tests/peers/src \
        .venv/bin/python bench/roll_transcript.py > before.jsonl
    cmp before.jsonl after.jsonl
"""

from __future__ import annotations

import json
import random
import tempfile
from dataclasses import replace
from pathlib import Path

from rollguard.peers.sim import (
    VirtualClock,
    default_settings,
    rack_cluster,
    random_cluster,
    run_roll,
)


def dump(name, cluster, settings):
    with tempfile.TemporaryDirectory() as d:
        out = run_roll(cluster, Path(d), settings)
        ev = [json.loads(line) for line in (Path(d) / "events.jsonl").read_text().splitlines()]
        for e in ev:
            e.pop("ts", None)
        j = json.loads((Path(d) / "roll-sim.json").read_text())

        def scrub(o):
            if isinstance(o, dict):
                return {
                    k: scrub(v)
                    for k, v in o.items()
                    if k not in ("at", "startedAt", "updatedAt", "started")
                }
            if isinstance(o, list):
                return [scrub(x) for x in o]
            return o

        print(
            json.dumps(
                {
                    "case": name,
                    "outcome": out,
                    "journal": scrub(j),
                    "events": ev,
                    "clock": cluster.clock.now,
                },
                sort_keys=True,
            )
        )


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
    for seed in range(3):  # a broker that does not rejoin in time: the roll fails, naming it
        c = random_cluster(random.Random(seed), VirtualClock(), 4, catch_up=(900.0, 1200.0))
        for sim in c.nodes.values():  # every ISR rejoined only at the end: no progress
            sim.rejoin = dict.fromkeys(sim.rejoin, 1.0)
        dump(f"fails-{seed}", c, replace(default_settings(), safety_wait=120))


if __name__ == "__main__":
    main()

"""The transcript of simulated rolls (rollguard.peers.sim, the virtual clock): for each case,
its outcome, its journal and its events, without wall-clock stamps: one JSON line a case. Two
trees' transcripts compared show whether a change to the roll changed what it does, records
or says (issue 39's refactor: identical).

    .venv/bin/python bench/roll_transcript.py > after.jsonl
    # in a worktree of the commit before, with its sources first on PYTHONPATH:
    PYTHONPATH=<old>/roller/src:<old>/shared/src:<old>/tests/peers/src \
        .venv/bin/python bench/roll_transcript.py > before.jsonl
    cmp before.jsonl after.jsonl
    # across the journal's version 1 -> 2 (issue 51: each node's record), outcomes, events
    # and the virtual clock compared as they are, the journals by what version 1 recorded:
    .venv/bin/python bench/roll_transcript.py compare before.jsonl after.jsonl
"""

from __future__ import annotations

import json
import random
import sys
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
from rollguard.roller.roll.node.record import Phase
from rollguard.roller.roll.stores.journal import V1_STATUSES


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


def same_node(old, new):
    """A version-1 node (its status, read as the journal reads it: `V1_STATUSES`) against its
    version-2 record: the same restart or live step on record, the same instance and batch, and
    the same phase, or further on its way back when version 1 said only that it began."""
    phase, how = V1_STATUSES[old["status"]]
    now = new.get("phase")
    on_its_way = phase in (Phase.RESTARTING, Phase.CONFIGURING) and now not in ("done", "failed")
    return (
        (how.value if how else None) == new.get("how")
        and (now == phase.value or on_its_way)
        and (old.get("instance"), old.get("batch")) == (new.get("instance"), new.get("batch"))
    )


def compare(before_path, after_path):
    """Each case: outcome, events and clock the same? the journal the same, or (version 1
    against 2) every node version 1 recorded the same status, instance and batch, and the
    roll's state and reason the same? Exit 1 on any difference."""
    before = [json.loads(line) for line in Path(before_path).read_text().splitlines()]
    after = [json.loads(line) for line in Path(after_path).read_text().splitlines()]
    differ = len(before) != len(after)
    for old, new in zip(before, after, strict=False):
        found = [k for k in ("case", "outcome", "events", "clock") if old[k] != new[k]]
        jo, jn = old["journal"], new["journal"]
        if jo != jn and (jo.get("version"), jn.get("version")) == (1, 2):
            found += [k for k in ("rollId", "state", "reason") if jo[k] != jn[k]]
            for name, record in jo["nodes"].items():
                if not same_node(record, jn["nodes"].get(name, {})):
                    found.append(f"journal {name}")
            extra = len(jn["nodes"]) - len(jo["nodes"])
            journal = f"version 1 -> 2 (+{extra} nodes recorded)"
        else:
            journal = "the same" if jo == jn else "differs"
            found += [] if jo == jn else ["journal"]
        events = len(new["events"])
        print(f"{old['case']:16} {events:5} events  journal {journal}  {found or 'same'}")
        differ = differ or bool(found)
    return 1 if differ else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["compare"]:
        sys.exit(compare(*sys.argv[2:4]))
    main()

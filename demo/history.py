"""A simulated past for the demo's agents: days of timeline records, written into each agent's
--data-dir before it starts, so that the report at the end of `make demo` has a fleet's worth
of recoveries to show beside the one the demo's roll causes.

The records follow the agent's rules (a record on every change, a heartbeat every 300 s while
RUNNING, `seq` continuing across boots, a new bootId per agent start) and the journal's file
format; the agent then serves them like its own and `rollguard collect` pulls them for real.
"""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

from rollguard.shared.timeline import PREFIX, SUFFIX, TimelineRecord

HEARTBEAT_MS = 300_000


def seed(folder: Path, node: str, *, days: float, end_ms: int, rng: random.Random) -> int:
    """Write the history; returns how many records. Node speed varies per node."""
    speed = rng.uniform(0.4, 2.5)  # this node's disks: segments per second, relative
    records: list[TimelineRecord] = []
    ts = end_ms - int(days * 86_400_000)
    seq = 0

    def add(boot: str, state: int | None, logs: int | None = None, segs: int | None = None) -> None:
        nonlocal seq
        seq += 1
        records.append(TimelineRecord(node, boot, seq, ts, state, logs, segs))

    while True:
        boot = uuid.UUID(int=rng.getrandbits(128)).hex
        add(boot, 1)
        ts += rng.randint(2_000, 8_000)
        if rng.random() < 0.7:  # an unclean shutdown before: log recovery
            logs = rng.randint(20, 400)
            segs = rng.randint(2_000, 40_000)
            rate = speed * rng.uniform(20, 60)
            add(boot, 2)  # gauges not registered yet: no counters
            left = segs
            interrupted = rng.random() < 0.08
            while left > 0:
                if rng.random() < 0.03:
                    ts += rng.randint(60_000, 400_000)  # a stall: nothing changes
                    add(boot, 2, max(1, logs * left // segs), left)
                step = rng.randint(5_000, 15_000)
                ts += step
                left = max(0, left - int(rate * step / 1000 * rng.uniform(0.6, 1.4)))
                if left:
                    add(boot, 2, max(1, logs * left // segs), left)
                if interrupted and left < segs // 2:
                    break  # restarted in the middle of its recovery
            if interrupted:
                ts += 3_000
                add(boot, None)  # the broker went away
                continue
            ts += 1_000
        add(boot, 3)
        uptime = rng.randint(3_600_000, 12 * 3_600_000)
        while uptime > 0 and ts + HEARTBEAT_MS < end_ms:
            ts += HEARTBEAT_MS
            uptime -= HEARTBEAT_MS
            add(boot, 3)
        if ts + HEARTBEAT_MS >= end_ms:
            break
        ts += HEARTBEAT_MS // 2
        add(boot, 7)  # shut down for maintenance
        ts += 20_000
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r.to_wire(), separators=(",", ":")) for r in records]
    path = folder / f"{PREFIX}{1:020d}{SUFFIX}"
    path.write_text("\n".join(lines) + "\n")
    return len(records)

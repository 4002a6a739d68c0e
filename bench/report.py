"""The recovery report's Spark job against a DuckDB reference: same tables, and how fast.

    .venv/bin/python bench/report.py --quick          # 100k records, 1 run
    .venv/bin/python bench/report.py --check          # edge cases: Spark = DuckDB = expected
    .venv/bin/python bench/report.py [--sizes 1000000,10000000] [--runs 3] [--seed 1]

A generated dataset per size (cached in /tmp/benchreport/<records>-<seed>/, reused when there):
agents' timelines of nodes in three clusters over --days days, as `rollguard collect` lays them
out. Each agent appends a record when the broker state or a counter changes and a heartbeat
every 300 s otherwise. A node runs for hours (RUNNING heartbeats), then is restarted by a roll
(states 6, 7, a lost sample, a new agent boot), crashes (a lost sample, then the same or a new
boot) or has only its agent restarted. A broker boot is STARTING for seconds and then, often,
in RECOVERY: counters (logs 1..2000, segments 100..200000) fall at the node's own rate with
random stalls, one record a second while they change; sometimes missing at first, sometimes
lost on one record. Some recoveries are interrupted (a lost sample; SHUTTING_DOWN and
NOT_RUNNING; or the agent gone too), some by a roller's restart, and some still run when the
data ends. Rolls log a restart before a node's recovery and wait-recovery/defer/ready events
during it. Rare journal resets (at an agent start) and seq gaps, 0.1 % duplicate records, rows
shuffled within files.

Per size, alternating, --runs times: `rollguard.spark.job.run` (tables, summary, report) in one
local session started once, the episodes table alone in Spark, and `report_duckdb.compute`. Every
table is compared (rows matched on keys, floats to a relative 1e-9); a difference fails the
benchmark (exit 1). Prints the medians and writes /tmp/benchreport/results-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from report_duckdb import compute

from rollguard.roller.collect import EVENTS_SCHEMA, TIMELINE_SCHEMA
from rollguard.shared.dataset import CANARY_COLUMNS, Event

WORK = Path("/tmp/benchreport")
GENERATOR_VERSION = 5  # 4: rolls start and end with the roller's own events; 5: canary columns
EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY_MS = 86_400_000
SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
HEARTBEAT = 300 * SECOND
NULL = -1  # null state or counter in the generator's int arrays
NOT_RUNNING, STARTING, RECOVERY, RUNNING, PENDING_SHUTDOWN, SHUTTING_DOWN = 0, 1, 2, 3, 6, 7
CLUSTERS = ("kafka-a", "kafka-b", "kafka-c")
FILES_PER_PARTITION = 2
REL_TOL = 1e-9

KEYS = {
    "episodes": ("cluster", "node", "episode"),
    "nodes": ("cluster", "node"),
    "clusters": ("cluster",),
    "eta": ("cluster", "node", "episode", "progressPercent"),
    "eta_summary": ("cluster", "progressPercent"),
    "daily": ("cluster", "day"),
    "rolls": ("cluster", "rollId"),
    "roll_phases": ("cluster", "rollId", "node", "run"),
}

Tables = dict[str, list[dict[str, Any]]]


# --- writing a dataset -------------------------------------------------------------------------


def _int_column(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    """`NULL` entries become nulls."""
    return pa.array(values, type=kind, mask=values == NULL)


def _date(day: int) -> str:
    return (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=day)).strftime("%Y-%m-%d")


def write_partitioned(
    folder: Path, table: pa.Table, clusters: np.ndarray, rng: np.random.Generator
) -> None:
    """`table` (with a `ts` column) as folder/cluster=<c>/date=<UTC date>/part-<i>.parquet:
    rows spread over FILES_PER_PARTITION files, shuffled within each."""
    days = (table.column("ts").to_numpy() - EPOCH_MS) // DAY_MS
    files = rng.integers(0, FILES_PER_PARTITION, len(days))
    order = np.lexsort((rng.random(len(days)), files, days, clusters))
    table = table.take(pa.array(order))
    keys = np.stack([clusters[order], days[order], files[order]])
    bounds = np.flatnonzero(np.any(keys[:, 1:] != keys[:, :-1], axis=0)) + 1
    for lo, hi in zip(
        np.concatenate(([0], bounds)), np.concatenate((bounds, [len(order)])), strict=True
    ):
        cluster, day, file = keys[:, lo]
        part = folder / f"cluster={CLUSTERS[cluster]}" / f"date={_date(int(day))}"
        part.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.slice(lo, hi - lo), part / f"part-{file}.parquet", compression="zstd")


# --- the generator -----------------------------------------------------------------------------


class _Node:
    """One node's records in the agent's order, as numpy chunks: ts, state, logs, segs, boot."""

    def __init__(self, rng: np.random.Generator, boots: list[str]) -> None:
        self.rng = rng
        self.boots = boots
        self.chunks: list[tuple[np.ndarray, ...]] = []
        self.boot = self.new_boot()

    def new_boot(self) -> int:
        self.boots.append(self.rng.bytes(16).hex())
        self.boot = len(self.boots) - 1
        return self.boot

    def add(self, ts: np.ndarray, state: int, logs: np.ndarray, segs: np.ndarray) -> None:
        n = len(ts)
        self.chunks.append(
            (ts, np.full(n, state, np.int32), logs, segs, np.full(n, self.boot, np.int32))
        )

    def point(self, ts: int, state: int) -> None:
        none = np.full(1, NULL, np.int32)
        self.add(np.array([ts], np.int64), state, none, none)

    def steady(self, t0: int, t1: int, state: int) -> None:
        """A record at t0, then a heartbeat every 300 s (plus the sampling delay) before t1."""
        n = max(1, (t1 - t0 - 1) // HEARTBEAT + 1)
        ts = t0 + np.arange(n, dtype=np.int64) * HEARTBEAT
        ts[1:] += self.rng.integers(0, SECOND, n - 1)
        none = np.full(n, NULL, np.int32)
        self.add(ts, state, none, none)

    def arrays(self) -> tuple[np.ndarray, ...]:
        return tuple(np.concatenate(column) for column in zip(*self.chunks, strict=True))


def recovery_samples(
    rng: np.random.Generator, segments: int, logs: int, rate: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """A recovery's records from its first counters, as the agent writes them: milliseconds
    since the first, logs, segments (each a change, or a heartbeat in a stall), and the
    milliseconds to completion. Sampled each second; segments fall by a noisy `rate` a second;
    stalls of 1 to 15 minutes pause the fall now and then."""
    n = int(segments / rate * 1.5) + 8
    while True:
        left = segments - np.floor(np.cumsum(rate * rng.gamma(4.0, 0.25, n))).astype(np.int64)
        if left[-1] <= 0:
            break
        n *= 2
    done = int(np.argmax(left <= 0)) + 1  # samples 0..done-1 are in RECOVERY
    values = np.concatenate(([segments], left[: done - 1]))
    pause = np.zeros(done + 1, np.int64)
    stalls = rng.poisson(done / 1800 + 0.3)
    np.add.at(pause, rng.integers(1, done + 1, stalls), rng.integers(60, 900, stalls))
    seconds = np.arange(done + 1) + np.cumsum(pause)
    changed = np.concatenate(([True], values[1:] != values[:-1]))
    ts = seconds[:done][changed] * SECOND + rng.integers(0, 40, int(changed.sum()))
    segs = values[changed]
    gaps = np.diff(ts)
    beats = np.maximum(0, (gaps - 1) // HEARTBEAT)
    if beats.any():  # heartbeats in stalls: repeat the previous values every 300 s
        owner = np.repeat(np.arange(len(gaps)), beats)
        nth = np.arange(len(owner)) - np.repeat(np.cumsum(beats) - beats, beats) + 1
        order = np.argsort(np.concatenate((ts, ts[owner] + nth * HEARTBEAT)), kind="stable")
        ts = np.concatenate((ts, ts[owner] + nth * HEARTBEAT))[order]
        segs = np.concatenate((segs, segs[owner]))[order]
    remaining_logs = np.maximum(1, np.ceil(logs * segs / segments)).astype(np.int32)
    return ts, remaining_logs, segs.astype(np.int32), int(seconds[done]) * SECOND


class Generator:
    """Timelines and roller events of nodes in CLUSTERS from EPOCH_MS over `days` days."""

    def __init__(self, seed: int, days: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.end = EPOCH_MS + days * DAY_MS
        self.boots: list[str] = []
        self.events: list[tuple[int, int, str, int, str, str]] = []  # ts cluster roll node ...

    def roll_id(self, cluster: int, ts: int, other: int = 0) -> str:
        """Rolls of a cluster start every 8 hours; `other` names a later, overlapping one."""
        return f"{CLUSTERS[cluster]}-roll-{(ts - EPOCH_MS) // (8 * HOUR) + other:03d}"

    def event(self, ts: int, cluster: int, roll: str, node: int, action: str, reason: str) -> None:
        self.events.append((ts, cluster, roll, node, action, reason))

    def node(self, cluster: int, index: int, ends_recovering: bool) -> tuple[np.ndarray, ...]:
        """Records of one node: ts, state, logs, segs, boot (indexes in self.boots)."""
        rng, n = self.rng, _Node(self.rng, self.boots)
        rate = float(np.clip(rng.lognormal(np.log(150), 0.7), 10, 3000))
        t = EPOCH_MS + int(rng.integers(0, HEARTBEAT))
        p_recovery = 0.0
        while t < self.end:
            if p_recovery == 0.0:  # RUNNING until a restart
                run = HOUR + int(rng.exponential(30 * HOUR))
                forced = ends_recovering and t + run >= self.end - 10 * MINUTE
                if forced:
                    ends_recovering = False
                    run = max(MINUTE, self.end - t - int(rng.integers(5, 40)) * MINUTE)
                n.steady(t, min(t + run, self.end), RUNNING)
                t += run
                if t >= self.end:
                    break
                kind = (
                    "crash" if forced else rng.choice(["roll", "crash", "agent"], p=[0.6, 0.3, 0.1])
                )
                if kind == "agent":  # only the agent restarted: a new boot, still RUNNING
                    n.new_boot()
                    t += int(rng.integers(5, 30)) * SECOND
                    continue
                if kind == "roll":
                    self.event(t, cluster, self.roll_id(cluster, t), index, Event.RESTART, "roll")
                    t += int(rng.integers(500, 3000))
                    n.point(t, PENDING_SHUTDOWN)
                    t += int(rng.integers(5, 30)) * SECOND
                    n.point(t, SHUTTING_DOWN)
                    t += int(rng.integers(1, 5)) * SECOND
                    n.point(t, NULL)
                    p_recovery = 0.3
                else:
                    n.point(t, NULL)
                    p_recovery = 1.0 if forced else 0.85
                if kind == "roll" or rng.random() < 0.5:
                    n.new_boot()
                t += int(rng.integers(10, 60)) * SECOND
            # A broker boot: maybe not readable at first, STARTING, then RECOVERY or RUNNING.
            if rng.random() < 0.5:
                n.point(t, NULL)
                t += int(rng.integers(1, 10)) * SECOND
            n.point(t, STARTING)
            t += int(rng.integers(2, 20)) * SECOND
            if rng.random() >= p_recovery:
                p_recovery = 0.0
                continue
            t, p_recovery = self.recovery(n, cluster, index, t, rate)
        ts, state, logs, segs, boot = n.arrays()
        keep = ts < self.end
        ts = ts[keep] + int(rng.normal(0, 1500))  # the node's clock is a little off
        return ts, state[keep], logs[keep], segs[keep], boot[keep]

    def recovery(
        self, n: _Node, cluster: int, index: int, t: int, rate: float
    ) -> tuple[int, float]:
        """A recovery from t: its records, roll events; the time after it and the chance of a
        recovery at the next boot (0: it completed, the node is RUNNING)."""
        rng = self.rng
        begin = t
        if rng.random() < 0.25:  # RECOVERY before the counters are registered
            n.point(t, RECOVERY)
            t += int(rng.integers(1, 5)) * SECOND
        segments = int(np.exp(rng.uniform(np.log(100), np.log(200_000))))
        logs = min(segments, int(rng.integers(1, 2001)))
        offsets, remaining_logs, segs, duration = recovery_samples(rng, segments, logs, rate)
        ts = t + offsets
        if len(ts) > 2 and rng.random() < 0.05:  # one sample without counters
            k = int(rng.integers(1, len(ts)))
            remaining_logs[k] = segs[k] = NULL
        finish = t + duration
        cut = finish if rng.random() >= 0.08 else int(rng.integers(t, finish))
        keep = ts < cut
        n.add(ts[keep], RECOVERY, remaining_logs[keep], segs[keep])
        self.roll_waits(cluster, index, begin, cut)
        if cut == finish:
            if rng.random() < 0.5:
                self.event(
                    finish + 2 * SECOND,
                    cluster,
                    self.roll_id(cluster, finish),
                    index,
                    Event.READY,
                    "running",
                )
            return finish, 0.0
        how = rng.choice(["lost", "shutdown", "gone"], p=[0.5, 0.3, 0.2])
        if rng.random() < 0.3:  # a roller that does not know better restarts it
            self.event(
                cut - int(rng.integers(1, 5)) * SECOND,
                cluster,
                self.roll_id(cluster, cut),
                index,
                Event.RESTART,
                "timeout",
            )
        if how == "shutdown":
            n.point(cut, SHUTTING_DOWN)
            cut += int(rng.integers(1, 10)) * SECOND
            n.point(cut, NOT_RUNNING)
            cut += int(rng.integers(1, 3)) * SECOND
        if how != "gone":
            n.point(cut, NULL)
        n.new_boot()
        return cut + int(rng.integers(20, 120)) * SECOND, 0.9

    def roll_waits(self, cluster: int, index: int, begin: int, end: int) -> None:
        """Rolls that find the node recovering wait (every 30 s), or defer it."""
        rng = self.rng
        for other in range(int(rng.choice(3, p=[0.5, 0.35, 0.15]))):
            first = int(rng.integers(begin, end + 1))
            roll = self.roll_id(cluster, first, other)
            waits = np.arange(first, end + 30 * SECOND, 30 * SECOND)
            self.events.extend(
                (int(w), cluster, roll, index, Event.WAIT_RECOVERY, "in recovery") for w in waits
            )
            if rng.random() < 0.2:
                self.event(first + SECOND, cluster, roll, index, Event.DEFER, "recovering")


def generate(records: int, seed: int, days: int, folder: Path) -> dict[str, Any]:
    """A dataset of about `records` timeline records (whole nodes, so a few more)."""
    started = time.monotonic()
    g = Generator(seed, days)
    rng = g.rng
    columns: list[tuple[np.ndarray, ...]] = []
    total = nodes = 0
    while total < records:
        cluster, index = nodes % len(CLUSTERS), nodes // len(CLUSTERS)
        ends_recovering = index == 0 or rng.random() < 0.03
        ts, state, logs, segs, boot = g.node(cluster, index, ends_recovering)
        seq = np.arange(1, len(ts) + 1, dtype=np.int64)
        journal = np.zeros(len(ts), np.int32)
        boots = np.flatnonzero(boot[1:] != boot[:-1]) + 1
        if len(boots) and rng.random() < 0.01:  # the agent lost its journal: seq starts again
            k = int(rng.choice(boots))
            journal[k:], seq[k:] = 1, seq[k:] - k
        keep = np.ones(len(ts), bool)
        if rng.random() < 0.05:  # records expired before they were collected: in a recovery
            recovering = np.flatnonzero(state[1:] == RECOVERY) + 1
            k = int(rng.choice(recovering if len(recovering) else np.arange(1, len(ts))))
            keep[k : k + int(rng.integers(1, 50))] = False
        node = np.full(len(ts), nodes, np.int32)
        columns.append(tuple(c[keep] for c in (node, journal, boot, seq, ts, state, logs, segs)))
        total += int(keep.sum())
        nodes += 1
    node, journal, boot, seq, ts, state, logs, segs = (
        np.concatenate(c) for c in zip(*columns, strict=True)
    )
    twice = np.ones(len(ts), np.int64) + (rng.random(len(ts)) < 0.001)
    node, journal, boot, seq, ts, state, logs, segs = (
        np.repeat(c, twice) for c in (node, journal, boot, seq, ts, state, logs, segs)
    )
    names = pa.array([f"kafka-{i // len(CLUSTERS)}" for i in range(nodes)])
    ids = pa.array([str(i // len(CLUSTERS)) for i in range(nodes)])
    timeline = pa.Table.from_arrays(
        [
            names.take(pa.array(node)),
            ids.take(pa.array(node)),
            pa.array(journal),
            pa.array(g.boots).take(pa.array(boot)),
            pa.array(seq),
            pa.array(ts),
            _int_column(state, pa.int32()),
            _int_column(logs, pa.int32()),
            _int_column(segs, pa.int32()),
            pa.nulls(len(seq), pa.string()),  # recoveryPhase: as an older agent's records
        ],
        schema=TIMELINE_SCHEMA,
    )
    generated = time.monotonic() - started
    if folder.exists():
        shutil.rmtree(folder)
    write_partitioned(folder / "timeline", timeline, node % len(CLUSTERS), rng)
    events, clusters = _events_table(g)
    write_partitioned(folder / "events", events, clusters, rng)
    info = {
        "version": GENERATOR_VERSION,
        "records": len(timeline),
        "nodes": nodes,
        "events": len(events),
        "days": days,
        "seed": seed,
        "generateSeconds": round(generated, 2),
        "totalSeconds": round(time.monotonic() - started, 2),
        "bytesOnDisk": sum(p.stat().st_size for p in folder.rglob("*.parquet")),
    }
    (folder / "generated.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def _events_table(g: Generator) -> tuple[pa.Table, np.ndarray]:
    """The roller's events, plus each roll's own start and end (no node)."""
    rows = list(g.events)
    span: dict[tuple[int, str], tuple[int, int]] = {}
    for at, cluster, roll, _, _, _ in rows:
        lo, hi = span.get((cluster, roll), (at, at))
        span[cluster, roll] = (min(lo, at), max(hi, at))
    predicted: dict[tuple[int, str], float] = {}
    for (cluster, roll), (lo, hi) in span.items():
        rows.append((lo - SECOND, cluster, roll, NULL, Event.ROLL_START, ""))
        rows.append((hi + SECOND, cluster, roll, NULL, Event.ROLL_COMPLETED, ""))
        if zlib.crc32(roll.encode()) % 2:  # half the rolls had an expectations file
            rows.append((lo - SECOND, cluster, roll, NULL, Event.ROLL_PREDICTED, ""))
            predicted[cluster, roll] = round((hi - lo) / SECOND * 0.9, 1)
    rows = [r for r in rows if r[0] < g.end]
    ts, clusters, rolls, nodes, actions, reasons = zip(*rows, strict=True)
    figures = [
        predicted.get((c, r)) if a == Event.ROLL_PREDICTED else None
        for c, r, a in zip(clusters, rolls, actions, strict=True)
    ]
    table = pa.Table.from_arrays(
        [
            pa.array(ts, pa.int64()),
            pa.array(rolls),
            pa.array([None if n == NULL else f"kafka-{n}" for n in nodes], pa.string()),
            pa.array(actions),
            pa.array(reasons),
            pa.array(figures, pa.float64()),
            *no_canary(len(ts)),
        ],
        schema=EVENTS_SCHEMA,
    )
    return table, np.array(clusters)


def no_canary(rows: int) -> list[pa.Array]:
    """The canary's columns of events that carry none (every event generated here)."""
    return [pa.nulls(rows, EVENTS_SCHEMA.field(c.name).type) for c in CANARY_COLUMNS]


def dataset(records: int, seed: int, days: int) -> tuple[Path, dict[str, Any]]:
    """The cached dataset for (records, seed), generated when missing or outdated."""
    folder = WORK / f"{records}-{seed}"
    marker = folder / "generated.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        if info["version"] == GENERATOR_VERSION and info["days"] == days:
            return folder, info | {"cached": True}
    return folder, generate(records, seed, days, folder) | {"cached": False}


# --- comparing ---------------------------------------------------------------------------------


def spark_tables(out: Path) -> Tables:
    """The job's Parquet tables as row dicts, structs flattened (`eta25.sampleTs`, ...)."""
    return {name: pq.read_table(out / name).flatten().to_pylist() for name in KEYS}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=REL_TOL)
    return type(a) is type(b) and a == b


def differences(duck: Tables, spark: Tables, limit: int = 20) -> list[str]:
    """What differs between the two sets of tables: columns, rows (by key), values."""
    found: list[str] = []
    for name, key in KEYS.items():
        by_key = []
        for rows in (duck[name], spark[name]):
            keyed = {tuple(r[k] for k in key): r for r in rows}
            if len(keyed) != len(rows):
                found.append(f"{name}: {len(rows) - len(keyed)} duplicate keys")
            by_key.append(keyed)
        d, s = by_key
        if duck[name] and spark[name] and list(duck[name][0]) != list(spark[name][0]):
            found.append(f"{name}: columns {list(duck[name][0])} != {list(spark[name][0])}")
            continue
        found += [f"{name} {k}: only in DuckDB" for k in sorted(d.keys() - s.keys())]
        found += [f"{name} {k}: only in Spark" for k in sorted(s.keys() - d.keys())]
        for k in sorted(d.keys() & s.keys()):
            found += [
                f"{name} {k} {column}: DuckDB {value!r}, Spark {s[k][column]!r}"
                for column, value in d[k].items()
                if not _same(value, s[k][column])
            ]
    return found[:limit] + ([f"... {len(found) - limit} more"] if len(found) > limit else [])


# --- the benchmark -----------------------------------------------------------------------------


def _timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.monotonic()
    value = action()
    return time.monotonic() - started, value


def _fail(title: str, found: Sequence[str]) -> None:
    print(f"FAILED: {title}", file=sys.stderr)
    for line in found:
        print(f"  {line}", file=sys.stderr)
    sys.exit(1)


def benchmark(
    spark: Any, sizes: Sequence[int], runs: int, seed: int, days: int
) -> list[dict[str, Any]]:
    """Per size: generation (or the cached dataset), then the timed runs, alternating."""
    from rollguard.spark import episodes as ep
    from rollguard.spark import job

    results = []
    for size in sizes:
        folder, info = dataset(size, seed, days)
        print(
            f"{size:,} records: {folder} ({'cached' if info['cached'] else 'generated'} "
            f"{info['records']:,} records, {info['nodes']} nodes, {info['bytesOnDisk']:,} bytes, "
            f"generation {info['totalSeconds']} s)",
            flush=True,
        )
        out, episodes_only = WORK / f"spark-{size}-{seed}", WORK / f"episodes-{size}-{seed}"

        def spark_run(folder: Path = folder, out: Path = out) -> None:
            job.run(spark, folder, out)

        def spark_episodes(folder: Path = folder, target: Path = episodes_only) -> None:
            timeline, events = job.read_inputs(spark, job.find_inputs(folder))
            ep.episodes(timeline, events).write.mode("overwrite").parquet(str(target))

        def duck_run(folder: Path = folder) -> Tables:
            return compute(folder)

        steps: list[tuple[str, Callable[[], Any]]] = [
            ("spark", spark_run),
            ("sparkEpisodes", spark_episodes),
            ("duckdb", duck_run),
        ]
        seconds: dict[str, list[float]] = {name: [] for name, _ in steps}
        for run in range(runs):
            tables: dict[str, Any] = {}
            for name, step in steps if run % 2 == 0 else steps[::-1]:
                elapsed, tables[name] = _timed(step)
                seconds[name].append(round(elapsed, 3))
            found = differences(tables["duckdb"], spark_tables(out))
            if found:
                _fail(f"Spark and DuckDB differ on {folder}", found)
            print(
                f"  run {run + 1}: "
                + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in seconds.items())
                + " (tables match)",
                flush=True,
            )
        medians = {name: statistics.median(v) for name, v in seconds.items()}
        results.append(
            {
                "size": size,
                "dataset": str(folder),
                **{k: info[k] for k in ("records", "nodes", "events", "days", "bytesOnDisk")},
                "generateSeconds": info["totalSeconds"],
                "cachedDataset": info["cached"],
                "rows": {name: len(rows) for name, rows in tables["duckdb"].items()},
                "seconds": seconds,
                "medianSeconds": medians,
                "sparkOverDuckdb": round(medians["spark"] / medians["duckdb"], 2),
                "matched": True,
            }
        )
    return results


def print_table(startup: float, results: Iterable[dict[str, Any]]) -> None:
    print(f"\nSpark session start-up: {startup:.1f} s (not in the figures)")
    header = ("records", "Spark run s", "Spark episodes s", "DuckDB s", "Spark/DuckDB")
    print("{:>12} {:>12} {:>17} {:>9} {:>13}".format(*header))
    for r in results:
        m = r["medianSeconds"]
        print(
            f"{r['records']:>12,} {m['spark']:>12.2f} {m['sparkEpisodes']:>17.2f} "
            f"{m['duckdb']:>9.2f} {r['sparkOverDuckdb']:>13.1f}"
        )


# --- the self-check: edge cases, with the values the definitions give ------------------------

CHECK_T0 = EPOCH_MS + 23 * HOUR + 50 * MINUTE  # episodes cross midnight: two date partitions
FRACTIONS = (25, 50, 75)
TIMES = {"start", "end"} | {f"eta{p}.{f}" for p in FRACTIONS for f in ("sampleTs", "predicted")}
# (cluster, node) -> records (seq, seconds after CHECK_T0, state, logs, segs, boot, journal,
# and optionally recoveryPhase); a record listed twice is a duplicate.
CHECK_TIMELINES: dict[tuple[str, str], list[tuple[Any, ...]]] = {
    ("kafka-a", "kafka-0"): [  # a roll's restart, then a recovery with a stall
        (1, 0, 3, None, None, "a", 0),
        (2, 300, 3, None, None, "a", 0),
        (3, 400, 6, None, None, "a", 0),
        (4, 410, 7, None, None, "a", 0),
        (5, 415, None, None, None, "a", 0),
        (6, 440, None, None, None, "b", 0),
        (7, 445, 1, None, None, "b", 0),
        (8, 450, 2, None, None, "b", 0),  # counters not there yet
        (9, 452, 2, 10, 1000, "b", 0),
        (10, 453, 2, 8, 800, "b", 0),
        (10, 453, 2, 8, 800, "b", 0),
        (11, 753, 2, 8, 800, "b", 0),  # a heartbeat in a stall
        (12, 840, 2, 5, 500, "b", 0),
        (13, 841, 2, 9, 900, "b", 0),  # more to do: not progress
        (14, 842, 2, 2, 200, "b", 0),
        (15, 843, 3, None, None, "b", 0),
        (15, 843, 3, None, None, "b", 0),
        (16, 1143, 3, None, None, "b", 0),
    ],
    ("kafka-a", "kafka-1"): [  # interrupted three ways, completed by PENDING_CONTROLLED_SHUTDOWN
        (1, 0, 3, None, None, "c", 0),
        (2, 10, 2, 50, 5000, "c", 0),
        (2, 10, 2, 50, 5000, "c", 0),
        (3, 11, 2, 40, 4000, "c", 0),
        (4, 12, None, None, None, "c", 0),  # a lost sample
        (5, 60, 1, None, None, "d", 0),
        (6, 62, 2, 40, 4000, "d", 0),
        (7, 63, 2, 40, 3000, "d", 0),
        (8, 64, 0, None, None, "d", 0),  # NOT_RUNNING
        (9, 70, 2, 30, 3000, "d", 0),
        (10, 71, 2, 20, 2000, "d", 0),
        (11, 72, 6, None, None, "d", 0),
        (12, 73, 7, None, None, "d", 0),
        (13, 80, 2, 20, 2000, "e", 0),
        (14, 81, 2, 10, 1000, "e", 0),
        (15, 200, 1, None, None, "f", 0),  # a later boot
        (16, 201, 3, None, None, "f", 0),
    ],
    ("kafka-a", "kafka-2"): [  # seq gaps; a recovery still running when the data ends
        (1, 0, 3, None, None, "g", 0),
        (5, 10, 2, 5, 500, "g", 0),
        (6, 11, 2, 5, 400, "g", 0),
        (12, 20, 2, 5, 300, "g", 0),
        (15, 30, 3, None, None, "g", 0),
        (16, 330, 3, None, None, "g", 0),
        (17, 400, 2, None, None, "g", 0),
        (18, 401, 2, 7, None, "g", 0),  # logs without segments: not counters yet
        (19, 403, 2, 7, 700, "g", 0),
        (20, 404, 2, 6, 600, "g", 0),
    ],
    ("kafka-a", "kafka-3"): [  # a journal reset; a clock stepping back
        (1, 0, 3, None, None, "h", 0),
        (2, 5, 2, 3, 300, "h", 0),
        (3, 6, 2, 2, 200, "h", 0),
        (1, 7, 2, 1, 100, "h", 1),
        (2, 9, 3, None, None, "h", 1),
        (3, 100, 2, 4, 400, "i", 1),
        (4, 90, 2, 4, 300, "i", 1),
        (5, 95, 3, None, None, "i", 1),
    ],
    ("kafka-b", "kafka-0"): [  # first record in RECOVERY, no progress, still running
        (1, 0, 2, 1, 100, "j", 0),
        (2, 2, 2, 1, 100, "j", 0),
        (3, 5, 2, 1, 100, "j", 0),
    ],
    ("kafka-b", "kafka-1"): [(1, 0, 3, None, None, "k", 0), (2, 300, 3, None, None, "k", 0)],
    ("kafka-c", "kafka-0"): [  # a recovery in STARTING, over in RECOVERY without figures
        (1, 0, 1, None, None, "m", 0, "none"),
        (2, 1, 1, 10, 1000, "m", 0, "recovering"),
        (3, 2, 1, 5, 500, "m", 0, "recovering"),
        (4, 3, 2, None, None, "m", 0, "none"),  # logs loaded, waiting to be unfenced: completed
        (5, 4, 3, None, None, "m", 0, "none"),
    ],
    ("kafka-c", "kafka-1"): [  # a clean start's loading: no episode; then a loading that recovers
        (1, 0, 1, None, None, "n", 0),
        (2, 1, 1, 20, 0, "n", 0, "loading"),
        (3, 2, 2, 10, 0, "n", 0, "loading"),
        (4, 3, 3, None, None, "n", 0),
        (5, 100, 1, None, None, "n", 0),
        (6, 101, 1, 30, 0, "n", 0, "loading"),
        (7, 102, 2, 30, 300, "n", 0, "recovering"),
        (8, 103, 2, 20, 200, "n", 0, "recovering"),
        (9, 104, 3, None, None, "n", 0),
    ],
    ("kafka-c", "kafka-2"): [  # an older agent's record in STARTING with figures (no phase)
        (1, 0, 1, None, None, "p", 0),
        (2, 1, 1, 4, 40, "p", 0),
        (3, 2, 0, None, None, "p", 0),
    ],
    ("kafka-c", "kafka-3"): [  # a Kafka 4.x clean start, as a phase-aware agent records it
        (1, 0, 0, None, None, "q", 0, "none"),
        (2, 1, 1, 13, 0, "q", 0, "loading"),
        (3, 2, 1, 5, 0, "q", 0, "loading"),
        (4, 3, 1, None, None, "q", 0, "none"),  # loaded; the old registration not expired yet
        (5, 12, 2, None, None, "q", 0, "none"),  # RECOVERY without figures: no episode
        (6, 13, 3, None, None, "q", 0, "none"),
    ],
    ("kafka-c", "kafka-4"): [  # a recovery over in STARTING; one stopped before its end
        (1, 0, 1, None, None, "r", 0, "none"),
        (2, 1, 1, 8, 800, "r", 0, "recovering"),
        (3, 3, 1, 4, 400, "r", 0, "recovering"),
        (4, 4, 1, 1, 100, "r", 0, "recovering"),
        (5, 5, 1, None, None, "r", 0, "none"),  # loaded, STARTING until registered: completed
        (6, 17, 2, None, None, "r", 0, "none"),
        (7, 17, 3, None, None, "r", 0, "none"),
        (8, 100, 2, 6, 600, "s", 0, "recovering"),
        (9, 101, 2, 3, 300, "s", 0, "recovering"),
        (10, 102, 7, None, None, "s", 0, "none"),  # SHUTTING_DOWN: "none" completes in 1, 2 only
    ],
}
# (seconds after CHECK_T0, cluster, rollId, node, action)
CHECK_EVENTS: list[tuple[float, str, str, str | None, Event]] = [
    (398, "kafka-a", "r1", "kafka-0", Event.RESTART),  # before the recovery: not during it
    (450, "kafka-a", "r9", "kafka-0", Event.RESTART),  # at its start: during it
    (455, "kafka-a", "r1", None, Event.ROLL_START),
    (455, "kafka-a", "r1", None, Event.ROLL_PREDICTED),  # 60 s (write_check_dataset)
    (460, "kafka-a", "r1", "kafka-0", Event.WAIT_RECOVERY),
    (490, "kafka-a", "r1", "kafka-0", Event.WAIT_RECOVERY),
    (500, "kafka-a", "r1", "kafka-0", Event.DEFER),
    (843, "kafka-a", "r2", "kafka-0", Event.WAIT_RECOVERY),  # at its end: during it
    (844, "kafka-a", "r3", "kafka-0", Event.WAIT_RECOVERY),
    (80.5, "kafka-a", "r4", "kafka-1", Event.RESTART),
    (81.5, "kafka-a", "r4", "kafka-1", Event.RESTART),  # after its last record
    (404, "kafka-a", "r5", "kafka-2", Event.WAIT_RECOVERY),  # at its last record, still running
    (405, "kafka-a", "r6", "kafka-2", Event.WAIT_RECOVERY),
    (3, "kafka-b", "r7", "kafka-0", Event.WAIT_RECOVERY),
    (460, "kafka-b", "r7", "kafka-0", Event.RESTART),  # kafka-0 of the other cluster
    (845, "kafka-a", "r2", "kafka-0", Event.READY),  # rolls: a phase ended by `ready`
    (846, "kafka-a", "r2", None, Event.ROLL_FAILED),
    (846, "kafka-a", "r2", None, Event.ROLL_COMPLETED),  # same time: the greater action name wins
    (501, "kafka-a", "r1", "kafka-0", Event.DEFER),  # the same reason: one deferral
]
# (cluster, node, episode) -> outcome, start, end, firstSeq, lastSeq, records, missingRecords,
# longestStallSeconds, logsAtStart, segmentsAtStart, meanRate, rollerRestarts, skippedRestarts,
# (sampleTs, predicted) at 25, 50, 75 % (times in seconds after CHECK_T0)
# fmt: off
CHECK_EPISODES: dict[tuple[str, str, int], tuple[Any, ...]] = {
    ("kafka-a", "kafka-0", 1): (
        "completed", 450, 843, 8, 15, 7, 0, 387.0, 10, 1000, 1000 / 391, 1, 2,
        (840, 1228), (840, 1228), (842, 939.5),
    ),
    ("kafka-a", "kafka-1", 1): (
        "interrupted", 10, 12, 2, 4, 2, 0, 1.0, 50, 5000, 1000.0, 0, 0, None, None, None,
    ),
    ("kafka-a", "kafka-1", 2): (
        "interrupted", 62, 64, 6, 8, 2, 0, 1.0, 40, 4000, 1000.0, 0, 0, None, None, None,
    ),
    ("kafka-a", "kafka-1", 3): (
        "completed", 70, 72, 9, 11, 2, 0, 1.0, 30, 3000, 1500.0, 0, 0, (71, 73), None, None,
    ),
    ("kafka-a", "kafka-1", 4): (
        "interrupted", 80, 81, 13, 14, 2, 0, 1.0, 20, 2000, 1000.0, 1, 0, None, None, None,
    ),
    ("kafka-a", "kafka-2", 1): (
        "completed", 10, 30, 5, 15, 3, 10, 10.0, 5, 500, 25.0, 0, 0, (20, 35), None, None,
    ),
    ("kafka-a", "kafka-2", 2): (
        "running", 400, None, 17, 20, 4, 0, 4.0, 7, 700, 100.0, 0, 1, None, None, None,
    ),
    ("kafka-a", "kafka-3", 1): (
        "interrupted", 5, 6, 2, 3, 2, 0, 1.0, 3, 300, 100.0, 0, 0, None, None, None,
    ),
    ("kafka-a", "kafka-3", 2): (
        "completed", 7, 9, 1, 2, 1, 0, 2.0, 1, 100, 50.0, 0, 0, None, None, None,
    ),
    ("kafka-a", "kafka-3", 3): (
        "completed", 100, 95, 3, 5, 2, 0, 5.0, 4, 400, None, 0, 0, None, None, None,
    ),
    ("kafka-b", "kafka-0", 1): (
        "running", 0, None, 1, 3, 3, 0, 5.0, 1, 100, 0.0, 0, 1, None, None, None,
    ),
    ("kafka-c", "kafka-0", 1): (
        "completed", 1, 3, 2, 4, 2, 0, 1.0, 10, 1000, 500.0, 0, 0, (2, 3), (2, 3), None,
    ),
    ("kafka-c", "kafka-1", 1): (
        "completed", 102, 104, 7, 9, 2, 0, 1.0, 30, 300, 150.0, 0, 0, (103, 105), None, None,
    ),
    ("kafka-c", "kafka-2", 1): (
        "interrupted", 1, 2, 2, 3, 1, 0, 1.0, 4, 40, None, 0, 0, None, None, None,
    ),
    ("kafka-c", "kafka-4", 1): (
        "completed", 1, 5, 2, 5, 3, 0, 2.0, 8, 800, 200.0, 0, 0, (3, 5), (3, 5), (4, 4 + 3 / 7),
    ),
    ("kafka-c", "kafka-4", 2): (
        "interrupted", 100, 102, 8, 10, 2, 0, 1.0, 6, 600, 300.0, 0, 0, None, None, None,
    ),
}
# fmt: on
# cluster -> episodes, completed, interrupted, running, p50, p90, p99, max, slowestNodes
CHECK_CLUSTERS: dict[str, tuple[Any, ...]] = {
    "kafka-a": (10, 5, 4, 1, 2.0, 243.8, 378.08, 393.0, ["kafka-0", "kafka-2", "kafka-1"]),
    "kafka-b": (1, 0, 0, 1, None, None, None, None, None),
    "kafka-c": (5, 3, 2, 0, 2.0, 3.6, 3.96, 4.0, ["kafka-4", "kafka-0", "kafka-1"]),
}


def write_check_dataset(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    rows = [
        (c, n, *r[:7], r[7] if len(r) > 7 else None)
        for (c, n), records in CHECK_TIMELINES.items()
        for r in records
    ]
    cluster, node, seq, seconds, state, logs, segs, boot, journal, phase = zip(*rows, strict=True)
    timeline = pa.Table.from_arrays(
        [
            pa.array(node),
            pa.array([n.removeprefix("kafka-") for n in node]),
            pa.array(journal, pa.int32()),
            pa.array(boot),
            pa.array(seq, pa.int64()),
            pa.array([CHECK_T0 + s * SECOND for s in seconds], pa.int64()),
            pa.array(state, pa.int32()),
            pa.array(logs, pa.int32()),
            pa.array(segs, pa.int32()),
            pa.array(phase, pa.string()),
        ],
        schema=TIMELINE_SCHEMA,
    )
    rng = np.random.default_rng(0)
    write_partitioned(
        folder / "timeline", timeline, np.array([CLUSTERS.index(c) for c in cluster]), rng
    )
    seconds, cluster, rolls, nodes, actions = zip(*CHECK_EVENTS, strict=True)
    events = pa.Table.from_arrays(
        [
            pa.array([CHECK_T0 + round(s * SECOND) for s in seconds], pa.int64()),
            pa.array(rolls),
            pa.array(nodes, pa.string()),
            pa.array(actions),
            pa.array(["check"] * len(actions)),
            pa.array([60.0 if a == Event.ROLL_PREDICTED else None for a in actions], pa.float64()),
            *no_canary(len(actions)),
        ],
        schema=EVENTS_SCHEMA,
    )
    write_partitioned(
        folder / "events", events, np.array([CLUSTERS.index(c) for c in cluster]), rng
    )


def expectation_differences(tables: Tables) -> list[str]:
    """Where the tables disagree with CHECK_EPISODES and CHECK_CLUSTERS."""
    columns = (
        "outcome", "start", "end", "firstSeq", "lastSeq", "records", "missingRecords",
        "longestStallSeconds", "logsAtStart", "segmentsAtStart", "meanRate", "rollerRestarts",
        "skippedRestarts",
    )  # fmt: skip
    found = []
    episodes = {(e["cluster"], e["node"], e["episode"]): e for e in tables["episodes"]}
    if episodes.keys() != CHECK_EPISODES.keys():
        found.append(f"episodes {sorted(episodes)} != expected {sorted(CHECK_EPISODES)}")
    for key, values in CHECK_EPISODES.items():
        got = episodes.get(key, {})
        want = dict(zip(columns, values, strict=False))
        for p, eta in zip(FRACTIONS, values[len(columns) :], strict=True):
            want[f"eta{p}.sampleTs"], want[f"eta{p}.predicted"] = eta or (None, None)
        for column, value in want.items():
            if value is not None and column in TIMES:
                value = CHECK_T0 + value * SECOND
                value = float(value) if column.endswith("predicted") else int(value)
            if column not in got or not _same(value, got[column]):
                found.append(f"episode {key} {column}: {got.get(column)!r}, expected {value!r}")
    clusters = {c["cluster"]: c for c in tables["clusters"]}
    cluster_columns = (
        "episodes", "completed", "interrupted", "running", "p50Seconds", "p90Seconds",
        "p99Seconds", "maxSeconds", "slowestNodes",
    )  # fmt: skip
    for cluster, values in CHECK_CLUSTERS.items():
        for column, value in zip(cluster_columns, values, strict=True):
            actual = clusters.get(cluster, {}).get(column)
            if not _same(value, actual):
                found.append(f"cluster {cluster} {column}: {actual!r}, expected {value!r}")
    return found


def self_check(spark: Any) -> None:
    """Spark and DuckDB on the edge cases: equal, and as CHECK_EPISODES/CHECK_CLUSTERS say."""
    from rollguard.spark import job

    folder, out = WORK / "check", WORK / "check-spark"
    write_check_dataset(folder)
    job.run(spark, folder, out)
    spark_result, duck_result = spark_tables(out), compute(folder)
    found = differences(duck_result, spark_result)
    if found:
        _fail(f"Spark and DuckDB differ on {folder}", found)
    for name, result in (("DuckDB", duck_result), ("Spark", spark_result)):
        found = expectation_differences(result)
        if found:
            _fail(f"{name} is not as expected on {folder}", found)
    rows = ", ".join(f"{len(v)} {k}" for k, v in duck_result.items())
    print(f"self-check: Spark = DuckDB = expected on {folder} ({rows})")


# --- the command line --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000000,10000000", help="records, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="100000 records, one run")
    parser.add_argument("--check", action="store_true", help="only the edge-case self-check")
    args = parser.parse_args(argv)
    sizes = [100_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    runs = 1 if args.quick else args.runs
    WORK.mkdir(parents=True, exist_ok=True)

    from rollguard.spark import job

    startup, spark = _timed(lambda: job.session(None, "4g", 0))
    try:
        if args.check:
            self_check(spark)
            return 0
        results = benchmark(spark, sizes, runs, args.seed, args.days)
    finally:
        spark.stop()
    print_table(startup, results)
    path = WORK / f"results-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    document = {
        "runs": runs,
        "seed": args.seed,
        "cores": os.cpu_count(),
        "sparkStartupSeconds": round(startup, 2),
        "relTolerance": REL_TOL,
        "results": results,
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`rollguard-report`: recovery episodes, per-cluster figures and an HTML report from a dataset
written by `rollguard collect`.

    rollguard-report --dataset DIR --out DIR [--master URL]
    spark-submit --master spark://host:7077 spark/src/rollguard/spark/job.py --dataset DIR --out DIR

Local mode (`local[*]`) by default; under spark-submit the master is spark-submit's. Outputs in
--out: Parquet tables episodes/, nodes/, clusters/, eta/, eta_summary/, daily/, rolls/,
roll_phases/; summary.json; expectations.json (rollguard.shared.expectations' format, for the
roller); report.html (charts as embedded PNGs). Exit codes: 0 done, 1 the job failed, 2 bad
flags or no dataset.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the namespace importable
    # spark/src, and in a checkout shared/src beside it (where rollguard-shared is not installed).
    _SRC = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(p) for p in (_SRC, _SRC.parent.parent / "shared" / "src") if p.is_dir()]

from rollguard.shared.cli import ExitCode, Parser, argument_type
from rollguard.shared.expectations import MIN_EPISODES, Expectations, node_expectation
from rollguard.shared.settings import integer

EXIT_FAILED = ExitCode.FAILED
EXIT_CONFIG = ExitCode.USAGE


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="rollguard-report",
        description="Recovery report from collected agent timelines: tables (Parquet), "
        "summary.json, expectations.json and report.html. Example:\n"
        "  rollguard-report --dataset dataset --out report",
    )
    parser.add_argument("--dataset", type=Path, required=True, help="folder written by collect")
    parser.add_argument("--out", type=Path, required=True, help="folder for tables and report")
    parser.add_argument(
        "--master",
        help="Spark master URL (default: local[*]; under spark-submit, spark-submit's)",
    )
    parser.add_argument("--cluster", action="append", help="only this cluster (repeatable)")
    parser.add_argument(
        "--output",
        choices=["text", "json"],
        default="text",
        help="the closing summary as text, or json (summary.json's content)",
    )
    parser.add_argument(
        "--driver-memory", default="2g", help="driver memory in local mode (default: 2g)"
    )
    parser.add_argument(
        "--shuffle-partitions",
        type=argument_type(integer(0, 100_000)),
        default=0,
        help="partitions of the one shuffle (default: 2 per core of the master)",
    )
    return parser


@dataclass(frozen=True, slots=True)
class Inputs:
    timeline: str
    events: str | None


def find_inputs(dataset: Path) -> Inputs:
    """The dataset's tables; an error naming the folder when there is nothing to read."""
    timeline, events = dataset / "timeline", dataset / "events"
    if not dataset.is_dir():
        raise FileNotFoundError(f"dataset folder {dataset} does not exist")
    if not any(timeline.rglob("*.parquet")):
        raise FileNotFoundError(
            f"{timeline} holds no Parquet files: run `rollguard collect --out {dataset}` first"
        )
    has_events = events.is_dir() and any(events.rglob("*.parquet"))
    return Inputs(str(timeline.resolve()), str(events.resolve()) if has_events else None)


def session(master: str | None, driver_memory: str, shuffle_partitions: int) -> Any:
    from pyspark.sql import SparkSession

    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    builder = SparkSession.builder.appName("rollguard-report")
    if not under_submit:
        target = master or "local[*]"
        builder = builder.master(target)
        if target.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = builder.config("spark.driver.memory", driver_memory)
        logging = Path(__file__).with_name("log4j2.properties").resolve()
        builder = builder.config(
            "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{logging}"
        )
    partitions = shuffle_partitions or 2 * (os.cpu_count() or 2)
    builder = (
        builder.config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.parquet.compression.codec", "zstd")
        # A node's records are one window partition (about 2,600 at 10M records over 3,890
        # nodes, tens of thousands for a long recovery). Beyond this many rows Spark moves the
        # window's buffer into its spillable sorter, which is slower to fill and read; a node
        # of a million records (~100 MB) still fits a task's memory. Measured at 10M records:
        # the episodes 28.9 s -> 27.0 s (docs/benchmarks.md).
        .config("spark.sql.windowExec.buffer.in.memory.threshold", "1000000")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_inputs(
    spark: Any, inputs: Inputs, clusters: Sequence[str] | None = None
) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    from rollguard.spark.episodes import EVENTS_SCHEMA, TIMELINE_SCHEMA

    timeline = (
        spark.read.schema(TIMELINE_SCHEMA)
        .option("basePath", inputs.timeline)
        .parquet(inputs.timeline)
    )
    events = None
    if inputs.events is not None:
        events = (
            spark.read.schema(EVENTS_SCHEMA)
            .option("basePath", inputs.events)
            .parquet(inputs.events)
        )
    if clusters:
        timeline = timeline.filter(F.col("cluster").isin(*clusters))
        if events is not None:
            events = events.filter(F.col("cluster").isin(*clusters))
    return timeline, events


@dataclass
class Result:
    summary: dict[str, Any]
    report: Path


def run(spark: Any, dataset: Path, out: Path, clusters: Sequence[str] | None = None) -> Result:
    from rollguard.spark import episodes as ep
    from rollguard.spark import rolls as rl
    from rollguard.spark import trends
    from rollguard.spark.report import write_report
    from rollguard.spark.report_rolls import ROLLS_CHARTED

    started = time.monotonic()
    inputs = find_inputs(dataset)
    timeline, events = read_inputs(spark, inputs, clusters)
    episodes = ep.episodes(timeline, events).cache()
    nodes = trends.diagnose(ep.node_summary(episodes)).cache()
    per_cluster = ep.cluster_summary(episodes, nodes)
    eta = ep.eta_accuracy(episodes).cache()
    eta_summary = ep.eta_summary(eta)
    if events is None:
        events = spark.createDataFrame([], ep.EVENTS_SCHEMA)

    out.mkdir(parents=True, exist_ok=True)
    # Each table sorted by the driver (pyarrow), not by Spark: a Spark sort is one more job
    # (the sample for its range partitioning) per table, for a few thousand rows.
    frames: dict[str, tuple[Any, list[str | tuple[str, str]]]] = {
        "episodes": (episodes, ["cluster", "node", "episode"]),
        "nodes": (nodes, ["cluster", "node"]),
        "clusters": (per_cluster, ["cluster"]),
        "eta": (eta, ["cluster", "node", "episode", "progressPercent"]),
        "eta_summary": (eta_summary, ["cluster", "progressPercent"]),
        "daily": (trends.daily(episodes), ["cluster", "day"]),
        "rolls": (rl.rolls(events), [("start", "descending"), "cluster", "rollId"]),
        "roll_phases": (rl.phases(events), ["cluster", "rollId", "node", "run"]),
    }
    rows = {name: _write_table(frame, keys, out / name) for name, (frame, keys) in frames.items()}

    # Only the rolls the report draws link to curves: their episodes are the ones rescanned.
    charted = {(r["cluster"], r["rollId"]) for r in rows["rolls"][:ROLLS_CHARTED]}
    drawn = [p for p in rows["roll_phases"] if (p["cluster"], p["rollId"]) in charted]
    links = link_episodes(drawn, rows["episodes"])
    curves = _curves(inputs.timeline, rows["episodes"], links)
    records = timeline.count()
    summary = {
        "generatedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dataset": str(dataset),
        "records": records,
        "episodes": len(rows["episodes"]),
        "rolls": len(rows["rolls"]),
        "clusters": [_plain(c) for c in rows["clusters"]],
        "etaAccuracy": [_plain(r) for r in rows["eta_summary"]],
        "seconds": round(time.monotonic() - started, 3),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    expected = expectations_of(rows["nodes"], summary["generatedAt"])
    (out / "expectations.json").write_text(json.dumps(expected.to_json(), indent=2) + "\n")
    report = out / "report.html"
    write_report(report, summary, rows, links, curves, expected)
    for frame in (episodes, nodes, eta):
        frame.unpersist()
    return Result(summary, report)


def _write_table(
    frame: Any, keys: Sequence[str | tuple[str, str]], folder: Path
) -> list[dict[str, Any]]:
    """The frame sorted by `keys` as one Parquet file in `folder` (replaced), and its rows.
    Each table is small (per episode or less) and the report needs its rows anyway: one Spark
    job through Arrow, where a Spark write and a collect would be two."""
    import pyarrow.parquet as pq

    order = [(k, "ascending") if isinstance(k, str) else k for k in keys]
    table = frame.toArrow().sort_by(order)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-00000.parquet", compression="zstd")
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def expectations_of(nodes: list[dict[str, Any]], generated_at: str) -> Expectations:
    """expectations.json: the nodes table's figures in rollguard.shared.expectations' format."""
    entries = tuple(
        node_expectation(
            n["cluster"],
            n["node"],
            episodes=n["completed"],
            p50=n["p50Seconds"],
            p90=n["p90Seconds"],
            p99=n["p99Seconds"],
            rated_episodes=n["ratedEpisodes"],
            rate=n["medianRate"],
        )
        for n in nodes
    )
    return Expectations(generated_at, MIN_EPISODES, entries)


EpisodeKey = tuple[str, str, int]
PhaseKey = tuple[str, str, str, int]


def link_episodes(
    phases: list[dict[str, Any]], episodes: list[dict[str, Any]]
) -> dict[PhaseKey, list[EpisodeKey]]:
    """Each log-recovery phase of a roll -> the node's recovery episodes that overlap it."""
    by_node: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in episodes:
        by_node.setdefault((e["cluster"], e["node"]), []).append(e)
    links: dict[PhaseKey, list[EpisodeKey]] = {}
    for p in phases:
        if p["phase"] != "log recovery":
            continue
        found = [
            (e["cluster"], e["node"], e["episode"])
            for e in by_node.get((p["cluster"], p["node"]), [])
            if e["start"] <= p["end"] and (e["end"] or e["lastSeen"]) >= p["start"]
        ]
        links[p["cluster"], p["rollId"], p["node"], p["run"]] = found
    return links


SLOWEST_CURVES = 5
DAY_MS = 86_400_000
LINKED_CURVES = 20  # curves of episodes waited for by the latest rolls, at most


def _curves(
    timeline: str,
    episode_rows: list[dict[str, Any]],
    links: dict[PhaseKey, list[EpisodeKey]],
) -> dict[EpisodeKey, list[tuple[int, int]]]:
    """Remaining segments over time of the slowest episodes and of those rolls waited for.

    A few thousand points from a few nodes, for the charts: read by the driver with Arrow from
    the collector's folders they are in, not by a Spark job. A Spark scan of 10M records took
    3 s for them (17 s before its cheap filters came first); the driver already reads the
    dataset's folder (`find_inputs`), so it sees the files wherever the executors do."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    slow = sorted(
        (e for e in episode_rows if e["elapsedSeconds"] is not None),
        key=lambda e: -e["elapsedSeconds"],
    )[:SLOWEST_CURVES]
    by_key = {(e["cluster"], e["node"], e["episode"]): e for e in episode_rows}
    linked = list(dict.fromkeys(k for keys in links.values() for k in keys))[:LINKED_CURVES]
    wanted = list({**{k: by_key[k] for k in linked}, **{_key(e): e for e in slow}}.values())
    if not wanted:
        return {}
    # The collector files records by cluster and UTC day of `ts`: only the days an episode spans
    # (a day's margin each side, for an agent whose clock stepped) are read, not the timeline.
    days = sorted(
        {
            day
            for e in wanted
            for day in _days(e["start"] - DAY_MS, (e["end"] or e["lastSeen"]) + DAY_MS)
        }
    )
    folders = ds.partitioning(
        pa.schema([("cluster", pa.string()), ("date", pa.string())]), flavor="hive"
    )
    columns = pa.schema(
        [
            ("node", pa.string()),
            ("journal", pa.int32()),
            ("seq", pa.int64()),
            ("ts", pa.int64()),
            ("remainingSegmentsToRecover", pa.int32()),
            ("cluster", pa.string()),
            ("date", pa.string()),
        ]
    )
    table = ds.dataset(timeline, schema=columns, format="parquet", partitioning=folders).to_table(
        columns=["cluster", "node", "journal", "seq", "ts", "remainingSegmentsToRecover"],
        filter=ds.field("cluster").isin(sorted({e["cluster"] for e in wanted}))
        & ds.field("date").isin(days)
        & ds.field("node").isin(sorted({e["node"] for e in wanted}))
        & ds.field("remainingSegmentsToRecover").is_valid(),
    )
    by_journal: dict[tuple[str, str, int], list[tuple[int, int, int]]] = {}
    for cluster, node, journal, seq, ts, remaining in zip(
        *(table.column(i).to_pylist() for i in range(table.num_columns)), strict=True
    ):
        by_journal.setdefault((cluster, node, journal), []).append((seq, ts, remaining))
    curves: dict[EpisodeKey, list[tuple[int, int]]] = {}
    for e in wanted:
        points = sorted(
            (seq, ts - e["start"], remaining)
            for seq, ts, remaining in by_journal.get((e["cluster"], e["node"], e["journal"]), [])
            if e["firstSeq"] <= seq <= e["lastSeq"]
        )
        curves[_key(e)] = [(t, s) for _, t, s in points]
    return curves


def _days(first_ms: int, last_ms: int) -> list[str]:
    """The UTC days (YYYY-MM-DD, the collector's `date=` folders) from `first_ms` to `last_ms`."""
    first, last = first_ms // DAY_MS, last_ms // DAY_MS
    return [
        time.strftime("%Y-%m-%d", time.gmtime(day * DAY_MS // 1000))
        for day in range(first, last + 1)
    ]


def _key(e: dict[str, Any]) -> EpisodeKey:
    return (e["cluster"], e["node"], e["episode"])


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}


class _Interrupted(BaseException):
    """SIGTERM, raised where the driver is (as Python raises KeyboardInterrupt for SIGINT)."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Interrupted


def _interrupted_now(out: Path, signum: int, frame: object) -> None:
    sys.stdout.flush()
    sys.stderr.write(f"rollguard-report: interrupted; {out} is incomplete, run the report again\n")
    sys.stderr.flush()
    os._exit(ExitCode.INTERRUPTED)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 written, 1 the job failed, 2 bad input, 3 interrupted by SIGINT or SIGTERM (Spark's
    jobs cancelled and the session stopped; what is in --out is incomplete: run it again)."""
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    # py4j logs the gateway call that an interruption cuts short, with a traceback; the one line
    # below says what happened.
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    try:
        return _main(args)
    except (KeyboardInterrupt, _Interrupted):
        print(
            f"rollguard-report: interrupted; {args.out} is incomplete, run the report again",
            file=sys.stderr,
        )
        return ExitCode.INTERRUPTED


def _main(args: argparse.Namespace) -> int:
    try:
        find_inputs(args.dataset)
    except FileNotFoundError as exc:
        print(f"rollguard-report: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        spark = session(args.master, args.driver_memory, args.shuffle_partitions)
    except Exception as exc:  # Java missing, master unreachable: Spark's own words, one line
        print(f"rollguard-report: cannot start Spark: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_FAILED
    # From here a signal ends the process at once, from the handler: an exception raised in the
    # middle of a call to the JVM (PySpark's own SIGINT handler does that) leaves py4j's
    # connection unusable and comes back as a job failure with a traceback logged. Spark's JVM
    # is PySpark's gateway child, which exits when this process's end closes its stdin.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, functools.partial(_interrupted_now, args.out))
    try:
        result = run(spark, args.dataset, args.out, args.cluster)
    except Exception as exc:
        spark.stop()
        print(f"rollguard-report: the job failed: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_FAILED
    spark.stop()
    s = result.summary
    if args.output == "json":
        print(json.dumps({**s, "report": str(result.report.resolve())}, default=str))
    else:
        print(
            f"{s['records']} records, {s['episodes']} episodes in {len(s['clusters'])} clusters; "
            f"{s['seconds']:.1f}s; report: {result.report.resolve()}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`rollguard-report`: recovery episodes, per-cluster figures and an HTML report from a dataset
written by `rollguard collect`.

    rollguard-report --dataset DIR --out DIR [--master URL]
    spark-submit --master spark://host:7077 spark/src/rollguard/spark/job.py --dataset DIR --out DIR

Local mode (`local[*]`) by default; under spark-submit the master is spark-submit's. Outputs in
--out: Parquet tables episodes/, nodes/, clusters/, eta/, eta_summary/, daily/, rolls/,
roll_phases/, client_impact/, client_impact_nodes/; summary.json; expectations.json
(rollguard.shared.expectations' format, for the roller); report.html (charts as embedded PNGs).
Exit codes: 0 done, 1 the job failed, 2 bad flags or no dataset.
"""

from __future__ import annotations

import json
import os
import shutil
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

from rollguard.shared.expectations import MIN_EPISODES, Expectations, node_expectation


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

    from rollguard.spark.schema import EVENTS_SCHEMA, TIMELINE_SCHEMA

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
    from rollguard.spark import impact, trends
    from rollguard.spark import rolls as rl
    from rollguard.spark.curves import link_episodes, read_curves
    from rollguard.spark.report import write_report
    from rollguard.spark.report_rolls import ROLLS_CHARTED
    from rollguard.spark.schema import EVENTS_SCHEMA

    started = time.monotonic()
    inputs = find_inputs(dataset)
    timeline, events = read_inputs(spark, inputs, clusters)
    episodes = ep.episodes(timeline, events).cache()
    nodes = trends.diagnose(ep.node_summary(episodes)).cache()
    per_cluster = ep.cluster_summary(episodes, nodes)
    eta = ep.eta_accuracy(episodes).cache()
    eta_summary = ep.eta_summary(eta)
    if events is None:
        events = spark.createDataFrame([], EVENTS_SCHEMA)

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
        "client_impact": (impact.rolls(events), [("start", "descending"), "cluster", "rollId"]),
        "client_impact_nodes": (impact.nodes(events), ["cluster", "node"]),
    }
    rows = {name: _write_table(frame, keys, out / name) for name, (frame, keys) in frames.items()}

    # Only the rolls the report draws link to curves: their episodes are the ones rescanned.
    charted = {(r["cluster"], r["rollId"]) for r in rows["rolls"][:ROLLS_CHARTED]}
    drawn = [p for p in rows["roll_phases"] if (p["cluster"], p["rollId"]) in charted]
    links = link_episodes(drawn, rows["episodes"])
    curves = read_curves(inputs.timeline, rows["episodes"], links)
    records = timeline.count()
    summary = {
        "generatedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dataset": str(dataset),
        "records": records,
        "episodes": len(rows["episodes"]),
        "rolls": len(rows["rolls"]),
        "rollsWithCanary": len(rows["client_impact"]),
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


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (`rollguard.spark.cli.main`): the console script's entry point, and what
    spark-submit runs. Imported here, not at the top, because the command line imports the job."""
    from rollguard.spark.cli import main as command

    return command(argv)


if __name__ == "__main__":
    sys.exit(main())

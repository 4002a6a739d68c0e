"""report.html: the job's figures for people, one self-contained file (charts as embedded PNGs)."""

from __future__ import annotations

import base64
import html
import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

TOP_EPISODES = 25
RATE_NODES = 30

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.7em; text-align: right; }
th { background: #f3f3f3; } td.t, th.t { text-align: left; }
img { max-width: 100%; } .note { color: #666; font-size: 0.9em; }
"""


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def _img(png: str, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{png}">'


def duration_chart(episodes: list[dict[str, Any]]) -> str:
    figure, axes = plt.subplots(figsize=(8, 3.5))
    by_cluster: dict[str, list[float]] = {}
    for e in episodes:
        if e["outcome"] == "completed":
            by_cluster.setdefault(e["cluster"], []).append(e["durationSeconds"] / 60)
    if by_cluster:
        count = sum(len(v) for v in by_cluster.values())
        bins = min(40, max(8, count // 3))
        axes.hist(list(by_cluster.values()), bins=bins, label=list(by_cluster), stacked=True)
        axes.legend()
    axes.set_xlabel("recovery duration (minutes)")
    axes.set_ylabel("completed episodes")
    axes.set_title("Duration of completed recoveries")
    return _png(figure)


def curves_chart(curves: dict[str, list[tuple[int, int]]]) -> str:
    figure, axes = plt.subplots(figsize=(8, 3.5))
    for label, points in curves.items():
        axes.plot([t / 60000 for t, _ in points], [s for _, s in points], label=label)
    if curves:
        axes.legend(fontsize="small")
    axes.set_xlabel("minutes since the episode started")
    axes.set_ylabel("remaining segments")
    axes.set_title("Remaining segments over time, slowest episodes")
    return _png(figure)


def rate_chart(nodes: list[dict[str, Any]]) -> str:
    rated = sorted((n for n in nodes if n["meanRate"] is not None), key=lambda n: n["meanRate"])[
        :RATE_NODES
    ]
    figure, axes = plt.subplots(figsize=(8, max(2.5, 0.25 * len(rated) + 1)))
    axes.barh([f"{n['cluster']}/{n['node']}" for n in rated], [n["meanRate"] for n in rated])
    axes.set_xlabel("mean recovery rate (segments per second)")
    axes.set_title(f"Recovery rate per node (the {RATE_NODES} slowest)")
    axes.tick_params(axis="y", labelsize="small")
    return _png(figure)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, list):
        return html.escape(", ".join(map(str, value)))
    return html.escape(str(value))


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> str:
    text = {"cluster", "node", "outcome", "slowestNodes", "bootId", "start"}
    head = "".join(
        f'<th class="{"t" if key in text else ""}">{html.escape(title)}</th>'
        for key, title in columns
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"t" if key in text else ""}">{_cell(row.get(key))}</td>'
            for key, _ in columns
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def write_report(
    path: Path,
    summary: dict[str, Any],
    episodes: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    eta: list[dict[str, Any]],
    curves: dict[str, list[tuple[int, int]]],
) -> None:
    slowest = sorted(episodes, key=lambda e: -(e["elapsedSeconds"] or 0))[:TOP_EPISODES]
    rows = [{**e, "start": _when(e["start"])} for e in slowest]
    eta = [
        {**r, "medianAbsRelativeError": f"{100 * r['medianAbsRelativeError']:.1f} %"}
        if r["medianAbsRelativeError"] is not None
        else r
        for r in eta
    ]
    unfinished = [e for e in episodes if e["outcome"] == "running"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<title>rollguard recovery report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>Log recovery report</h1>",
        f"<p class='note'>{summary['records']:,} timeline records, {summary['episodes']:,} "
        f"recovery episodes; generated {html.escape(summary['generatedAt'])} from "
        f"{html.escape(summary['dataset'])}.</p>",
    ]
    if unfinished:
        parts.append(
            f"<p><strong>{len(unfinished)} recovery episodes are still running</strong>: "
            + html.escape(", ".join(f"{e['cluster']}/{e['node']}" for e in unfinished[:20]))
            + "</p>"
        )
    parts += [
        "<h2>Clusters</h2>",
        _table(
            summary["clusters"],
            [
                ("cluster", "cluster"),
                ("episodes", "episodes"),
                ("completed", "completed"),
                ("interrupted", "interrupted"),
                ("running", "still running"),
                ("p50Seconds", "p50 s"),
                ("p90Seconds", "p90 s"),
                ("p99Seconds", "p99 s"),
                ("maxSeconds", "max s"),
                ("slowestNodes", "slowest nodes"),
            ],
        ),
        _img(duration_chart(episodes), "duration distribution"),
        "<h2>Slowest episodes</h2>",
        _table(
            rows,
            [
                ("cluster", "cluster"),
                ("node", "node"),
                ("start", "start (UTC)"),
                ("outcome", "outcome"),
                ("elapsedSeconds", "duration s"),
                ("logsAtStart", "logs"),
                ("segmentsAtStart", "segments"),
                ("meanRate", "segments/s"),
                ("longestStallSeconds", "longest stall s"),
                ("rollerRestarts", "roller restarts"),
                ("skippedRestarts", "rolls that waited"),
                ("missingRecords", "missing records"),
            ],
        ),
        _img(curves_chart(curves), "remaining segments of the slowest episodes"),
        "<h2>Recovery rate per node</h2>",
        _img(rate_chart(nodes), "recovery rate per node"),
        "<h2>ETA accuracy</h2>",
        "<p class='note'>The finish predicted from the mean rate so far, when 25, 50 and 75 % "
        "of the segments were recovered, against the actual finish (completed episodes). "
        "Relative error: error / duration.</p>",
        _table(
            eta,
            [
                ("cluster", "cluster"),
                ("progressPercent", "at progress %"),
                ("episodes", "episodes"),
                ("medianAbsRelativeError", "median |relative error|"),
                ("medianErrorSeconds", "median error s"),
            ],
        ),
        "<p class='note'>Episodes are ordered by each agent's sequence numbers, not by clocks. "
        "Definitions: docs/architecture.md, section Recovery report.</p>",
        "</body></html>",
    ]
    path.write_text("\n".join(parts))

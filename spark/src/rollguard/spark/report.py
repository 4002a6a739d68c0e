"""report.html: the job's figures for people, one self-contained file (charts as embedded PNGs).

What a platform team comes for first: the rolls (the latest at the top: what waited on what,
for how long), then what to expect of the next one, then trends and per-node diagnosis, then
the recovery figures behind them. Durations read `58m 12s`, times are UTC ISO 8601, names never
wrap, and the page fits 1280 px (wide tables scroll inside their own box).
"""

from __future__ import annotations

import html
from pathlib import Path

from rollguard.shared.expectations import Expectations
from rollguard.spark import charts, report_rolls
from rollguard.spark.page import Row, duration, img, table, when
from rollguard.spark.report_rolls import EpisodeKey, PhaseKey

__all__ = ["duration", "when", "write_report"]

TOP_EPISODES = 25

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1240px;
       padding: 0 16px; color: #222; box-sizing: border-box; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.5em; text-align: right;
         white-space: nowrap; line-height: 1.4; }
th { background: #f3f3f3; } td.t, th.t { text-align: left; }
td.why { white-space: normal; text-align: left; min-width: 12em; }
img { max-width: 100%; height: auto; display: block; }
.note { color: #666; font-size: 0.9em; } .flag { color: #b52b27; font-weight: 600; }
section.roll { border-top: 2px solid #4a7ebb; margin-top: 1.5em; }
"""


# ---- the page --------------------------------------------------------------------------------


def _expectations(expected: Expectations) -> list[str]:
    rows = [
        {
            **n.to_json(),
            "history": "" if n.enough_history else "not enough history",
        }
        for n in expected.nodes
    ]
    return [
        "<h2>Expectations for the next roll</h2>",
        f"<p class='note'>Per node, from its completed recoveries (written to "
        f"expectations.json for the roller). Fewer than {expected.min_episodes} episodes: "
        "not enough history, the roller keeps its fixed budget.</p>",
        table(
            rows,
            [
                ("cluster", "cluster", "t"),
                ("node", "node", "t"),
                ("episodes", "episodes", "n"),
                ("p50Seconds", "p50", "d"),
                ("p90Seconds", "p90", "d"),
                ("p99Seconds", "p99", "d"),
                ("ratedEpisodes", "rated episodes", "n"),
                ("segmentsPerSecond", "typical segments/s", "n"),
                ("history", "", "t"),
            ],
        ),
    ]


def _trends(rows: dict[str, list[Row]]) -> list[str]:
    nodes = rows["nodes"]
    slow = {(n["cluster"], n["node"]) for n in nodes if n["slow"]}
    flagged = ", ".join(f"{c}/{n}" for c, n in sorted(slow)) or "none"
    shown = sorted(nodes, key=lambda n: (not n["slow"], -(n["p90Seconds"] or 0)))
    return [
        "<h2>Trends and diagnosis</h2>",
        img(charts.daily(rows["daily"]), "recovery duration per cluster and day"),
        img(charts.scatter(rows["episodes"], slow), "duration against segments at start"),
        f"<p>Nodes flagged slow: <span class='{'flag' if slow else ''}'>"
        f"{html.escape(flagged)}</span>. "
        "<span class='note'>A node is flagged when its median rate is below half its "
        "cluster's (the median of its nodes' median rates), judged only with at least 5 "
        "rated episodes: a slow disk, not more data.</span></p>",
        table(
            shown,
            [
                ("cluster", "cluster", "t"),
                ("node", "node", "t"),
                ("episodes", "episodes", "n"),
                ("completed", "completed", "n"),
                ("p50Seconds", "p50", "d"),
                ("p90Seconds", "p90", "d"),
                ("maxSeconds", "max", "d"),
                ("meanRate", "mean seg/s", "n"),
                ("medianRate", "median seg/s", "n"),
                ("clusterRate", "cluster seg/s", "n"),
                ("longestStallSeconds", "longest stall", "d"),
                ("slow", "slow", "n"),
            ],
        ),
        img(charts.rates(nodes), "recovery rate per node"),
    ]


def write_report(
    path: Path,
    summary: Row,
    rows: dict[str, list[Row]],
    links: dict[PhaseKey, list[EpisodeKey]],
    curves: dict[EpisodeKey, list[tuple[int, int]]],
    expected: Expectations,
) -> None:
    episodes = rows["episodes"]
    slowest = sorted(episodes, key=lambda e: -(e["elapsedSeconds"] or 0))[:TOP_EPISODES]
    eta = [
        {**r, "error": f"{100 * r['medianAbsRelativeError']:.1f} %"}
        if r["medianAbsRelativeError"] is not None
        else r
        for r in rows["eta_summary"]
    ]
    unfinished = [e for e in episodes if e["outcome"] == "running"]
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        "<title>rollguard recovery report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>Rolls and log recovery report</h1>",
        f"<p class='note'>{summary['records']:,} timeline records, {summary['episodes']:,} "
        f"recovery episodes, rolls: {summary['rolls']:,}; generated "
        f"{html.escape(summary['generatedAt'])} from {html.escape(summary['dataset'])}. "
        "Times are UTC.</p>",
    ]
    if unfinished:
        parts.append(
            f"<p><strong>{len(unfinished)} recovery episodes are still running</strong>: "
            + html.escape(", ".join(f"{e['cluster']}/{e['node']}" for e in unfinished[:20]))
            + "</p>"
        )
    parts += report_rolls.section(rows, links, curves)
    parts += _expectations(expected)
    parts += _trends(rows)
    slowest_curves = {
        report_rolls.episode_label(k): v
        for k, v in curves.items()
        if k in {(e["cluster"], e["node"], e["episode"]) for e in slowest[:5]}
    }
    parts += [
        "<h2>Clusters</h2>",
        table(
            summary["clusters"],
            [
                ("cluster", "cluster", "t"),
                ("episodes", "episodes", "n"),
                ("completed", "completed", "n"),
                ("interrupted", "interrupted", "n"),
                ("running", "still running", "n"),
                ("p50Seconds", "p50", "d"),
                ("p90Seconds", "p90", "d"),
                ("p99Seconds", "p99", "d"),
                ("maxSeconds", "max", "d"),
                ("slowestNodes", "slowest nodes", "t"),
            ],
        ),
        img(charts.durations(episodes), "duration distribution"),
        "<h2>Slowest episodes</h2>",
        table(
            slowest,
            [
                ("cluster", "cluster", "t"),
                ("node", "node", "t"),
                ("start", "start (UTC)", "ts"),
                ("outcome", "outcome", "t"),
                ("elapsedSeconds", "duration", "d"),
                ("logsAtStart", "logs", "n"),
                ("segmentsAtStart", "segments", "n"),
                ("meanRate", "segments/s", "n"),
                ("longestStallSeconds", "longest stall", "d"),
                ("rollerRestarts", "roller restarts", "n"),
                ("skippedRestarts", "rolls that waited", "n"),
                ("missingRecords", "missing records", "n"),
            ],
        ),
        img(
            charts.curves(slowest_curves, "Remaining segments over time, slowest episodes"),
            "remaining segments of the slowest episodes",
        ),
        "<h2>ETA accuracy</h2>",
        "<p class='note'>The finish predicted from the mean rate so far, when 25, 50 and 75 % "
        "of the segments were recovered, against the actual finish (completed episodes). "
        "Relative error: error / duration.</p>",
        table(
            eta,
            [
                ("cluster", "cluster", "t"),
                ("progressPercent", "at progress %", "n"),
                ("episodes", "episodes", "n"),
                ("error", "median |relative error|", "t"),
                ("medianErrorSeconds", "median error (s)", "n"),
            ],
        ),
        "<p class='note'>Episodes are ordered by each agent's sequence numbers, not by clocks. "
        "Definitions: docs/architecture.md, section Recovery report.</p>",
        "</body></html>",
    ]
    path.write_text("\n".join(parts))

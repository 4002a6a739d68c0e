"""report.html: the job's figures for people, one self-contained file (charts as embedded PNGs).

What a platform team comes for first: the rolls (the latest at the top: what waited on what,
for how long), then what to expect of the next one and how to give it to the roller, then
trends and per-node diagnosis, then the recovery figures behind them. Durations read `58m 12s`,
times are UTC ISO 8601, names never wrap, and every table fits a 1280 px window: titles wrap
between words, and a table of nodes names its cluster once, in a row across it, not in a
column (a table that still does not fit, with names far longer than a host name, scrolls inside
its own box rather than widening the page).
"""

from __future__ import annotations

import html
import math
from pathlib import Path

from rollguard.shared.expectations import (
    BUDGET_FACTOR,
    BUDGET_MARGIN,
    Expectations,
    recovery_budget,
)
from rollguard.spark import charts, report_impact, report_rolls
from rollguard.spark.episodes import SLOWEST
from rollguard.spark.page import Row, duration, img, name, signed_duration, table, when
from rollguard.spark.report_rolls import EpisodeKey, PhaseKey

__all__ = ["duration", "when", "write_report"]

TOP_EPISODES = 25
# A cluster's slowest nodes on the page: this share of its nodes with a completed recovery, at
# least 1 and at most the SLOWEST that the clusters table keeps, so that a 3-node cluster's list
# is its slowest node, not every node.
SLOWEST_PERCENT = 10

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1240px;
       padding: 0 16px; color: #222; box-sizing: border-box; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.4em; text-align: right;
         line-height: 1.4; }
td { white-space: nowrap; }
th { background: #f3f3f3; vertical-align: bottom; font-weight: normal; color: #444; }
td.t, th.t { text-align: left; }
tr:has(+ tr.detail) td { border-bottom: none; }
tr.detail td { padding: 0 0.5em 0.4em 1.5em; color: #444; }
tr.group th { background: none; border-bottom: 1px solid #999; padding-top: 0.8em;
              white-space: nowrap; }
td.why { white-space: normal; min-width: 12em; } .why { text-align: left; }
.whole, code { white-space: nowrap; }
pre { background: #f6f6f6; padding: 0.5em 0.75em; overflow-x: auto; }
img { max-width: 100%; height: auto; display: block; }
.note { color: #666; font-size: 0.9em; } .flag { color: #b52b27; font-weight: 600; }
section.roll { border-top: 2px solid #4a7ebb; margin-top: 1.5em; }
"""


# ---- the page --------------------------------------------------------------------------------


def _names(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(name(f"{c}/{n}") for c, n in pairs)


def _expectations(expected: Expectations, file: Path) -> list[str]:
    """The table, and what a team does with it next: the command that gives it to a roll."""
    rows = []
    for n in sorted(expected.nodes, key=lambda n: (n.cluster, n.node)):
        budget = recovery_budget(n, math.inf)
        rows.append(
            {
                **n.to_json(),
                "budget": budget.seconds if budget.from_history else None,
                "history": "enough" if n.enough_history else "not enough history",
            }
        )
    command = html.escape(f"--expectations {file}")
    return [
        "<h2>Expectations for the next roll</h2>",
        "<p class='note'>Per node, from its completed recoveries. Fewer than "
        f"{expected.min_episodes} completed episodes: not enough history, and the roller keeps "
        "its fixed wait (<code>--max-recovery-wait</code>) for that node.</p>",
        table(
            rows,
            [
                ("node", "node", "t"),
                ("episodes", "completed episodes", "n"),
                ("p50Seconds", "p50", "d"),
                ("p90Seconds", "p90", "d"),
                ("p99Seconds", "p99", "d"),
                ("ratedEpisodes", "rated episodes", "n"),
                ("segmentsPerSecond", "typical segments per second", "n"),
                ("budget", "recovery wait budget", "d"),
                ("history", "history", "t"),
            ],
            group="cluster",
        ),
        "<p><strong>Use them in the next roll.</strong> The job wrote this table beside the "
        "report as <code>expectations.json</code>; give that file to the roll, with the flags "
        "you roll with (<code>--inventory</code> or <code>--namespace</code> and "
        "<code>--selector</code>, <code>--bootstrap</code>, <code>--cert</code>, "
        "<code>--key</code>, <code>--cacert</code>):</p>",
        f"<pre>rollguard plan {command} ...   # the prediction; restarts nothing\n"
        f"rollguard roll {command} ...</pre>",
        "<p>The roller then waits for each node's log recovery up to that node's budget, p99 "
        f"\N{MULTIPLICATION SIGN} {BUDGET_FACTOR:g} + {BUDGET_MARGIN:g} s (the column above), "
        "never more than <code>--max-recovery-wait</code>; a recovery that outlasts it stops "
        "the roll (exit 1) without restarting the broker. Before the first restart it prints "
        "the roll's predicted duration (<code>--restart-estimate</code> per restart plus each "
        "node's median recovery), and the next report shows the prediction beside the roll's "
        "real duration. Run the report again after each roll, so that the next one plans from "
        "the latest history.</p>",
    ]


def _trends(rows: dict[str, list[Row]]) -> list[str]:
    nodes = rows["nodes"]
    slow = sorted((n["cluster"], n["node"]) for n in nodes if n["slow"])
    flagged = _names(slow) or "none"
    shown = sorted(
        nodes, key=lambda n: (n["cluster"], not n["slow"], -(n["p90Seconds"] or 0), n["node"])
    )
    rated = sum(1 for n in nodes if n["medianRate"] is not None)
    return [
        "<h2>Trends and diagnosis</h2>",
        img(charts.daily(rows["daily"]), "recovery duration per cluster and day"),
        img(charts.scatter(rows["episodes"], set(slow)), "duration against segments at start"),
        f"<p>Nodes flagged slow: <span class='{'flag' if slow else ''}'>{flagged}</span>. "
        "<span class='note'>A node is flagged when its median rate is below half its "
        "cluster's (the median of its nodes' median rates), judged only with at least 5 "
        "rated episodes: a slow disk, not more data. Per cluster, the flagged nodes first, "
        "then the longest p90 first.</span></p>",
        table(
            shown,
            [
                ("node", "node", "t"),
                ("episodes", "episodes", "n"),
                ("completed", "completed", "n"),
                ("p50Seconds", "p50", "d"),
                ("p90Seconds", "p90", "d"),
                ("maxSeconds", "max", "d"),
                ("meanRate", "mean segments per second", "n"),
                ("medianRate", "median segments per second", "n"),
                ("clusterRate", "cluster's segments per second", "n"),
                ("longestStallSeconds", "longest stall", "d"),
                ("slow", "flagged slow", "n"),
            ],
            group="cluster",
        ),
        img(charts.rates(nodes), charts.rates_title(len(charts.slowest_rates(nodes)), rated)),
        "<p class='note'>Each bar is a node's median recovery rate, in segments recovered per "
        "second; the slowest node is at the top, and a node drawn red is flagged slow.</p>",
    ]


def slowest_shown(nodes: int) -> int:
    """How many slowest nodes a cluster with `nodes` nodes that completed a recovery shows."""
    return max(1, min(SLOWEST, math.ceil(nodes * SLOWEST_PERCENT / 100)))


def _clusters(summary: Row, nodes: list[Row]) -> list[Row]:
    """The clusters table's rows, each listing only its slowest nodes (`slowest_shown`)."""
    completed: dict[str, int] = {}
    for n in nodes:
        if n["maxSeconds"] is not None:
            completed[n["cluster"]] = completed.get(n["cluster"], 0) + 1
    out = []
    for c in summary["clusters"]:
        shown = slowest_shown(completed.get(c["cluster"], 0))
        out.append({**c, "slowestNodes": (c["slowestNodes"] or [])[:shown]})
    return out


def _slowest(episodes: list[Row]) -> list[Row]:
    """The TOP_EPISODES longest episodes, grouped by cluster (the cluster of the slowest first),
    the slowest first within each."""
    top = sorted(episodes, key=lambda e: -(e["elapsedSeconds"] or 0))[:TOP_EPISODES]
    first: dict[str, int] = {}
    for i, e in enumerate(top):
        first.setdefault(e["cluster"], i)
    return [
        {**e, "gap": _gap(e["missingRecords"])}
        for e in sorted(top, key=lambda e: (first[e["cluster"]], -(e["elapsedSeconds"] or 0)))
    ]


def _gap(missing: int | None) -> str:
    """An episode seen through a gap in its agent's timeline, said under its row (rare)."""
    if not missing:
        return ""
    return (
        f"{missing:,}: the episode was seen through gaps in its agent's sequence numbers, so "
        "its figures may be short"
    )


def write_report(
    path: Path,
    summary: Row,
    rows: dict[str, list[Row]],
    links: dict[PhaseKey, list[EpisodeKey]],
    curves: dict[EpisodeKey, list[tuple[int, int]]],
    expected: Expectations,
) -> None:
    """report.html at `path`, beside the job's expectations.json (which the page names)."""
    episodes = rows["episodes"]
    slowest = _slowest(episodes)
    eta = [
        {
            **r,
            "error": f"{100 * r['medianAbsRelativeError']:.1f} %"
            if r["medianAbsRelativeError"] is not None
            else None,
            "signed": signed_duration(r["medianErrorSeconds"]),
        }
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
        f"recovery episodes, rolls: {summary['rolls']:,} ({summary['rollsWithCanary']:,} with "
        "a canary); generated "
        f"{html.escape(summary['generatedAt'])} from {html.escape(summary['dataset'])}. "
        "Times are UTC.</p>",
    ]
    if unfinished:
        parts.append(
            f"<p><strong>{len(unfinished)} recovery episodes are still running</strong>: "
            + _names([(e["cluster"], e["node"]) for e in unfinished[:20]])
            + "</p>"
        )
    parts += report_rolls.section(rows, links, curves)
    parts += report_impact.section(rows)
    parts += _expectations(expected, path.resolve().with_name("expectations.json"))
    parts += _trends(rows)
    slowest_curves = {
        report_rolls.episode_label(k): v
        for k, v in curves.items()
        if k in {(e["cluster"], e["node"], e["episode"]) for e in slowest[:5]}
    }
    parts += [
        "<h2>Clusters</h2>",
        table(
            _clusters(summary, rows["nodes"]),
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
                (
                    "slowestNodes",
                    f"slowest nodes (the slowest {SLOWEST_PERCENT} %, 1 to {SLOWEST}), "
                    "longest recovery first",
                    "w",
                ),
            ],
        ),
        img(charts.durations(episodes), "duration distribution"),
        f"<h2>The {len(slowest)} slowest recovery episodes</h2>",
        "<p class='note'>By cluster, the slowest first; a duration still running counts to "
        "the last record seen.</p>",
        table(
            slowest,
            [
                ("node", "node", "t"),
                ("start", "start (UTC)", "ts"),
                ("outcome", "outcome", "t"),
                ("elapsedSeconds", "duration", "d"),
                ("logsAtStart", "logs", "n"),
                ("segmentsAtStart", "segments", "n"),
                ("meanRate", "segments per second", "n"),
                ("longestStallSeconds", "longest stall", "d"),
                ("rollerRestarts", "roller restarts", "n"),
                ("skippedRestarts", "rolls that waited", "n"),
            ],
            group="cluster",
            detail=[("gap", "missing records")],
        ),
        img(
            charts.curves(slowest_curves, "Remaining segments over time, slowest episodes"),
            "remaining segments of the slowest episodes",
        ),
        "<h2>ETA accuracy</h2>",
        "<p class='note'>When 25, 50 and 75 % of an episode's segments were recovered, the "
        "finish predicted from its mean rate so far (the ETA the roller shows) against its "
        "actual finish, for completed episodes. The error is the predicted finish minus the "
        "actual one: <strong>positive</strong> (+), the recovery finished earlier than "
        "predicted (the ETA was too pessimistic); <strong>negative</strong> "
        "(\N{MINUS SIGN}), it finished later (the ETA was too optimistic). The relative error "
        "is the error over the "
        "episode's duration, without its sign.</p>",
        table(
            eta,
            [
                ("cluster", "cluster", "t"),
                ("progressPercent", "at progress %", "n"),
                ("episodes", "episodes", "n"),
                ("error", "median |relative error|", "n"),
                ("signed", "median error (predicted \N{MINUS SIGN} actual finish)", "n"),
            ],
        ),
        "<p class='note'>Episodes are ordered by each agent's sequence numbers, not by clocks. "
        "Definitions: docs/architecture.md, section The recovery report.</p>",
        "</body></html>",
    ]
    path.write_text("\n".join(parts))

"""report.html: the job's figures for people, one self-contained file (charts as embedded PNGs).

What a platform team comes for first: the rolls (the latest at the top: what waited on what,
for how long), then what to expect of the next one, then trends and per-node diagnosis, then
the recovery figures behind them. Durations read `58m 12s`, times are UTC ISO 8601, names never
wrap, and the page fits 1280 px (wide tables scroll inside their own box).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollguard.shared.expectations import Expectations
from rollguard.spark import charts

TOP_EPISODES = 25
ROLLS_CHARTED = 3  # the latest rolls, each with its timeline; the earlier ones in a table
ROLLS_LISTED = 30

Row = dict[str, Any]
EpisodeKey = tuple[str, str, int]
PhaseKey = tuple[str, str, str, int]

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


def duration(seconds: float | None) -> str:
    """`58m 12s`, `3h 05m`, `2d 4h`, `12.5s`: whole units a person reads at a glance."""
    if seconds is None:
        return "-"
    if seconds < 9.95:
        return f"{seconds:.1f}s"
    total = round(seconds)
    if total < 60:
        return f"{total}s"
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s"


def when(ms: int | None) -> str:
    """UTC ISO 8601 to the second: 2026-11-23T14:05:09Z."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def anchor(*parts: object) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", "-".join(str(p) for p in parts))


def _img(png: str, alt: str, element_id: str = "") -> str:
    ident = f' id="{element_id}"' if element_id else ""
    return f'<img{ident} alt="{html.escape(alt)}" src="data:image/png;base64,{png}">'


# A column: key, title, kind (t: text, d: duration in seconds, ts: ms time, r: rate, n: number,
# h: HTML already escaped).
Column = tuple[str, str, str]


def _cell(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "d":
        return duration(value)
    if kind == "ts":
        return when(value)
    if kind in ("h", "w"):
        return str(value)
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return html.escape(", ".join(map(str, value)))
    return html.escape(str(value))


def table(rows: Sequence[Row], columns: Sequence[Column]) -> str:
    def cls(kind: str) -> str:
        return ' class="t"' if kind in ("t", "h", "ts") else (' class="why"' if kind == "w" else "")

    head = "".join(f"<th{cls(kind)}>{html.escape(title)}</th>" for _, title, kind in columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td{cls(kind)}>{_cell(row.get(key), kind)}</td>" for key, _, kind in columns)
        + "</tr>"
        for row in rows
    )
    return f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>'


# ---- rolls -----------------------------------------------------------------------------------


def _roll_section(
    roll: Row,
    phases: list[Row],
    episodes: dict[EpisodeKey, Row],
    links: dict[PhaseKey, list[EpisodeKey]],
    curves: dict[EpisodeKey, list[tuple[int, int]]],
) -> str:
    cluster, roll_id = roll["cluster"], roll["rollId"]
    curve_id = anchor("curves", cluster, roll_id)
    waited: list[EpisodeKey] = []
    for p in phases:
        for key in links.get((cluster, roll_id, p["node"], p["run"]), []):
            if key not in waited:
                waited.append(key)
    nodes: dict[str, Row] = {}
    for p in phases:
        n = nodes.setdefault(p["node"], {"node": p["node"], "phases": [], "episodes": []})
        n["phases"].append(p)
        if p["phase"] == "restart" and "restart" not in n:
            n["restart"] = p["start"]
        n["last"] = max(n.get("last", p["end"]), p["end"])
        for key in links.get((cluster, roll_id, p["node"], p["run"]), []):
            if key not in n["episodes"]:
                n["episodes"].append(key)
    rows = []
    for n in sorted(nodes.values(), key=lambda n: (n.get("restart") is None, n.get("restart"))):
        totals: dict[str, float] = {}
        for p in n["phases"]:
            totals[p["phase"]] = totals.get(p["phase"], 0.0) + p["seconds"]
        reasons = sorted({p["reason"] for p in n["phases"] if p["phase"] == "deferred"})
        links_html = ", ".join(
            f'<a href="#{curve_id}">{html.escape(_episode_label(k))}</a> '
            f"({duration(episodes[k]['elapsedSeconds'])}, {episodes[k]['outcome']})"
            for k in n["episodes"]
            if k in episodes
        )
        restart = n.get("restart")
        rows.append(
            {
                "node": n["node"],
                "restart": restart,
                "own": (n["last"] - restart) / 1000 if restart is not None else None,
                **{f"p:{k}": v for k, v in totals.items()},
                "why": html.escape("; ".join(reasons)),
                "episodes": links_html or "-",
            }
        )
    seen = {p["phase"] for p in phases}
    summary = (
        f"<p>{html.escape(cluster)} · started {when(roll['start'])}, last event "
        f"{when(roll['end'])} · outcome <strong>{html.escape(roll['outcome'])}</strong> · "
        f"<strong>{duration(roll['durationSeconds'])}</strong> from first to last event, "
        f"against <strong>{duration(roll['nodeSeconds'])}</strong> of its "
        f"{roll['restarted']} restarted nodes' own times (restart to ready, summed); "
        f"nodes waited for in log recovery: {roll['recoveryWaits']}.</p>"
    )
    parts = [
        f'<section class="roll" id="{anchor("roll", cluster, roll_id)}">',
        f"<h3>Roll {html.escape(roll_id)}</h3>",
        summary,
        _img(
            charts.roll_timeline(roll["start"], phases, [episodes[k] for k in waited]),
            f"timeline of roll {roll_id}",
        ),
        table(
            rows,
            [
                ("node", "node", "t"),
                ("restart", "restart (UTC)", "ts"),
                ("own", "own time", "d"),
                *((f"p:{phase}", phase, "d") for phase in charts.PHASE_COLOURS if phase in seen),
                *((("why", "deferred because", "w"),) if any(r["why"] for r in rows) else ()),
                ("episodes", "recovery episodes waited for (curve)", "h"),
            ],
        ),
    ]
    if waited:
        parts.append(
            _img(
                charts.curves(
                    {_episode_label(k): curves[k] for k in waited if k in curves},
                    f"Remaining segments of the recoveries roll {roll_id} waited for",
                ),
                f"recovery curves of roll {roll_id}",
                curve_id,
            )
        )
    parts.append("</section>")
    return "\n".join(parts)


def _episode_label(key: EpisodeKey) -> str:
    return f"{key[0]}/{key[1]} #{key[2]}"


def _rolls(
    rows: dict[str, list[Row]],
    links: dict[PhaseKey, list[EpisodeKey]],
    curves: dict[EpisodeKey, list[tuple[int, int]]],
) -> list[str]:
    rolls = rows["rolls"]  # latest first
    if not rolls:
        return [
            "<h2>Rolls</h2>",
            "<p class='note'>No roller events in this dataset: run `rollguard collect "
            "--events STATE_DIR` to import them.</p>",
        ]
    phases: dict[tuple[str, str], list[Row]] = {}
    for p in rows["roll_phases"]:
        phases.setdefault((p["cluster"], p["rollId"]), []).append(p)
    episodes = {(e["cluster"], e["node"], e["episode"]): e for e in rows["episodes"]}
    parts = [
        "<h2>Rolls</h2>",
        "<p class='note'>The latest first. A phase lasts from the roller's event to its next "
        "event about the node (it writes none when a wait ends); the dark thin bars are the "
        "recoveries each node's agent recorded.</p>",
    ]
    for roll in rolls[:ROLLS_CHARTED]:
        parts.append(
            _roll_section(
                roll, phases.get((roll["cluster"], roll["rollId"]), []), episodes, links, curves
            )
        )
    if len(rolls) > ROLLS_CHARTED:
        parts += [
            f"<h3>Earlier rolls ({len(rolls) - ROLLS_CHARTED}, the latest "
            f"{min(ROLLS_LISTED, len(rolls) - ROLLS_CHARTED)} listed)</h3>",
            table(
                rolls[ROLLS_CHARTED : ROLLS_CHARTED + ROLLS_LISTED],
                [
                    ("cluster", "cluster", "t"),
                    ("rollId", "roll", "t"),
                    ("start", "start (UTC)", "ts"),
                    ("outcome", "outcome", "t"),
                    ("durationSeconds", "duration", "d"),
                    ("nodeSeconds", "nodes' own times", "d"),
                    ("restarted", "restarted", "n"),
                    ("recoveryWaits", "waited in recovery", "n"),
                ],
            ),
        ]
    return parts


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
        _img(charts.daily(rows["daily"]), "recovery duration per cluster and day"),
        _img(charts.scatter(rows["episodes"], slow), "duration against segments at start"),
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
        _img(charts.rates(nodes), "recovery rate per node"),
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
    parts += _rolls(rows, links, curves)
    parts += _expectations(expected)
    parts += _trends(rows)
    slowest_curves = {
        _episode_label(k): v
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
        _img(charts.durations(episodes), "duration distribution"),
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
        _img(
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

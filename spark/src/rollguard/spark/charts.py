"""The report's charts, as PNG bytes in base64: each with its units on the axes and a legend
for every colour, sized to fit a 1280 px page (8 inches at 100 dpi is 800 px)."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

RATE_NODES = 30
TIMELINE_NODES = 40  # nodes drawn in a roll's timeline; the table lists them all
PER_NODE_COLOURS = 10  # the scatter colours each node when there are at most this many

# One colour per phase, the same in every roll's chart and legend.
PHASE_COLOURS = {
    "deferred": "#c9c9c9",
    "readiness wait": "#f2b134",
    "restart": "#4a7ebb",
    "log recovery": "#d9534f",
    "ISR catch-up": "#5cb85c",
    "skipped": "#eeeeee",
}
EPISODE_COLOUR = "#7a1f1c"


def _figure(height: float) -> tuple[Any, Any]:
    """A figure 8 inches wide (800 px) and its axes, in constrained layout, which fits the labels
    and the legends beside the axes as it is drawn: one drawing per chart in `png`, where
    savefig's bbox_inches="tight" draws it twice."""
    return plt.subplots(layout="constrained", figsize=(8, height))


def png(figure: Any) -> str:
    """The figure as a base64 PNG."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def _minutes(ms: float) -> float:
    return ms / 60000


def roll_timeline(
    start: int,
    phases: Sequence[dict[str, Any]],
    episodes: Sequence[dict[str, Any]],
) -> str:
    """Each node of a roll on its own line: its phases as coloured bars, and under them the
    recovery episodes its agent recorded (the roller only sees a recovery while it waits)."""
    order: list[str] = []
    for p in sorted(phases, key=lambda p: p["start"]):
        if p["node"] not in order:
            order.append(p["node"])
    shown = order[:TIMELINE_NODES]
    row = {node: i for i, node in enumerate(reversed(shown))}
    span = max((p["end"] for p in phases), default=start) - start
    unit, size = ("seconds", 1000) if span < 180_000 else ("minutes", 60_000)

    def at(ms: float) -> float:
        return ms / size

    height = max(1.8, 0.45 * len(shown) + 1.2)
    figure, axes = _figure(height)
    used: dict[str, None] = {}
    bars: dict[tuple[str, str], list[tuple[float, float]]] = {}  # one artist per node and phase
    restarts: tuple[list[float], list[float]] = ([], [])
    for p in phases:
        if p["node"] not in row:
            continue
        left = at(p["start"] - start)
        width = max(at(p["end"] - p["start"]), span / size / 400)
        bars.setdefault((p["node"], p["phase"]), []).append((left, width))
        used[p["phase"]] = None
        if p["phase"] == "restart":
            restarts[0].append(left)
            restarts[1].append(row[p["node"]] - 0.08)
    for (node, phase), spans in bars.items():
        colour = PHASE_COLOURS.get(phase, "#999999")
        axes.broken_barh(spans, (row[node] - 0.3, 0.45), color=colour)
    axes.plot(*restarts, marker="|", color="black", markersize=14, linestyle="")
    for e in episodes:
        if e["node"] not in row:
            continue
        end = e["end"] if e["end"] is not None else e["lastSeen"]
        axes.broken_barh(
            [(at(e["start"] - start), max(at(end - e["start"]), span / size / 400))],
            (row[e["node"]] + 0.2, 0.12),
            color=EPISODE_COLOUR,
        )
    axes.set_yticks(list(row.values()), list(row))
    axes.set_xlabel(f"{unit} since the roll's first event")
    axes.set_ylim(-0.7, len(shown) - 0.3)
    axes.set_xlim(left=min(0.0, axes.get_xlim()[0]))
    handles: list[Artist] = [Patch(color=PHASE_COLOURS.get(p, "#999999"), label=p) for p in used]
    if episodes:
        handles.append(Patch(color=EPISODE_COLOUR, label="recovery (agent's timeline)"))
    handles.append(Line2D([], [], marker="|", color="black", linestyle="", label="restart command"))
    axes.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes.grid(axis="x", alpha=0.3)
    return png(figure)


def curves(
    curves: dict[str, list[tuple[int, int]]], title: str = "Remaining segments over time"
) -> str:
    figure, axes = _figure(3.2)
    for label, points in curves.items():
        axes.plot([_minutes(t) for t, _ in points], [s for _, s in points], label=label)
    if curves:
        axes.legend(fontsize="small")
    axes.set_xlabel("minutes since the episode started")
    axes.set_ylabel("remaining segments")
    axes.set_title(title)
    return png(figure)


def durations(episodes: Sequence[dict[str, Any]]) -> str:
    figure, axes = _figure(3.2)
    by_cluster: dict[str, list[float]] = {}
    for e in episodes:
        if e["outcome"] == "completed":
            by_cluster.setdefault(e["cluster"], []).append(e["durationSeconds"] / 60)
    if by_cluster:
        count = sum(len(v) for v in by_cluster.values())
        bins = min(40, max(8, count // 3))
        axes.hist(list(by_cluster.values()), bins=bins, label=list(by_cluster), stacked=True)
        axes.legend(title="cluster", fontsize="small")
    axes.set_xlabel("recovery duration (minutes)")
    axes.set_ylabel("completed episodes")
    axes.set_title("Duration of completed recoveries")
    return png(figure)


def daily(rows: Sequence[dict[str, Any]]) -> str:
    """Per cluster and day: p50 and p90 as lines, the maximum as points."""
    figure, axes = _figure(3.2)
    clusters = sorted({r["cluster"] for r in rows})
    for i, cluster in enumerate(clusters):
        mine = [r for r in rows if r["cluster"] == cluster]
        days = [r["day"][5:] for r in mine]  # MM-DD: the year is in the table
        colour = f"C{i % 10}"
        axes.plot(days, [r["p50Seconds"] / 60 for r in mine], color=colour, label=f"{cluster} p50")
        axes.plot(
            days, [r["p90Seconds"] / 60 for r in mine], "--", color=colour, label=f"{cluster} p90"
        )
        axes.plot(
            days, [r["maxSeconds"] / 60 for r in mine], "^", color=colour, label=f"{cluster} max"
        )
    if clusters:
        axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes.set_xlabel("day of the recovery's start (UTC, month-day)")
    axes.set_ylabel("recovery duration (minutes)")
    axes.set_title("Completed recoveries per day")
    axes.tick_params(axis="x", labelsize="small", rotation=45)
    return png(figure)


def scatter(episodes: Sequence[dict[str, Any]], slow: set[tuple[str, str]]) -> str:
    """Duration against segments at start: a node with more data lies on the others' line
    further right, a slow node above it. A colour per node when there are few, else the
    flagged nodes against the rest."""
    figure, axes = _figure(3.6)
    points = [
        e
        for e in episodes
        if e["outcome"] == "completed" and e["segmentsAtStart"] and e["durationSeconds"]
    ]
    names = sorted({(e["cluster"], e["node"]) for e in points})
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for e in points:
        key = (e["cluster"], e["node"])
        if len(names) <= PER_NODE_COLOURS:
            label = f"{key[0]}/{key[1]}" + (" (flagged slow)" if key in slow else "")
        else:
            label = "nodes flagged slow" if key in slow else "other nodes"
        xs, ys = groups.setdefault(label, ([], []))
        xs.append(e["segmentsAtStart"])
        ys.append(e["durationSeconds"] / 60)
    for label, (xs, ys) in sorted(groups.items()):
        axes.scatter(xs, ys, s=10, alpha=0.7, label=label)
    if groups:
        axes.set_xscale("log")
        axes.set_yscale("log")
        # Below the axes: beside them, long node names would leave the points no width.
        figure.legend(fontsize="small", loc="outside lower center")
    axes.set_xlabel("segments to recover at the start (log scale)")
    axes.set_ylabel("recovery duration (minutes, log scale)")
    # The figure's title, which the layout keeps within the figure (an axes' title is centred
    # on the axes and may run past the figure's edge).
    figure.suptitle("Duration against data to recover, completed recoveries")
    return png(figure)


def slowest_rates(nodes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The RATE_NODES nodes with the lowest median rate, slowest first (ties by name)."""
    rated = (n for n in nodes if n["medianRate"] is not None)
    return sorted(rated, key=lambda n: (n["medianRate"], n["cluster"], n["node"]))[:RATE_NODES]


def rates_title(shown: int, rated: int) -> str:
    """The rate chart's title, which says what is drawn and in which order (the page's text too)."""
    which = f"the {shown} slowest of {rated}" if shown < rated else f"all {rated}"
    return f"Median recovery rate per node, slowest at the top ({which})"


def rates_figure(nodes: Sequence[dict[str, Any]]) -> Any:
    """Horizontal bars, the slowest node at the top: barh draws its first bar at the bottom, so
    the y axis is inverted."""
    shown = slowest_rates(nodes)
    rated = sum(1 for n in nodes if n["medianRate"] is not None)
    figure, axes = _figure(max(2.5, 0.25 * len(shown) + 1))
    colours = ["#d9534f" if n["slow"] else "#4a7ebb" for n in shown]
    axes.barh(
        [f"{n['cluster']}/{n['node']}" for n in shown],
        [n["medianRate"] for n in shown],
        color=colours,
    )
    axes.invert_yaxis()
    axes.set_xlabel("median recovery rate (segments per second)")
    figure.suptitle(rates_title(len(shown), rated))  # within the figure, whatever the names
    axes.tick_params(axis="y", labelsize="small")
    axes.legend(
        handles=[
            Patch(color="#d9534f", label="flagged slow"),
            Patch(color="#4a7ebb", label="not flagged"),
        ],
        fontsize="small",
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),  # beside the bars: the longest are at the bottom now
    )
    return figure


def rates(nodes: Sequence[dict[str, Any]]) -> str:
    return png(rates_figure(nodes))


def impact_title(shown: int, measured: int) -> str:
    which = f"the {shown} worst of {measured}" if shown < measured else f"all {measured}"
    return f"What a restart costs clients, per node, the worst at the top ({which})"


def client_impact_figure(nodes: Sequence[dict[str, Any]]) -> Any:
    """Per node across the fleet (the RATE_NODES worst: failed sends first, then the worst
    restart's p99): its worst and median restart p99 send latency as bars over each other, the
    baseline's p99 (the median over the nodes) as a line, and the sends that failed in its
    restarts beside them."""
    measured = [n for n in nodes if n["worstP99Ms"] is not None or n["failed"]]
    shown = sorted(
        measured, key=lambda n: (-(n["failed"] or 0), -(n["worstP99Ms"] or 0.0), n["node"])
    )[:RATE_NODES]
    figure, axes = _figure(max(2.5, 0.25 * len(shown) + 1.2))
    labels = [f"{n['cluster']}/{n['node']}" for n in shown]
    axes.barh(labels, [n["worstP99Ms"] or 0.0 for n in shown], color="#f2b134")
    axes.barh(labels, [n["medianP99Ms"] or 0.0 for n in shown], color="#4a7ebb", height=0.5)
    for i, n in enumerate(shown):
        if n["failed"]:
            axes.annotate(
                f" {n['failed']:,} failed",
                (n["worstP99Ms"] or 0.0, i),
                va="center",
                color="#d9534f",
                fontsize="small",
            )
    baselines = sorted(n["baselineP99Ms"] for n in shown if n["baselineP99Ms"] is not None)
    handles: list[Artist] = [
        Patch(color="#f2b134", label="worst restart's p99"),
        Patch(color="#4a7ebb", label="median restart's p99"),
    ]
    if baselines:
        baseline = baselines[len(baselines) // 2]
        axes.axvline(baseline, color="#555555", linestyle="--")
        handles.append(Line2D([], [], color="#555555", linestyle="--", label="idle baseline p99"))
    handles.append(Patch(color="#d9534f", label="N failed: sends that failed"))
    worst = max((n["worstP99Ms"] or 0.0 for n in shown), default=0.0)
    axes.set_xlim(0, max(worst, 1.0) * 1.25)  # room for the failures' labels
    axes.invert_yaxis()
    axes.set_xlabel("send latency p99 during the node's restarts (ms, canary acks=all)")
    axes.tick_params(axis="y", labelsize="small")
    figure.suptitle(impact_title(len(shown), len(measured)))
    axes.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return figure


def client_impact(nodes: Sequence[dict[str, Any]]) -> str:
    return png(client_impact_figure(nodes))

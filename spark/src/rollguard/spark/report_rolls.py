"""The report's rolls: one section per roll, the latest first, each with its timeline, its
nodes' phases and links from the recoveries it waited for to their curves."""

from __future__ import annotations

import html

from rollguard.spark import charts
from rollguard.spark.page import Row, anchor, duration, img, name, table, when, whole

ROLLS_CHARTED = 3  # the latest rolls, each with its timeline; the earlier ones in a table
ROLLS_LISTED = 30

EpisodeKey = tuple[str, str, int]
PhaseKey = tuple[str, str, str, int]


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
        # The row names the node: an episode is its number (the curve's legend has the same
        # `#N`), its duration and outcome, each kept on one line.
        links_html = ", ".join(
            whole(
                f'<a href="#{curve_id}">episode #{k[2]}</a> '
                f"({duration(episodes[k]['elapsedSeconds'])}, {episodes[k]['outcome']})"
            )
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
                "episodes": links_html,
            }
        )
    seen = {p["phase"] for p in phases}
    summary = (
        f"<p>{name(cluster)} · started {when(roll['start'])}, last event "
        f"{when(roll['end'])} · outcome <strong>{html.escape(roll['outcome'])}</strong> · "
        f"<strong>{duration(roll['durationSeconds'])}</strong> from first to last event, "
        f"against <strong>{duration(roll['nodeSeconds'])}</strong> of its "
        f"{roll['restarted']} restarted nodes' own times (restart to ready, summed); "
        f"nodes waited for in log recovery: {roll['recoveryWaits']}."
        + (
            f" Predicted before it started (expectations.json): "
            f"<strong>{duration(roll['predictedSeconds'])}</strong>."
            if roll.get("predictedSeconds") is not None
            else ""
        )
        + "</p>"
    )
    parts = [
        f'<section class="roll" id="{anchor("roll", cluster, roll_id)}">',
        f"<h3>Roll {html.escape(roll_id)}</h3>",
        summary,
        img(
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
            ],
            detail=[
                ("why", "deferred because"),
                ("episodes", "recovery episodes waited for (curve)"),
            ],
        ),
    ]
    if waited:
        parts.append(
            img(
                charts.curves(
                    {episode_label(k): curves[k] for k in waited if k in curves},
                    f"Remaining segments of the recoveries roll {roll_id} waited for",
                ),
                f"recovery curves of roll {roll_id}",
                curve_id,
            )
        )
    parts.append("</section>")
    return "\n".join(parts)


def episode_label(key: EpisodeKey) -> str:
    return f"{key[0]}/{key[1]} #{key[2]}"


def section(
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

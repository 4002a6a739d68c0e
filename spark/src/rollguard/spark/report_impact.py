"""The report's "What restarts cost clients": per roll and per node across the fleet, from the
roll canary's events (`rollguard.spark.impact`), with a chart of the nodes."""

from __future__ import annotations

from rollguard.spark import charts
from rollguard.spark.page import Row, img, table

ROLLS_LISTED = 30


def _against(row: Row) -> Row:
    """The row, with its worst restart's p99 said against its roll's baseline p99 (how many
    times slower)."""
    times = row["worstAgainstBaseline"]
    said = None if times is None else f"{times:,.1f} \N{MULTIPLICATION SIGN}"
    return {**row, "againstBaseline": said}


def section(rows: dict[str, list[Row]]) -> list[str]:
    """The section's HTML parts; one paragraph saying so when no roll had a canary."""
    rolls, nodes = rows.get("client_impact", []), rows.get("client_impact_nodes", [])
    parts = ["<h2>What restarts cost clients</h2>"]
    if not rolls:
        return [
            *parts,
            "<p class='note'>No roll in the dataset ran with a canary (`rollguard roll "
            "--canary TOPIC`): what its restarts cost clients was not measured.</p>",
        ]
    parts += [
        "<p class='note'>Measured by each roll's own canary (a producer with acks=all, a send "
        "every 100 ms, and a consumer; on a topic it made, a partition led by each broker), over "
        "each restart (or live step) from the node's restart to its being back in every ISR, "
        "against the idle baseline before the roll's first restart. Rolls without a canary "
        "are left out. The p99 is each restart's send latency p99; the median and the worst "
        "are over the restarts.</p>",
        f"<h3>Per roll (the latest {min(len(rolls), ROLLS_LISTED)} of {len(rolls)})</h3>",
        table(
            [_against(r) for r in rolls[:ROLLS_LISTED]],
            [
                ("cluster", "cluster", "t"),
                ("rollId", "roll", "t"),
                ("start", "first restart (UTC)", "ts"),
                ("restarts", "restarts measured", "n"),
                ("sent", "sends", "n"),
                ("failed", "failed", "n"),
                ("baselineP99Ms", "baseline p99 ms", "n"),
                ("medianP99Ms", "median p99 ms", "n"),
                ("worstP99Ms", "worst p99 ms", "n"),
                ("againstBaseline", "worst against baseline", "t"),
                ("maxMs", "slowest send ms", "n"),
                ("longestGapS", "longest consumer gap s", "n"),
            ],
        ),
        "<h3>Per node, across the fleet</h3>",
        img(charts.client_impact(nodes), "restart p99 send latency per node"),
        table(
            [_against(n) for n in nodes],
            [
                ("cluster", "cluster", "t"),
                ("node", "node", "t"),
                ("rolls", "rolls", "n"),
                ("restarts", "restarts measured", "n"),
                ("failed", "failed sends", "n"),
                ("medianP99Ms", "median p99 ms", "n"),
                ("worstP99Ms", "worst p99 ms", "n"),
                ("againstBaseline", "worst against baseline", "t"),
                ("longestGapS", "longest consumer gap s", "n"),
            ],
        ),
    ]
    return parts

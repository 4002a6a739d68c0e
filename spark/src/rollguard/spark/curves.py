"""Which recovery episodes each roll waited for, and the curves of remaining segments the
report draws of them (and of the slowest episodes), read by the driver with Arrow."""

from __future__ import annotations

import time
from typing import Any

import pyarrow.dataset as ds

from rollguard.shared.dataset import PARTITIONS, TIMELINE
from rollguard.spark.schema import arrow_schema

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
# What a curve needs of the timeline, in the order its rows are unpacked (after `cluster`).
CURVE_COLUMNS = ("node", "journal", "seq", "ts", "remainingSegmentsToRecover")


def read_curves(
    timeline: str,
    episode_rows: list[dict[str, Any]],
    links: dict[PhaseKey, list[EpisodeKey]],
) -> dict[EpisodeKey, list[tuple[int, int]]]:
    """Remaining segments over time of the slowest episodes and of those rolls waited for.

    A few thousand points from a few nodes, for the charts: read by the driver with Arrow from
    the collector's folders they are in, not by a Spark job. A Spark scan of 10M records took
    3 s for them (17 s before its cheap filters came first); the driver already reads the
    dataset's folder (`find_inputs`), so it sees the files wherever the executors do."""
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
    folders = ds.partitioning(arrow_schema(PARTITIONS), flavor="hive")
    columns = arrow_schema([*(TIMELINE.column(name) for name in CURVE_COLUMNS), *PARTITIONS])
    table = ds.dataset(timeline, schema=columns, format="parquet", partitioning=folders).to_table(
        columns=["cluster", *CURVE_COLUMNS],
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
    drawn: dict[EpisodeKey, list[tuple[int, int]]] = {}
    for e in wanted:
        points = sorted(
            (seq, ts - e["start"], remaining)
            for seq, ts, remaining in by_journal.get((e["cluster"], e["node"], e["journal"]), [])
            if e["firstSeq"] <= seq <= e["lastSeq"]
        )
        drawn[_key(e)] = [(t, s) for _, t, s in points]
    return drawn


def _days(first_ms: int, last_ms: int) -> list[str]:
    """The UTC days (YYYY-MM-DD, the collector's `date=` folders) from `first_ms` to `last_ms`."""
    first, last = first_ms // DAY_MS, last_ms // DAY_MS
    return [
        time.strftime("%Y-%m-%d", time.gmtime(day * DAY_MS // 1000))
        for day in range(first, last + 1)
    ]


def _key(e: dict[str, Any]) -> EpisodeKey:
    return (e["cluster"], e["node"], e["episode"])

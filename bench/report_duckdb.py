"""The recovery report's tables computed with DuckDB SQL: the reference for
rollguard.spark.episodes.

    from report_duckdb import compute
    tables = compute(Path("/tmp/benchreport/1000000-1"))  # {"episodes": [{...}, ...], ...}

The same definitions as rollguard.spark.episodes (its module docstring), written independently:
after the one pass over each node's records ordered by (journal, seq) that numbers the episodes, the
within-episode steps run over windows partitioned by episode, and the per-episode values are taken
with arg_min/arg_max instead of structs. Returned tables: episodes (the eta structs flattened into
`eta25.sampleTs`, `eta25.predicted`, ...), nodes, clusters, eta, eta_summary, daily, rolls and
roll_phases (rollguard.spark.trends and .rolls); each a list of row dicts in key order. Used by
bench/report.py, which compares it with Spark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

FRACTIONS = (25, 50, 75)
SLOWEST = 3
MIN_EPISODES = 5  # rollguard.shared.expectations.MIN_EPISODES
SLOW_FACTOR = 2.0  # rollguard.spark.trends.SLOW_FACTOR
# action -> phase, as rollguard.spark.rolls.PHASES
PHASES = {
    "defer": "deferred",
    "wait-ready": "readiness wait",
    "restart": "restart",
    "wait-recovery": "log recovery",
    "catch-up": "ISR catch-up",
    "skip": "skipped",
    "ready": "ready",
}

# {phase} is the recoveryPhase column, or NULL for a dataset collected before it existed.
_EPISODE_ROWS = """
CREATE TEMP TABLE episode_rows AS
WITH timeline AS (
    SELECT cluster, node, journal, bootId, seq, ts, brokerState AS state,
           remainingLogsToRecover AS logs, remainingSegmentsToRecover AS segs,
           {phase} AS phase
    FROM read_parquet(?, hive_partitioning = true, union_by_name = true)
),
deduped AS (
    SELECT DISTINCT ON (cluster, node, journal, seq) *,
        -- in recovery: by the phase when the agent wrote one (a clean start's loading and
        -- 'none', not loading, are not; 'recovering' or an unknown phase is); without one
        -- (an older agent), RECOVERY, or STARTING with figures
        CASE WHEN phase IS NULL THEN coalesce(state = 2 OR (state = 1 AND logs IS NOT NULL), false)
             ELSE phase NOT IN ('loading', 'none') END AS rec,
        -- ending an episode, completes it: RUNNING, PENDING_CONTROLLED_SHUTDOWN, or the logs
        -- loaded (a phase-aware 'none') while STARTING or RECOVERY waits for the registration
        coalesce(state IN (3, 6) OR (phase = 'none' AND state IN (1, 2)), false) AS finished
    FROM timeline
),
neighbours AS (
    SELECT *,
        coalesce(lag(bootId) OVER w = bootId AND lag(journal) OVER w = journal
                 AND lag(rec) OVER w, false) AS prevRec,
        CASE WHEN lag(journal) OVER w = journal THEN seq - lag(seq) OVER w - 1 ELSE 0 END
            AS missing,
        lead(seq) OVER w IS NOT NULL AS hasNext
    FROM deduped
    WINDOW w AS (PARTITION BY cluster, node ORDER BY journal, seq)
),
numbered AS (
    SELECT *,
        rec AND NOT prevRec AS isStart,
        prevRec AND NOT rec AS isEnd,
        sum((rec AND NOT prevRec)::BIGINT) OVER (
            PARTITION BY cluster, node ORDER BY journal, seq ROWS UNBOUNDED PRECEDING
        ) AS episode
    FROM neighbours
)
SELECT *, rec AND segs IS NOT NULL AS counted FROM numbered WHERE rec OR isEnd
"""

_EPISODE_STEPS = """
CREATE TEMP TABLE steps AS
WITH previous AS (
    SELECT *,
        last_value(CASE WHEN counted THEN segs END IGNORE NULLS) OVER (
            PARTITION BY cluster, node, episode ORDER BY seq
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS prevSegs,
        first_value(CASE WHEN counted THEN segs END IGNORE NULLS) OVER (
            PARTITION BY cluster, node, episode ORDER BY seq
            ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
        ) AS originSegs
    FROM episode_rows
),
progressed AS (
    SELECT *,
        coalesce(counted AND segs < prevSegs, false) OR (isEnd AND finished) AS progress,
        CASE WHEN counted AND originSegs > 0
            THEN (originSegs - segs)::DOUBLE * 100.0::DOUBLE / originSegs END AS fraction
    FROM previous
)
SELECT *,
    ts - last_value(CASE WHEN isStart OR progress THEN ts END IGNORE NULLS) OVER (
        PARTITION BY cluster, node, episode ORDER BY seq
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS stall
FROM progressed
"""


def _at(p: int) -> str:
    return (
        f"arg_min(ts, seq) FILTER (WHERE fraction >= {p}) AS at{p}Ts,\n"
        f"arg_min(segs, seq) FILTER (WHERE fraction >= {p}) AS at{p}Segs"
    )


def _eta(p: int) -> str:
    ok = f"completed AND at{p}Ts IS NOT NULL AND at{p}Ts - originTs > 0"
    predicted = f"at{p}Ts + at{p}Segs * (at{p}Ts - originTs)::DOUBLE / (originSegs - at{p}Segs)"
    return (
        f'CASE WHEN {ok} THEN at{p}Ts END AS "eta{p}.sampleTs",\n'
        f'CASE WHEN {ok} THEN {predicted} END AS "eta{p}.predicted"'
    )


_AGGREGATE = f"""
CREATE TEMP TABLE aggregated AS
SELECT cluster, node, episode,
    arg_min(bootId, seq) FILTER (WHERE rec) AS bootId,
    arg_min(journal, seq) FILTER (WHERE rec) AS journal,
    min(seq) FILTER (WHERE rec) AS firstSeq,
    max(seq) FILTER (WHERE rec) AS lastRecSeq,
    arg_min(ts, seq) FILTER (WHERE rec) AS start,
    arg_max(ts, seq) FILTER (WHERE rec) AS lastSeen,
    arg_max(hasNext, seq) FILTER (WHERE rec) AS hasNext,
    bool_or(isEnd) AS ended,
    max(seq) FILTER (WHERE isEnd) AS endSeq,
    max(ts) FILTER (WHERE isEnd) AS endTs,
    bool_or(finished) FILTER (WHERE isEnd) AS endFinished,
    arg_min(ts, seq) FILTER (WHERE counted) AS originTs,
    arg_min(segs, seq) FILTER (WHERE counted) AS originSegs,
    arg_min_null(logs, seq) FILTER (WHERE counted) AS originLogs,
    arg_max(ts, seq) FILTER (WHERE counted) AS latestTs,
    arg_max(segs, seq) FILTER (WHERE counted) AS latestSegs,
    max(stall) AS longestStall,
    sum(missing)::BIGINT AS missingRecords,
    count(*) FILTER (WHERE rec) AS records,
    {",".join(_at(p) for p in FRACTIONS)}
FROM steps
GROUP BY cluster, node, episode
"""

_EPISODES = f"""
CREATE TEMP TABLE episodes AS
WITH outcomes AS (
    SELECT *,
        coalesce(ended AND endFinished, false) AS completed,
        CASE WHEN ended THEN endTs WHEN hasNext THEN lastSeen END AS "end"
    FROM aggregated
),
rates AS (
    SELECT *,
        originSegs - CASE WHEN completed THEN 0 ELSE latestSegs END AS recovered,
        (CASE WHEN completed THEN endTs ELSE latestTs END - originTs)::DOUBLE / 1000 AS rateTime
    FROM outcomes
),
episodes AS (
    SELECT cluster, node, episode, bootId, journal, firstSeq,
        coalesce(endSeq, lastRecSeq) AS lastSeq,
        start, "end",
        CASE WHEN completed THEN 'completed'
             WHEN ended OR hasNext THEN 'interrupted'
             ELSE 'running' END AS outcome,
        ("end" - start)::DOUBLE / 1000 AS durationSeconds,
        lastSeen,
        (coalesce("end", lastSeen) - start)::DOUBLE / 1000 AS elapsedSeconds,
        originLogs AS logsAtStart,
        originSegs AS segmentsAtStart,
        CASE WHEN rateTime > 0 THEN recovered / rateTime END AS meanRate,
        coalesce(longestStall, 0)::DOUBLE / 1000 AS longestStallSeconds,
        missingRecords,
        records,
        {",".join(_eta(p) for p in FRACTIONS)}
    FROM rates
)
SELECT * FROM episodes
"""

_ROLLER = """
SELECT e.*,
    count(*) FILTER (WHERE a.action = 'restart') AS rollerRestarts,
    count(DISTINCT a.rollId) FILTER (WHERE a.action = 'wait-recovery') AS skippedRestarts
FROM episodes e
LEFT JOIN (
    SELECT cluster, node, ts, rollId, action
    FROM read_parquet(?, hive_partitioning = true)
    WHERE node IS NOT NULL AND action IN ('restart', 'wait-recovery')
) a ON a.cluster = e.cluster AND a.node = e.node
    AND a.ts BETWEEN e.start AND coalesce(e."end", e.lastSeen)
GROUP BY ALL
ORDER BY e.cluster, e.node, e.episode
"""

_NO_ROLLER = """
SELECT *, 0::BIGINT AS rollerRestarts, 0::BIGINT AS skippedRestarts
FROM episodes ORDER BY cluster, node, episode
"""

_NODES = f"""
CREATE TEMP TABLE nodes AS
WITH per_node AS (
    SELECT cluster, node,
        count(*) AS episodes,
        count(*) FILTER (WHERE outcome = 'completed') AS completed,
        quantile_cont(durationSeconds, 0.5) FILTER (WHERE outcome = 'completed') AS p50Seconds,
        quantile_cont(durationSeconds, 0.9) FILTER (WHERE outcome = 'completed') AS p90Seconds,
        quantile_cont(durationSeconds, 0.99) FILTER (WHERE outcome = 'completed') AS p99Seconds,
        max(durationSeconds) FILTER (WHERE outcome = 'completed') AS maxSeconds,
        avg(meanRate) AS meanRate,
        count(meanRate) AS ratedEpisodes,
        quantile_cont(meanRate, 0.5) AS medianRate,
        max(longestStallSeconds) AS longestStallSeconds
    FROM episodes
    GROUP BY cluster, node
),
judged AS (
    SELECT *,
        quantile_cont(CASE WHEN ratedEpisodes >= {MIN_EPISODES} THEN medianRate END, 0.5)
            OVER (PARTITION BY cluster) AS clusterRate
    FROM per_node
)
SELECT *,
    coalesce(ratedEpisodes >= {MIN_EPISODES} AND medianRate < clusterRate / {SLOW_FACTOR}, false)
        AS slow
FROM judged
"""

_DAILY = """
SELECT cluster, strftime(epoch_ms(start), '%Y-%m-%d') AS day,
    count(*) AS completed,
    quantile_cont(durationSeconds, 0.5) AS p50Seconds,
    quantile_cont(durationSeconds, 0.9) AS p90Seconds,
    max(durationSeconds) AS maxSeconds
FROM episodes
WHERE outcome = 'completed'
GROUP BY ALL
ORDER BY cluster, day
"""

_PHASE_OF = "\n".join(f"WHEN '{action}' THEN '{phase}'" for action, phase in PHASES.items())

_EVENTS = """
CREATE TEMP TABLE events AS
SELECT ts, rollId, node, action, reason, seconds, cluster
FROM read_parquet(?, hive_partitioning = true, union_by_name = true)
"""

_ROLLS = """
WITH per_node AS (
    SELECT cluster, rollId, node,
        min(ts) FILTER (WHERE action = 'restart') AS restartTs,
        max(ts) FILTER (WHERE action = 'ready') AS readyTs,
        bool_or(action = 'wait-recovery') AS waited
    FROM events WHERE node IS NOT NULL
    GROUP BY ALL
),
node_totals AS (
    SELECT cluster, rollId,
        count(restartTs) AS restarted,
        sum(CASE WHEN readyTs >= restartTs THEN readyTs - restartTs END)::DOUBLE / 1000
            AS nodeSeconds,
        count(*) FILTER (WHERE waited) AS recoveryWaits
    FROM per_node
    GROUP BY ALL
),
per_roll AS (
    SELECT cluster, rollId, min(ts) AS start, max(ts) AS "end",
        max(struct_pack(ts := ts, action := action)) FILTER (
            WHERE node IS NULL
            AND action IN ('roll-completed', 'roll-failed', 'roll-interrupted')
        ) AS lastOutcome,
        max(seconds) FILTER (WHERE node IS NULL AND action = 'roll-predicted')
            AS predictedSeconds
    FROM events
    GROUP BY ALL
)
SELECT r.cluster, r.rollId, r.start, r."end",
    coalesce(regexp_replace(r.lastOutcome.action, '^roll-', ''), 'unfinished') AS outcome,
    (r."end" - r.start)::DOUBLE / 1000 AS durationSeconds,
    coalesce(n.restarted, 0) AS restarted,
    n.nodeSeconds,
    coalesce(n.recoveryWaits, 0) AS recoveryWaits,
    r.predictedSeconds
FROM per_roll r LEFT JOIN node_totals n USING (cluster, rollId)
ORDER BY r.start DESC, r.cluster, r.rollId
"""

_PHASES = f"""
WITH marked AS (
    SELECT cluster, rollId, node, ts, action, reason,
        CASE action {_PHASE_OF} END AS phase,
        CASE WHEN action IN ('defer', 'wait-ready', 'skip') THEN coalesce(reason, '') ELSE ''
            END AS why
    FROM events
    WHERE node IS NOT NULL AND action IN ({", ".join(f"'{a}'" for a in PHASES)})
),
neighbours AS (
    SELECT *,
        lead(ts) OVER w AS next,
        coalesce(lag(phase) OVER w <> phase OR lag(why) OVER w <> why, true) AS change
    FROM marked
    WINDOW w AS (PARTITION BY cluster, rollId, node ORDER BY ts, action, reason NULLS FIRST)
),
runs AS (
    SELECT *,
        sum(change::BIGINT) OVER (
            PARTITION BY cluster, rollId, node ORDER BY ts, action, reason NULLS FIRST
            ROWS UNBOUNDED PRECEDING
        )::BIGINT AS run
    FROM neighbours
),
grouped AS (
    SELECT cluster, rollId, node, run,
        any_value(phase) AS phase,
        any_value(why) AS reason,
        min(ts) AS start,
        max(coalesce(next, ts)) AS "end",
        count(*) AS events
    FROM runs
    GROUP BY ALL
)
SELECT cluster, rollId, node, run, phase, reason, start, "end",
    ("end" - start)::DOUBLE / 1000 AS seconds, events
FROM grouped
WHERE phase <> 'ready'
ORDER BY cluster, rollId, node, run
"""

_CLUSTERS = f"""
WITH per_cluster AS (
    SELECT cluster,
        count(*) AS episodes,
        count(*) FILTER (WHERE outcome = 'completed') AS completed,
        count(*) FILTER (WHERE outcome = 'interrupted') AS interrupted,
        count(*) FILTER (WHERE outcome = 'running') AS running,
        quantile_cont(durationSeconds, 0.5) FILTER (WHERE outcome = 'completed') AS p50Seconds,
        quantile_cont(durationSeconds, 0.9) FILTER (WHERE outcome = 'completed') AS p90Seconds,
        quantile_cont(durationSeconds, 0.99) FILTER (WHERE outcome = 'completed') AS p99Seconds,
        max(durationSeconds) FILTER (WHERE outcome = 'completed') AS maxSeconds
    FROM episodes
    GROUP BY cluster
),
ranked AS (
    SELECT cluster, node,
        row_number() OVER (PARTITION BY cluster ORDER BY maxSeconds DESC, node) AS rank
    FROM nodes
    WHERE maxSeconds IS NOT NULL
),
slowest AS (
    SELECT cluster, list(node ORDER BY rank) AS slowestNodes
    FROM ranked WHERE rank <= {SLOWEST} GROUP BY cluster
)
SELECT per_cluster.*, slowest.slowestNodes
FROM per_cluster LEFT JOIN slowest USING (cluster)
ORDER BY cluster
"""

_ETA = " UNION ALL ".join(
    f"""
    SELECT cluster, node, episode, bootId, start, {p} AS progressPercent,
        "eta{p}.sampleTs" AS sampleTs, "eta{p}.predicted" AS predictedEnd, "end" AS actualEnd
    FROM episodes WHERE "eta{p}.sampleTs" IS NOT NULL"""
    for p in FRACTIONS
)

_ETA_TABLE = f"""
CREATE TEMP TABLE eta AS
WITH points AS ({_ETA}),
errors AS (SELECT *, (predictedEnd - actualEnd)::DOUBLE / 1000 AS errorSeconds FROM points)
SELECT *, errorSeconds / nullif((actualEnd - start)::DOUBLE / 1000, 0) AS relativeError
FROM errors
"""

_ETA_SUMMARY = """
SELECT cluster, progressPercent,
    count(*) AS episodes,
    quantile_cont(abs(relativeError), 0.5) AS medianAbsRelativeError,
    quantile_cont(errorSeconds, 0.5) AS medianErrorSeconds
FROM eta
GROUP BY cluster, progressPercent
ORDER BY cluster, progressPercent
"""


def _rows(con: duckdb.DuckDBPyConnection, sql: str, *params: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql, list(params))
    names = [d[0] for d in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _phase_column(con: duckdb.DuckDBPyConnection, pattern: str) -> str:
    """recoveryPhase if some file has it; NULL when none has (collected before it existed)."""
    probe = "SELECT * FROM read_parquet(?, hive_partitioning = true, union_by_name = true) LIMIT 0"
    names = {d[0] for d in con.execute(probe, [pattern]).description or ()}
    return "recoveryPhase" if "recoveryPhase" in names else "NULL::VARCHAR"


def compute(dataset: Path) -> dict[str, list[dict[str, Any]]]:
    """Every table of the report for the dataset folder (timeline/ and, if any, events/)."""
    timeline = dataset / "timeline"
    events = dataset / "events"
    with duckdb.connect() as con:
        con.execute("SET enable_progress_bar = false")
        pattern = str(timeline / "**" / "*.parquet")
        con.execute(_EPISODE_ROWS.format(phase=_phase_column(con, pattern)), [pattern])
        con.execute(_EPISODE_STEPS)
        con.execute(_AGGREGATE)
        con.execute(_EPISODES)
        has_events = events.is_dir() and any(events.rglob("*.parquet"))
        if has_events:
            episodes = _rows(con, _ROLLER, str(events / "**" / "*.parquet"))
            con.execute(_EVENTS, [str(events / "**" / "*.parquet")])
        else:
            episodes = _rows(con, _NO_ROLLER)
        con.execute(_NODES)
        con.execute(_ETA_TABLE)
        return {
            "episodes": episodes,
            "nodes": _rows(con, "SELECT * FROM nodes ORDER BY cluster, node"),
            "clusters": _rows(con, _CLUSTERS),
            "eta": _rows(con, "SELECT * FROM eta ORDER BY cluster, node, episode, progressPercent"),
            "eta_summary": _rows(con, _ETA_SUMMARY),
            "daily": _rows(con, _DAILY),
            "rolls": _rows(con, _ROLLS) if has_events else [],
            "roll_phases": _rows(con, _PHASES) if has_events else [],
        }

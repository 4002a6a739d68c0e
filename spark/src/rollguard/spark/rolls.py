"""Rolls from the roller's events: one row per roll, and each node's phases within it.

The roller writes an event when something about a node changes (rollguard.roller.roll: `defer`
and `wait-ready` once per new reason, `restart`, `wait-recovery` at every poll while it waits
for a log recovery, `catch-up` when the count of partitions out of the ISR changes, `ready` at
the end) and `roll-completed` / `roll-failed` / `roll-interrupted` without a node. It writes no
event when a recovery or a readiness wait ends, so a phase is taken to last from its event to
the node's next phase event (definitions below; docs/operations.md, The report, for people).

Definitions (bench/report_duckdb.py computes the same independently):
- phase events: a node's events in PHASES; a node's events in a roll are ordered by
  (ts, action, reason), the same order in every engine;
- a phase starts at a phase event whose (phase, reason) differs from the node's previous phase
  event's, and takes the following events of the same (phase, reason); it ends at the node's
  first phase event after its last one (its own time when there is none): a `ready` ends the
  node's last phase and is not a phase itself;
- reasons are kept for deferrals and readiness waits (why the roller held back); the other
  phases' reasons change at every poll (remaining segments, partitions) and would split them;
- a roll starts at its first event and ends at its last; its outcome is the action of its last
  roll-completed/-failed/-interrupted event, "unfinished" without one;
- a node's own time in a roll: from its first `restart` to its last `ready` after it; the sum
  of these against the roll's duration shows how much of a roll was waiting its turn.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from rollguard.shared.dataset import ROLL_OUTCOMES, Event

# action -> phase shown in the report (`ready` only ends the one before it)
# The roller's event names (`shared.dataset.Event`), as plain strings for Spark's literals.
PHASES = {
    Event.DEFER.value: "deferred",
    Event.WAIT_READY.value: "readiness wait",
    Event.RESTART.value: "restart",
    Event.WAIT_RECOVERY.value: "log recovery",
    Event.CATCH_UP.value: "ISR catch-up",
    Event.SKIP.value: "skipped",
    Event.READY.value: "ready",
    Event.CONFIGURE.value: "live configuration",  # changed live, not restarted
    Event.CONFIGURED.value: "ready",
}
# The roll's own canary (`--canary`) speaks before the roll starts (its baseline) and after it
# ends (the last restart's cost): not the roll's duration.
CANARY = "canary-"
REASONED = (Event.DEFER.value, Event.WAIT_READY.value, Event.SKIP.value)
OUTCOMES = tuple(e.value for e in ROLL_OUTCOMES)


def _phase(action: Column) -> Column:
    out = F.lit(None).cast("string")
    for name, phase in PHASES.items():
        out = F.when(action == name, phase).otherwise(out)
    return out


def phases(events: DataFrame) -> DataFrame:
    """One row per node phase of a roll: cluster, rollId, node, run, phase, reason, start, end,
    seconds, events."""
    w = Window.partitionBy("cluster", "rollId", "node").orderBy("ts", "action", "reason")
    marked = events.filter(F.col("node").isNotNull() & F.col("action").isin(*PHASES)).select(
        "cluster",
        "rollId",
        "node",
        "ts",
        "action",
        "reason",
        _phase(F.col("action")).alias("phase"),
        F.when(F.col("action").isin(*REASONED), F.coalesce(F.col("reason"), F.lit("")))
        .otherwise(F.lit(""))
        .alias("why"),
    )
    marked = marked.select(
        "*",
        F.lead("ts").over(w).alias("next"),
        F.coalesce(
            (F.lag("phase").over(w) != F.col("phase")) | (F.lag("why").over(w) != F.col("why")),
            F.lit(True),
        ).alias("change"),
    )
    marked = marked.select(
        "*",
        F.sum(F.col("change").cast("long"))
        .over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        .alias("run"),
    )
    runs = marked.groupBy("cluster", "rollId", "node", "run").agg(
        F.first("phase").alias("phase"),
        F.first("why").alias("reason"),
        F.min("ts").alias("start"),
        F.max(F.coalesce("next", "ts")).alias("end"),
        F.count("*").alias("events"),
    )
    return runs.filter(F.col("phase") != "ready").select(
        "cluster",
        "rollId",
        "node",
        "run",
        "phase",
        "reason",
        "start",
        "end",
        ((F.col("end") - F.col("start")).cast("double") / 1000.0).alias("seconds"),
        "events",
    )


def rolls(events: DataFrame) -> DataFrame:
    """One row per roll: cluster, rollId, start, end, outcome, durationSeconds, restarted,
    nodeSeconds (the sum of its nodes' own times), recoveryWaits (nodes waited for),
    predictedSeconds (what the roller predicted from expectations.json before it started, its
    `roll-predicted` event; null without one)."""
    per_node = (
        events.filter(F.col("node").isNotNull())
        .groupBy("cluster", "rollId", "node")
        .agg(
            F.min(F.when(F.col("action") == "restart", F.col("ts"))).alias("restartTs"),
            F.max(F.when(F.col("action") == "ready", F.col("ts"))).alias("readyTs"),
            F.max(F.col("action") == "wait-recovery").alias("waited"),
        )
        .select(
            "cluster",
            "rollId",
            "restartTs",
            "waited",
            F.when(
                F.col("readyTs") >= F.col("restartTs"), F.col("readyTs") - F.col("restartTs")
            ).alias("own"),
        )
        .groupBy("cluster", "rollId")
        .agg(
            F.count("restartTs").alias("restarted"),
            (F.sum("own").cast("double") / 1000.0).alias("nodeSeconds"),
            F.count(F.when(F.col("waited"), True)).alias("recoveryWaits"),
        )
    )
    last = F.max(
        F.when(
            F.col("node").isNull() & F.col("action").isin(*OUTCOMES),
            F.struct("ts", "action"),
        )
    )
    predicted = F.max(
        F.when(F.col("node").isNull() & (F.col("action") == "roll-predicted"), F.col("seconds"))
    )
    rolled = F.when(~F.col("action").startswith(CANARY), F.col("ts"))
    per_roll = events.groupBy("cluster", "rollId").agg(
        F.min(rolled).alias("start"),
        F.max(rolled).alias("end"),
        last.alias("_last"),
        predicted.alias("predictedSeconds"),
    )
    return per_roll.join(per_node, ["cluster", "rollId"], "left").select(
        "cluster",
        "rollId",
        "start",
        "end",
        F.coalesce(
            F.regexp_replace(F.col("_last")["action"], "^roll-", ""), F.lit("unfinished")
        ).alias("outcome"),
        ((F.col("end") - F.col("start")).cast("double") / 1000.0).alias("durationSeconds"),
        F.coalesce("restarted", F.lit(0).cast("long")).alias("restarted"),
        "nodeSeconds",
        F.coalesce("recoveryWaits", F.lit(0).cast("long")).alias("recoveryWaits"),
        "predictedSeconds",
    )

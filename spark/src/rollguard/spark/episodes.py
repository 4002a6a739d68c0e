"""Recovery episodes from agents' timelines: the computation, as Spark DataFrame operations.

A node's records are ordered by (journal, seq), never by time: clocks of different nodes, or one
node's clock before and after a step, do not agree, while `seq` is the agent's own order. Every
step runs over one window partitioned by (cluster, node), so the input is shuffled and sorted
once; everything after the window (the per-episode aggregation, the roller's events) is small.

Definitions (docs/architecture.md, "Recovery report", says the same for people):
- duplicates: records with the same (cluster, node, journal, seq) are one record (the agent's
  (bootId, seq) is unique per journal; `journal` is the collector's count of journal resets);
- a record's recoveryPhase is what the agent knew of the log loading: `recovering` (a
  recovery after an unclean stop), `loading` (a clean start's loading: nothing is replayed) or
  `none` (a phase-aware agent's sample without loading figures: the broker is not loading its
  logs); null from an agent older than the field, in a dataset collected before the column
  existed, and when the agent had no sample (the state is null too);
- a record is in recovery when its phase is `recovering`; not when it is `loading` or `none`;
  and, without a phase, by the rule of the older agents: its state is RECOVERY (2), or STARTING
  (1) with remainingLogsToRecover (a Kafka 4.x broker loads its logs in either state). A
  phase-aware agent's RECOVERY record without figures (before the loading, or after it while
  the broker waits to be unfenced) is therefore no recovery;
- an episode starts at a record in recovery whose predecessor in the same boot and journal is
  not in recovery, and takes every following record in recovery of that boot;
- it ends at the first record of the same boot that is not in recovery, which completes it when
  the recovery is over: RUNNING (3) or PENDING_CONTROLLED_SHUTDOWN (6), or a phase-aware record
  (`none`) in STARTING or RECOVERY (the logs are loaded and the broker waits for its
  registration to be accepted, up to the old one's session timeout). Anything else interrupts
  it: another state, a `loading` record, a record without a phase in STARTING or NOT_RUNNING,
  a lost sample (null state: the agent could not read the broker, whose JVM went away). When
  the boot's records stop in recovery it was interrupted if the node has later records (a
  later boot), and is still running otherwise;
- progress is a fall of remainingSegmentsToRecover (or completion); a stall is the time from
  the episode's start or its last progress to a record; the longest stall is the largest;
- counters may be missing (null) on any record; an episode's start counters are those of its
  first record that has them, and its mean rate is segments recovered per second from there;
- missing records: the sum of the jumps in seq within the episode (including just before its
  first record), so an episode seen through a gap is flagged rather than silently shortened;
- ETA accuracy: at the first record in recovery where the recovered fraction of the start
  segments reaches 25 %, 50 % or 75 %, the finish predicted from the mean rate so far, against
  the actual finish of completed episodes.
Progress, rates and ETAs are still counted in segments, although on a real broker the segment
count is per log (it rises when a recovery thread starts its next log) and the log count is the
measure of progress (rollguard.shared.wire).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from rollguard.shared.dataset import Event

# The dataset's tables as this job reads them (rollguard.spark.schema), known from here too.
from rollguard.spark.schema import EVENTS_SCHEMA as EVENTS_SCHEMA
from rollguard.spark.schema import TIMELINE_SCHEMA as TIMELINE_SCHEMA

STARTING, RECOVERY = 1, 2
# recoveryPhase values (rollguard.shared.wire.RecoveryPhase, rollguard.shared.timeline)
LOADING, NO_RECOVERY = "loading", "none"
DONE_STATES = (3, 6)  # RUNNING, PENDING_CONTROLLED_SHUTDOWN: recovery is over
FRACTIONS = (25, 50, 75)
EPISODE_KEY = ("cluster", "node", "episode")


def _seconds(ms: Column) -> Column:
    return ms.cast("double") / 1000.0


def in_recovery(state: Column, logs: Column, phase: Column) -> Column:
    """Whether a record is in recovery (the module's definition); never null. A phase this
    job does not know counts as `recovering`, as the agent's readers take it."""
    legacy = (state == RECOVERY) | ((state == STARTING) & logs.isNotNull())
    return F.when(phase.isNull(), F.coalesce(legacy, F.lit(False))).otherwise(
        ~phase.isin(LOADING, NO_RECOVERY)
    )


def recovery_over(state: Column, phase: Column) -> Column:
    """Whether a record that ends an episode completes it (the module's definition); never
    null."""
    waiting = (phase == NO_RECOVERY) & state.isin(STARTING, RECOVERY)
    return F.coalesce(state.isin(*DONE_STATES) | waiting, F.lit(False))


def annotate(timeline: DataFrame) -> DataFrame:
    """Each record with its episode number and what the episode's aggregation needs."""
    w = Window.partitionBy("cluster", "node").orderBy("journal", "seq")
    running = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    t = timeline.select(
        "cluster",
        "node",
        "journal",
        "bootId",
        "seq",
        "ts",
        F.col("brokerState").alias("state"),
        F.col("remainingLogsToRecover").alias("logs"),
        F.col("remainingSegmentsToRecover").alias("segs"),
        in_recovery(
            F.col("brokerState"), F.col("remainingLogsToRecover"), F.col("recoveryPhase")
        ).alias("rec"),
        recovery_over(F.col("brokerState"), F.col("recoveryPhase")).alias("finished"),
    )
    # Duplicates are neighbours in this order: keep the first of each (journal, seq).
    dup = (F.lag("seq").over(w) == F.col("seq")) & (F.lag("journal").over(w) == F.col("journal"))
    t = t.select("*", F.coalesce(dup, F.lit(False)).alias("_dup")).filter(~F.col("_dup"))

    same_boot = F.coalesce(
        (F.lag("bootId").over(w) == F.col("bootId"))
        & (F.lag("journal").over(w) == F.col("journal")),
        F.lit(False),
    )
    prev_rec = same_boot & F.coalesce(F.lag("rec").over(w), F.lit(False))
    same_journal = F.lag("journal").over(w) == F.col("journal")
    t = t.select(
        "*",
        prev_rec.alias("prevRec"),
        F.when(same_journal, F.col("seq") - F.lag("seq").over(w) - 1).otherwise(0).alias("missing"),
        F.lead("seq").over(w).isNotNull().alias("hasNext"),
    )
    t = t.select(
        "*",
        (F.col("rec") & ~F.col("prevRec")).alias("start"),
        (~F.col("rec") & F.col("prevRec")).alias("end"),
    )
    t = t.select("*", F.sum(F.col("start").cast("long")).over(running).alias("episode"))
    t = t.filter(F.col("rec") | F.col("end"))

    # Within an episode (structs carry the episode number, so a value from an earlier episode
    # of the node is recognised and ignored).
    counted = F.col("rec") & F.col("segs").isNotNull()
    prev_segs = F.last(F.when(counted, F.struct("episode", "segs")), ignorenulls=True).over(before)
    prev_segs_here = F.when(prev_segs["episode"] == F.col("episode"), prev_segs["segs"])
    done = F.col("end") & F.col("finished")
    t = t.select(
        "*",
        (counted & prev_segs_here.isNull()).alias("first"),
        ((counted & (F.col("segs") < prev_segs_here)) | done).alias("progress"),
    )
    anchor = F.last(
        F.when(F.col("start") | F.col("progress"), F.struct("episode", "ts")), ignorenulls=True
    ).over(before)
    origin = F.last(
        F.when(F.col("first"), F.struct("episode", "ts", "segs")), ignorenulls=True
    ).over(running)
    origin_here = F.col("origin")["episode"] == F.col("episode")
    t = t.select(
        "*",
        F.when(anchor["episode"] == F.col("episode"), F.col("ts") - anchor["ts"]).alias("stall"),
        origin.alias("origin"),
    )
    fraction = F.when(
        F.col("rec") & origin_here & (F.col("origin")["segs"] > 0) & F.col("segs").isNotNull(),
        (F.col("origin")["segs"] - F.col("segs")) * 100.0 / F.col("origin")["segs"],
    )
    return t.select("*", fraction.alias("fraction"))


def episodes(timeline: DataFrame, events: DataFrame | None = None) -> DataFrame:
    """One row per recovery episode (see the module's definitions)."""
    a = annotate(timeline)
    rec = F.col("rec")
    counted = rec & F.col("segs").isNotNull()
    aggs = [
        F.min(F.when(rec, F.struct("seq", "ts", "bootId", "journal"))).alias("_first"),
        F.max(F.when(rec, F.struct("seq", "ts", "hasNext"))).alias("_last"),
        F.max(F.when(F.col("end"), F.struct("seq", "ts", "finished"))).alias("_end"),
        F.min(F.when(counted, F.struct("seq", "ts", "segs", "logs"))).alias("_origin"),
        F.max(F.when(counted, F.struct("seq", "ts", "segs"))).alias("_latest"),
        F.max("stall").alias("_stall"),
        F.sum("missing").alias("missingRecords"),
        F.count(F.when(rec, True)).alias("records"),
    ]
    for p in FRACTIONS:
        aggs.append(
            F.min(F.when(F.col("fraction") >= p, F.struct("seq", "ts", "segs"))).alias(f"_at{p}")
        )
    e = a.groupBy("cluster", "node", "episode").agg(*aggs)

    start = F.col("_first")["ts"]
    ended = F.col("_end").isNotNull()
    completed = ended & F.col("_end")["finished"]
    outcome = (
        F.when(completed, "completed")
        .when(ended | F.col("_last")["hasNext"], "interrupted")
        .otherwise("running")
    )
    end = F.when(ended, F.col("_end")["ts"]).when(F.col("_last")["hasNext"], F.col("_last")["ts"])
    rate_end = F.when(completed, F.col("_end")["ts"]).otherwise(F.col("_latest")["ts"])
    recovered = F.col("_origin")["segs"] - F.when(completed, 0).otherwise(F.col("_latest")["segs"])
    rate_time = _seconds(rate_end - F.col("_origin")["ts"])
    e = e.select(
        *EPISODE_KEY,
        F.col("_first")["bootId"].alias("bootId"),
        F.col("_first")["journal"].alias("journal"),
        F.col("_first")["seq"].alias("firstSeq"),
        F.coalesce(F.col("_end")["seq"], F.col("_last")["seq"]).alias("lastSeq"),
        start.alias("start"),
        end.alias("end"),
        outcome.alias("outcome"),
        _seconds(end - start).alias("durationSeconds"),
        F.col("_last")["ts"].alias("lastSeen"),
        _seconds(F.coalesce(end, F.col("_last")["ts"]) - start).alias("elapsedSeconds"),
        F.col("_origin")["logs"].alias("logsAtStart"),
        F.col("_origin")["segs"].alias("segmentsAtStart"),
        F.when(rate_time > 0, recovered / rate_time).alias("meanRate"),
        _seconds(F.coalesce(F.col("_stall"), F.lit(0))).alias("longestStallSeconds"),
        "missingRecords",
        "records",
        *(_prediction(p, completed, end) for p in FRACTIONS),
    )
    return _with_roller(e, events)


def _prediction(p: int, completed: Column, end: Column) -> Column:
    """The finish predicted at p % progress from the mean rate since the first counters."""
    at, origin = F.col(f"_at{p}"), F.col("_origin")
    elapsed = at["ts"] - origin["ts"]
    recovered = origin["segs"] - at["segs"]
    predicted = at["ts"] + at["segs"] * elapsed.cast("double") / recovered
    ok = completed & at.isNotNull() & (elapsed > 0)
    return F.when(ok, F.struct(at["ts"].alias("sampleTs"), predicted.alias("predicted"))).alias(
        f"eta{p}"
    )


def _with_roller(e: DataFrame, events: DataFrame | None) -> DataFrame:
    """Roller restarts of the node, and rolls that waited instead, during each episode."""
    if events is None:
        return e.select(
            "*",
            F.lit(0).cast("long").alias("rollerRestarts"),
            F.lit(0).cast("long").alias("skippedRestarts"),
        )
    acts = events.filter(
        F.col("node").isNotNull() & F.col("action").isin(Event.RESTART, Event.WAIT_RECOVERY)
    ).select(
        F.col("cluster").alias("_c"),
        F.col("node").alias("_n"),
        F.col("ts").alias("_ts"),
        "rollId",
        "action",
    )
    until = F.coalesce(F.col("end"), F.col("lastSeen"))
    joined = e.join(
        F.broadcast(acts),
        (F.col("_c") == F.col("cluster"))
        & (F.col("_n") == F.col("node"))
        & (F.col("_ts") >= F.col("start"))
        & (F.col("_ts") <= until),
        "left",
    )
    # One aggregation over the join, carrying the episode's own columns through: joining the
    # counts back to `e` would compute the episodes (and their window) twice.
    carried = [F.first(c).alias(c) for c in e.columns if c not in EPISODE_KEY]
    return joined.groupBy(*EPISODE_KEY).agg(
        *carried,
        F.count(F.when(F.col("action") == Event.RESTART, True)).alias("rollerRestarts"),
        F.countDistinct(F.when(F.col("action") == Event.WAIT_RECOVERY, F.col("rollId"))).alias(
            "skippedRestarts"
        ),
    )


def eta_accuracy(episodes: DataFrame) -> DataFrame:
    """One row per completed episode and progress point: predicted against actual finish."""
    rows = [
        episodes.filter(F.col(f"eta{p}").isNotNull()).select(
            *EPISODE_KEY,
            "bootId",
            "start",
            F.lit(p).alias("progressPercent"),
            F.col(f"eta{p}")["sampleTs"].alias("sampleTs"),
            F.col(f"eta{p}")["predicted"].alias("predictedEnd"),
            F.col("end").alias("actualEnd"),
        )
        for p in FRACTIONS
    ]
    out = rows[0]
    for more in rows[1:]:
        out = out.unionByName(more)
    error = _seconds(F.col("predictedEnd") - F.col("actualEnd"))
    return out.select(
        "*",
        error.alias("errorSeconds"),
        # try_divide: an episode that completed at its first record has no duration (null, not
        # a division-by-zero error under ANSI mode).
        F.try_divide(error, _seconds(F.col("actualEnd") - F.col("start"))).alias("relativeError"),
    )


def node_summary(episodes: DataFrame) -> DataFrame:
    """Per node: durations of its completed episodes, rates of every episode that has one."""
    done = F.col("outcome") == "completed"
    duration = F.when(done, F.col("durationSeconds"))
    return episodes.groupBy("cluster", "node").agg(
        F.count("*").alias("episodes"),
        F.count(F.when(done, True)).alias("completed"),
        F.percentile(duration, 0.5).alias("p50Seconds"),
        F.percentile(duration, 0.9).alias("p90Seconds"),
        F.percentile(duration, 0.99).alias("p99Seconds"),
        F.max(duration).alias("maxSeconds"),
        F.avg("meanRate").alias("meanRate"),
        F.count("meanRate").alias("ratedEpisodes"),
        F.percentile("meanRate", 0.5).alias("medianRate"),
        F.max("longestStallSeconds").alias("longestStallSeconds"),
    )


SLOWEST = 3


def cluster_summary(episodes: DataFrame, nodes: DataFrame) -> DataFrame:
    done = F.col("outcome") == "completed"
    duration = F.when(done, F.col("durationSeconds"))
    per_cluster = episodes.groupBy("cluster").agg(
        F.count("*").alias("episodes"),
        F.count(F.when(done, True)).alias("completed"),
        F.count(F.when(F.col("outcome") == "interrupted", True)).alias("interrupted"),
        F.count(F.when(F.col("outcome") == "running", True)).alias("running"),
        F.percentile(duration, 0.5).alias("p50Seconds"),
        F.percentile(duration, 0.9).alias("p90Seconds"),
        F.percentile(duration, 0.99).alias("p99Seconds"),
        F.max(duration).alias("maxSeconds"),
    )
    # Slowest nodes: by their longest completed recovery, then by name for ties.
    rank = F.row_number().over(
        Window.partitionBy("cluster").orderBy(F.col("maxSeconds").desc_nulls_last(), "node")
    )
    slowest = (
        nodes.filter(F.col("maxSeconds").isNotNull())
        .select("cluster", "node", rank.alias("rank"))
        .filter(F.col("rank") <= SLOWEST)
        .groupBy("cluster")
        .agg(F.sort_array(F.collect_list(F.struct("rank", "node"))).alias("_s"))
        .select("cluster", F.col("_s")["node"].alias("slowestNodes"))
    )
    return per_cluster.join(slowest, "cluster", "left")


def eta_summary(eta: DataFrame) -> DataFrame:
    return eta.groupBy("cluster", "progressPercent").agg(
        F.count("*").alias("episodes"),
        F.percentile(F.abs(F.col("relativeError")), 0.5).alias("medianAbsRelativeError"),
        F.percentile(F.col("errorSeconds"), 0.5).alias("medianErrorSeconds"),
    )

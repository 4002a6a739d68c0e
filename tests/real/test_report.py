"""The Spark job's episode computation on hand-built timelines, one edge case at a time, compared
as DataFrames with pyspark's own assertDataFrameEqual."""

from __future__ import annotations

import os
import random
import statistics
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from rollguard.spark import episodes as ep
from rollguard.spark import impact, rolls, trends

S, R = 1, 2  # STARTING, RECOVERY
Rec = tuple[Any, ...]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("rollguard-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def timeline(spark: SparkSession, node: str, rows: list[Rec], cluster: str = "c") -> DataFrame:
    """rows: (boot, seq, ts, state, logs, segments), optionally a journal number, then a
    recovery phase (none: a record of an older agent, or without a recovery object)."""
    data = [
        (node, node, journal, r[0], r[1], r[2], r[3], r[4], r[5], phase, cluster, "d")
        for r in rows
        for journal, phase in [(r[6] if len(r) > 6 else 0, r[7] if len(r) > 7 else None)]
    ]
    return spark.createDataFrame(data, ep.TIMELINE_SCHEMA)


def event_rows(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    """Events by column name (cluster "c", date "d" unless given); the others null."""
    names = [f.name for f in ep.EVENTS_SCHEMA.fields]
    data = [tuple({"cluster": "c", "date": "d", **r}.get(n) for n in names) for r in rows]
    return spark.createDataFrame(data, ep.EVENTS_SCHEMA)


def events(spark: SparkSession, rows: list[tuple[int, str, str | None, str]]) -> DataFrame:
    return event_rows(
        spark,
        [
            {"ts": ts, "rollId": roll, "node": node, "action": action, "reason": ""}
            for ts, roll, node, action in rows
        ],
    )


def union(*frames: DataFrame) -> DataFrame:
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


COLUMNS = [
    "node",
    "episode",
    "bootId",
    "start",
    "end",
    "outcome",
    "durationSeconds",
    "logsAtStart",
    "segmentsAtStart",
    "meanRate",
    "longestStallSeconds",
    "missingRecords",
    "records",
]


def expect(
    spark: SparkSession, rows: list[tuple[Any, ...]], columns: list[str] = COLUMNS
) -> DataFrame:
    """Expected episodes, typed as the job types them."""
    empty = spark.createDataFrame([], ep.TIMELINE_SCHEMA)
    return spark.createDataFrame(rows, ep.episodes(empty).select(*columns).schema)


# A recovery as the agent records it: counters missing at first, a 6 s stall, then RUNNING.
BASIC: list[Rec] = [
    ("b1", 1, 0, 1, None, None),
    ("b1", 2, 1000, R, None, None),
    ("b1", 3, 2000, R, 4, 100),
    ("b1", 4, 3000, R, 4, 75),
    ("b1", 5, 9000, R, 2, 50),
    ("b1", 6, 10000, R, 1, 20),
    ("b1", 7, 12000, 3, None, None),
    ("b1", 8, 312000, 3, None, None),
]
BASIC_EPISODE = ("a", 1, "b1", 1000, 12000, "completed", 11.0, 4, 100, 10.0, 6.0, 0, 5)


def test_a_completed_recovery(spark: SparkSession) -> None:
    got = ep.episodes(timeline(spark, "a", BASIC)).select(*COLUMNS)
    assertDataFrameEqual(got, expect(spark, [BASIC_EPISODE]))


def test_a_recovery_in_starting_is_an_episode_and_a_clean_starts_loading_is_not(
    spark: SparkSession,
) -> None:
    # Kafka 4.x loads its logs in STARTING as often as in RECOVERY (rollguard.shared.wire).
    starting: list[Rec] = [
        ("b1", 1, 0, S, None, None),  # before loading: not a recovery
        ("b1", 2, 1000, S, 4, 100, 0, "recovering"),
        ("b1", 3, 2000, S, 2, 50, 0, "recovering"),
        ("b1", 4, 3000, R, 1, 20, 0, "recovering"),
        ("b1", 5, 4000, 3, None, None),
    ]
    clean: list[Rec] = [
        ("b1", 1, 0, S, None, None),
        ("b1", 2, 1000, S, 40, 0, 0, "loading"),
        ("b1", 3, 2000, R, 10, 0, 0, "loading"),  # RECOVERY too: loading is not a recovery
        ("b1", 4, 3000, 3, None, None),
        # a loading that turns out to be a recovery: the episode starts when it does
        ("b1", 5, 9000, S, 30, 0, 0, "loading"),
        ("b1", 6, 10000, S, 30, 300, 0, "recovering"),
        ("b1", 7, 11000, R, 20, 200, 0, "recovering"),
        ("b1", 8, 12000, 3, None, None),
    ]
    got = ep.episodes(union(timeline(spark, "a", starting), timeline(spark, "b", clean)))
    want = [
        ("a", 1, "b1", 1000, 4000, "completed", 3.0, 4, 100, 100 / 3, 1.0, 0, 3),
        ("b", 1, "b1", 10000, 12000, "completed", 2.0, 30, 300, 150.0, 1.0, 0, 2),
    ]
    assertDataFrameEqual(got.select(*COLUMNS), expect(spark, want))


def test_records_without_a_phase_are_judged_by_state_and_counters(spark: SparkSession) -> None:
    # An older agent, or an older dataset: RECOVERY is a recovery with or without counters,
    # STARTING only with them.
    rows: list[Rec] = [
        ("b1", 1, 0, S, None, None),
        ("b1", 2, 1000, S, 3, 30),
        ("b1", 3, 2000, R, None, None),
        ("b1", 4, 3000, R, 1, 10),
        ("b1", 5, 4000, 3, None, None),
        ("b1", 6, 5000, S, None, None),  # STARTING without counters: nothing
        ("b1", 7, 6000, 3, None, None),
    ]
    got = ep.episodes(timeline(spark, "a", rows)).select(*COLUMNS)
    want = [("a", 1, "b1", 1000, 4000, "completed", 3.0, 3, 30, 10.0, 2.0, 0, 3)]
    assertDataFrameEqual(got, expect(spark, want))
    with_phases = [(*r, 0, "recovering") if r[4] is not None else r for r in rows]
    assertDataFrameEqual(ep.episodes(timeline(spark, "a", with_phases)).select(*COLUMNS), got)


def test_a_phase_aware_agents_records_without_figures_are_no_recovery(spark: SparkSession) -> None:
    # A Kafka 4.x clean start as a phase-aware agent records it: "none" when there are no
    # figures. Its RECOVERY records without figures (before the loading, or after it while the
    # broker waits to be unfenced) are no recovery, although the state is RECOVERY.
    starting: list[Rec] = [
        ("b1", 1, 0, 0, None, None, 0, "none"),
        ("b1", 2, 1000, S, 13, 0, 0, "loading"),
        ("b1", 3, 1200, S, 5, 0, 0, "loading"),
        ("b1", 4, 1400, S, None, None, 0, "none"),  # until the old registration expires
        ("b1", 5, 13000, R, None, None, 0, "none"),
        ("b1", 6, 13100, 3, None, None, 0, "none"),
    ]
    recovery: list[Rec] = [
        ("b1", 1, 0, R, None, None, 0, "none"),  # before the gauges are registered
        ("b1", 2, 500, R, 20, 0, 0, "loading"),
        ("b1", 3, 800, R, None, None, 0, "none"),
        ("b1", 4, 900, 3, None, None, 0, "none"),
    ]
    both = union(timeline(spark, "a", starting), timeline(spark, "b", recovery))
    assert ep.episodes(both).count() == 0
    # The same records from an older agent (no phase) cannot be told from a recovery: the
    # legacy rule sees the loading in STARTING and the RECOVERY records as episodes.
    older = [
        timeline(spark, n, [r[:6] for r in rows]) for n, rows in (("a", starting), ("b", recovery))
    ]
    assert ep.episodes(union(*older)).count() == 3


def test_a_recovery_over_while_the_broker_waits_for_its_registration_is_completed(
    spark: SparkSession,
) -> None:
    # The gauges go when the logs are loaded; a Kafka 4.x broker then stays in STARTING (up to
    # the old registration's session timeout) or RECOVERY until the controller accepts it. The
    # phase-aware agent's first record without figures ("none") ends the recovery: completed.
    in_starting: list[Rec] = [
        ("b1", 1, 0, S, None, None, 0, "none"),
        ("b1", 2, 1000, S, 4, 100, 0, "recovering"),
        ("b1", 3, 2000, S, 2, 50, 0, "recovering"),
        ("b1", 4, 3000, S, None, None, 0, "none"),
        ("b1", 5, 15000, R, None, None, 0, "none"),
        ("b1", 6, 15100, 3, None, None, 0, "none"),
    ]
    in_recovery: list[Rec] = [
        ("b1", 1, 0, S, None, None, 0, "none"),
        ("b1", 2, 1000, R, 4, 100, 0, "recovering"),
        ("b1", 3, 3000, R, 1, 10, 0, "recovering"),
        ("b1", 4, 4000, R, None, None, 0, "none"),
        ("b1", 5, 4100, 3, None, None, 0, "none"),
    ]
    # "none" completes in STARTING and RECOVERY only; a stop or a lost sample interrupts
    cut: list[Rec] = [
        ("b1", 1, 1000, S, 4, 100, 0, "recovering"),
        ("b1", 2, 2000, 0, None, None, 0, "none"),  # NOT_RUNNING
        ("b1", 3, 3000, R, 3, 90, 0, "recovering"),
        ("b1", 4, 4000, None, None, None),  # a lost sample: no phase
        ("b1", 5, 5000, S, 3, 90, 0, "recovering"),
        ("b1", 6, 6000, S, 3, 0, 0, "loading"),  # a loading again: not the end of a recovery
    ]
    frames = [timeline(spark, n, rows) for n, rows in (("a", in_starting), ("b", in_recovery))]
    got = ep.episodes(union(*frames, timeline(spark, "c", cut))).select(*COLUMNS)
    want = [
        ("a", 1, "b1", 1000, 3000, "completed", 2.0, 4, 100, 50.0, 1.0, 0, 2),
        ("b", 1, "b1", 1000, 4000, "completed", 3.0, 4, 100, 100 / 3, 2.0, 0, 2),
        ("c", 1, "b1", 1000, 2000, "interrupted", 1.0, 4, 100, None, 1.0, 0, 1),
        ("c", 2, "b1", 3000, 4000, "interrupted", 1.0, 3, 90, None, 1.0, 0, 1),
        ("c", 3, "b1", 5000, 6000, "interrupted", 1.0, 3, 90, None, 1.0, 0, 1),
    ]
    assertDataFrameEqual(got, expect(spark, want))


def test_out_of_order_and_duplicate_records_change_nothing(spark: SparkSession) -> None:
    shuffled = BASIC + BASIC[2:5] + [BASIC[6]]
    random.Random(7).shuffle(shuffled)
    clean = ep.episodes(timeline(spark, "a", BASIC))
    messy = ep.episodes(timeline(spark, "a", shuffled).repartition(3))
    assertDataFrameEqual(messy, clean)


def test_clock_skew_between_nodes_and_records_out_of_time_order(spark: SparkSession) -> None:
    hour = 3_600_000
    ahead = [(b, s, ts + hour, st, lg, sg) for b, s, ts, st, lg, sg in BASIC]
    # a node whose clock stepped back 500 ms during the recovery: seq, not ts, orders it
    stepped = [(b, s, ts - 1500 if s >= 4 else ts, st, lg, sg) for b, s, ts, st, lg, sg in BASIC]
    got = ep.episodes(
        union(
            timeline(spark, "a", BASIC),
            timeline(spark, "b", ahead),
            timeline(spark, "c", stepped),
        )
    ).select(*COLUMNS)
    base = list(BASIC_EPISODE)
    b = ["b", 1, "b1", 1000 + hour, 12000 + hour, *base[5:]]
    c = ["c", 1, "b1", 1000, 10500, "completed", 9.5, 4, 100, 100 / 8.5, 6.0, 0, 5]
    assertDataFrameEqual(got, expect(spark, [BASIC_EPISODE, tuple(b), tuple(c)]))


def test_outcomes_interrupted_by_a_restart_a_lost_broker_a_new_boot_and_still_running(
    spark: SparkSession,
) -> None:
    rows: list[Rec] = [
        ("b1", 1, 0, R, 5, 50),
        ("b1", 2, 1000, R, 5, 40),
        ("b1", 3, 2000, 1, None, None),  # STARTING: the broker restarted mid-recovery
        ("b1", 4, 3000, R, 5, 50),
        ("b1", 5, 4000, None, None, None),  # the agent lost the broker
        ("b1", 6, 5000, R, 5, 50),
        ("b1", 7, 6000, R, 5, 45),  # the agent restarts: its boot's records stop here
        ("b2", 8, 60000, R, 5, 50),
        ("b2", 9, 61000, R, 5, 30),  # the end of the data
    ]
    got = ep.episodes(timeline(spark, "a", rows)).select(
        "episode", "outcome", "start", "end", "durationSeconds", "elapsedSeconds", "lastSeen"
    )
    want = [
        (1, "interrupted", 0, 2000, 2.0, 2.0, 1000),
        (2, "interrupted", 3000, 4000, 1.0, 1.0, 3000),
        (3, "interrupted", 5000, 6000, 1.0, 1.0, 6000),
        (4, "running", 60000, None, None, 1.0, 61000),
    ]
    assertDataFrameEqual(got, expect(spark, want, list(got.columns)))


def test_gaps_are_counted_and_missing_counters_leave_figures_empty(spark: SparkSession) -> None:
    gapped: list[Rec] = [
        ("b1", 1, 0, 3, None, None),
        ("b1", 4, 1000, R, 3, 30),  # seq 2 and 3 never reached the dataset
        ("b1", 5, 2000, R, 3, 20),
        ("b1", 9, 3000, R, 3, 10),  # 6 to 8 neither
        ("b1", 10, 4000, 3, None, None),
    ]
    bare: list[Rec] = [
        ("b1", 1, 0, R, None, None),
        ("b1", 2, 5000, R, None, None),
        ("b1", 3, 7000, 3, None, None),
    ]
    every = ep.episodes(union(timeline(spark, "a", gapped), timeline(spark, "b", bare)))
    want = [
        ("a", 1, "b1", 1000, 4000, "completed", 3.0, 3, 30, 10.0, 1.0, 5, 3),
        ("b", 1, "b1", 0, 7000, "completed", 7.0, None, None, None, 7.0, 0, 2),
    ]
    assertDataFrameEqual(every.select(*COLUMNS), expect(spark, want))
    etas = every.select("node", "eta25.predicted", "eta50.predicted", "eta75.predicted")
    # a steady 10 segments/s predicts the end exactly; 75 % is first seen at the end itself,
    # where nothing is left to predict; no counters, no predictions
    assert sorted(etas.collect()) == [("a", 4000.0, 4000.0, None), ("b", None, None, None)]


def test_eta_accuracy_at_25_50_and_75_percent(spark: SparkSession) -> None:
    episodes = ep.episodes(timeline(spark, "a", BASIC))
    got = ep.eta_accuracy(episodes).select(
        "progressPercent", "sampleTs", "predictedEnd", "actualEnd", "errorSeconds", "relativeError"
    )
    # from the first counters (100 segments at 2 s): 75 left at 3 s -> 25/s -> 6 s, ...
    want = [
        (25, 3000, 6000.0, 12000, -6.0, -6.0 / 11),
        (50, 9000, 16000.0, 12000, 4.0, 4.0 / 11),
        (75, 10000, 12000.0, 12000, 0.0, 0.0),
    ]
    assertDataFrameEqual(got, spark.createDataFrame(want, got.schema))


def test_eta_accuracy_of_an_episode_whose_clock_stepped_back_to_its_start(
    spark: SparkSession,
) -> None:
    # The node's clock stepped back during recovery and the episode ended at the very ms it
    # started: its duration is 0, so the relative error has no meaning (null, not a crash).
    rows: list[Rec] = [
        ("b1", 1, 0, 3, None, None),
        ("b1", 2, 100000, R, None, None),
        ("b1", 3, 50000, R, 10, 1000),
        ("b1", 4, 60000, R, 5, 500),
        ("b1", 5, 100000, 3, None, None),
    ]
    episodes = ep.episodes(timeline(spark, "a", rows))
    got = ep.eta_accuracy(episodes).select(
        "progressPercent", "sampleTs", "predictedEnd", "actualEnd", "errorSeconds", "relativeError"
    )
    # 500 of 1000 segments in 10 s: 500 left at 60 s -> predicted 70 s, actual 100 s.
    want = [
        (25, 60000, 70000.0, 100000, -30.0, None),
        (50, 60000, 70000.0, 100000, -30.0, None),
    ]
    assertDataFrameEqual(got, spark.createDataFrame(want, got.schema))


def test_roller_restarts_and_rolls_that_waited_during_an_episode(spark: SparkSession) -> None:
    acts = events(
        spark,
        [
            (500, "r1", "a", "restart"),  # before the episode: its cause, not counted
            (2000, "r1", "a", "wait-recovery"),
            (2500, "r1", "a", "wait-recovery"),
            (3000, "r2", "a", "wait-recovery"),
            (9500, "r3", "a", "restart"),  # a naive tool restarting a recovering broker
            (9600, "r3", "b", "restart"),  # another node
            (13000, "r4", "a", "wait-recovery"),  # after the end
            (5000, "r1", None, "roll-start"),
        ],
    )
    got = ep.episodes(timeline(spark, "a", BASIC), acts).select(
        "node", "rollerRestarts", "skippedRestarts"
    )
    assertDataFrameEqual(got, spark.createDataFrame([("a", 1, 2)], got.schema))


def test_cluster_figures_percentiles_and_slowest_nodes(spark: SparkSession) -> None:
    frames = []
    for name, seconds in (("n1", 10), ("n2", 20), ("n3", 30), ("n4", 40), ("n5", 100)):
        rows: list[Rec] = [
            ("b", 1, 0, R, 1, 10),
            ("b", 2, seconds * 1000, 3, None, None),
        ]
        frames.append(timeline(spark, name, rows))
    frames.append(timeline(spark, "n6", [("b", 1, 0, R, 1, 10)]))  # still running
    episodes = ep.episodes(union(*frames))
    nodes = ep.node_summary(episodes)
    got = ep.cluster_summary(episodes, nodes)
    want = [("c", 6, 5, 0, 1, 30.0, 76.0, 97.6, 100.0, ["n5", "n4", "n3"])]
    assertDataFrameEqual(got, spark.createDataFrame(want, got.schema), rtol=1e-9)


def test_journal_numbers_keep_a_restarted_journal_apart(spark: SparkSession) -> None:
    old: list[Rec] = [("b1", 1, 0, R, 1, 10, 0), ("b1", 2, 1000, R, 1, 5, 0)]
    new: list[Rec] = [("b9", 1, 50000, R, 1, 10, 1), ("b9", 2, 52000, 3, None, None, 1)]
    got = ep.episodes(timeline(spark, "a", old + new)).select("bootId", "outcome", "end")
    want = [("b1", "interrupted", 1000), ("b9", "completed", 52000)]
    assertDataFrameEqual(got, spark.createDataFrame(want, got.schema))


def test_a_node_is_slow_below_half_its_clusters_median_rate(spark: SparkSession) -> None:
    # (node, rated episodes, median rate): the cluster's rate is the median of the judged
    # nodes' rates (100, 90, 110, 30) = 95; n5 has too few episodes to be judged either way.
    nodes = [("n1", 5, 100.0), ("n2", 9, 90.0), ("n3", 5, 110.0), ("n4", 7, 30.0), ("n5", 4, 1.0)]
    frame = spark.createDataFrame(
        [("c", n, k, r) for n, k, r in nodes] + [("d", "m1", 5, 10.0)],
        "cluster string, node string, ratedEpisodes long, medianRate double",
    )
    got = trends.diagnose(frame).select("node", "clusterRate", "slow")
    want = [(n, 95.0, n == "n4") for n, _, _ in nodes] + [("m1", 10.0, False)]
    assertDataFrameEqual(got, spark.createDataFrame(want, got.schema))


def test_daily_durations_per_cluster_and_utc_day_of_the_start(spark: SparkSession) -> None:
    day = 86_400_000
    rows = [
        ("c", day - 1, "completed", 10.0),  # 1970-01-01T23:59:59.999Z
        ("c", day - 1, "completed", 30.0),
        ("c", day, "completed", 100.0),
        ("c", day, "interrupted", 999.0),  # not a completed recovery
    ]
    frame = spark.createDataFrame(
        rows, "cluster string, start long, outcome string, durationSeconds double"
    )
    got = trends.daily(frame)
    want = [("c", "1970-01-01", 2, 20.0, 28.0, 30.0), ("c", "1970-01-02", 1, 100.0, 100.0, 100.0)]
    assertDataFrameEqual(got, spark.createDataFrame(want, got.schema))


def roller(spark: SparkSession, rows: list[tuple[Any, ...]], roll: str = "r") -> DataFrame:
    return event_rows(
        spark,
        [
            {"ts": ts * 1000, "rollId": roll, "node": node, "action": action, "reason": why,
             "seconds": figure[0] if figure else None}
            for ts, node, action, why, *figure in rows
        ],
    )  # fmt: skip


def test_roll_phases_from_the_rollers_events(spark: SparkSession) -> None:
    events = roller(
        spark,
        [
            (0, None, "roll-start", ""),
            (0, None, "roll-predicted", "", 30.0),
            (1, "b", "defer", "min ISR"),
            (2, "a", "wait-recovery", "progressing"),  # recovering before its restart
            (4, "a", "wait-recovery", "progressing"),
            (5, "a", "observe-agent", "RUNNING"),  # not a phase event
            (6, "a", "restart", "rolling"),
            (7, "b", "defer", "min ISR"),  # the same reason: the same deferral
            (8, "b", "defer", "a is catching up"),
            (9, "a", "catch-up", "2 partitions"),
            (9, "a", "catch-up", "1 partition"),  # reasons of other phases do not split them
            (12, "a", "ready", "in sync"),
            (13, "b", "restart", "rolling"),
            (20, "b", "ready", "in sync"),
            (21, None, "roll-completed", ""),
        ],
    )
    got = rolls.phases(events).select("node", "run", "phase", "reason", "start", "end", "events")
    want = [
        ("a", 1, "log recovery", "", 2000, 6000, 2),
        ("a", 2, "restart", "", 6000, 9000, 1),
        ("a", 3, "ISR catch-up", "", 9000, 12000, 2),
        ("b", 1, "deferred", "min ISR", 1000, 8000, 2),
        ("b", 2, "deferred", "a is catching up", 8000, 13000, 1),
        ("b", 3, "restart", "", 13000, 20000, 1),
    ]
    assertDataFrameEqual(got, spark.createDataFrame(want, got.schema))
    summary = rolls.rolls(events).select(
        "start",
        "end",
        "outcome",
        "durationSeconds",
        "restarted",
        "nodeSeconds",
        "recoveryWaits",
        "predictedSeconds",
    )
    want_roll = [(0, 21000, "completed", 21.0, 2, 6.0 + 7.0, 1, 30.0)]
    assertDataFrameEqual(summary, spark.createDataFrame(want_roll, summary.schema))


def test_a_live_step_is_a_phase_and_the_canary_is_not_the_rolls_duration(
    spark: SparkSession,
) -> None:
    """A node changed live (`configure` to `configured`) is a phase of its own and no restart;
    the roll's canary speaks before the roll starts and after it ends, outside its duration."""
    events = roller(
        spark,
        [
            (0, None, "canary-topic", ""),
            (5, None, "canary-baseline", ""),
            (10, None, "roll-start", ""),
            (11, "a", "configure", "num.io.threads"),
            (12, "a", "configured", "configuration applied live: num.io.threads"),
            (13, "b", "restart", "configuration: queued.max.requests need a restart"),
            (30, "b", "ready", "in sync"),
            (31, None, "roll-completed", ""),
            (32, "b", "canary-cost", ""),
        ],
    )
    got = rolls.phases(events).select("node", "run", "phase", "start", "end")
    want = [("a", 1, "live configuration", 11000, 12000), ("b", 1, "restart", 13000, 30000)]
    assertDataFrameEqual(got, spark.createDataFrame(want, got.schema))
    summary = rolls.rolls(events).select("start", "end", "outcome", "durationSeconds", "restarted")
    want_roll = [(10000, 31000, "completed", 21.0, 1)]
    assertDataFrameEqual(summary, spark.createDataFrame(want_roll, summary.schema))


def test_a_roll_without_an_outcome_event_is_unfinished(spark: SparkSession) -> None:
    events = roller(spark, [(0, "a", "restart", ""), (5, "a", "wait-recovery", "")], "r9")
    got = rolls.rolls(events).select("rollId", "outcome", "restarted", "nodeSeconds")
    assertDataFrameEqual(got, spark.createDataFrame([("r9", "unfinished", 1, None)], got.schema))


def cost(ts: int, roll: str, node: str, sent: int, failed: int, p99: float | None,
         gap: float, cluster: str = "c", base: float = 10.0) -> dict[str, Any]:  # fmt: skip
    """A `canary-cost` of `node` in `roll`, as the collector keeps it."""
    return {"ts": ts, "rollId": roll, "node": node, "action": "canary-cost", "reason": "",
            "cluster": cluster, "sent": sent, "failed": failed, "p50Ms": 5.0, "p99Ms": p99,
            "maxMs": None if p99 is None else p99 * 2, "longestGapS": gap,
            "baselineP99Ms": base}  # fmt: skip


def test_client_impact_per_roll_and_per_node_from_the_canarys_costs(spark: SparkSession) -> None:
    costs = [
        cost(1000, "r1", "a", 100, 0, 50.0, 0.3),
        cost(2000, "r1", "b", 120, 2, 400.0, 1.5),
        cost(3000, "r1", "c", 90, 0, 70.0, 0.2),
        cost(9000, "r2", "a", 110, 0, 30.0, 0.2, base=12.0),
        cost(9500, "r2", "b", 100, 5, None, 9.0, base=12.0),  # nothing acknowledged: no p99
        cost(5000, "w1", "a", 80, 0, 20.0, 0.1, cluster="w"),
    ]
    others = [
        {"ts": 500, "rollId": "r1", "node": None, "action": "canary-baseline", "sent": 50,
         "failed": 0, "p99Ms": 10.0},  # the baseline is no restart
        {"ts": 800, "rollId": "r0", "node": "a", "action": "restart"},  # a roll without a canary
    ]  # fmt: skip
    frame = event_rows(spark, [*costs, *others])
    got = impact.rolls(frame).select(
        "cluster", "rollId", "start", "restarts", "sent", "failed", "worstP99Ms", "medianP99Ms",
        "maxMs", "baselineP99Ms", "longestGapS", "worstAgainstBaseline",
    )  # fmt: skip
    # The test's own figures: medians over each roll's restarts' p99s (a restart without one
    # left out), the worst and the gaps their maxima, the sends summed.
    want = [
        ("c", "r1", 1000, 3, 310, 2, 400.0, statistics.median([50.0, 400.0, 70.0]), 800.0, 10.0,
         1.5, 400.0 / 10.0),
        ("c", "r2", 9000, 2, 210, 5, 30.0, 30.0, 60.0, 12.0, 9.0, 30.0 / 12.0),
        ("w", "w1", 5000, 1, 80, 0, 20.0, 20.0, 40.0, 10.0, 0.1, 20.0 / 10.0),
    ]  # fmt: skip
    assertDataFrameEqual(got, spark.createDataFrame(want, got.schema))
    nodes = impact.nodes(frame).select(
        "cluster", "node", "rolls", "restarts", "failed", "worstP99Ms", "medianP99Ms",
        "longestGapS", "worstAgainstBaseline",
    )  # fmt: skip
    # Against the baseline, each restart's p99 over its own roll's baseline: node a's worst is
    # r1's 50 / 10, not its worst p99 over the highest baseline of any roll (50 / 12).
    want_nodes = [
        ("c", "a", 2, 2, 0, 50.0, statistics.median([50.0, 30.0]), 0.3, 50.0 / 10.0),
        ("c", "b", 2, 2, 7, 400.0, 400.0, 9.0, 400.0 / 10.0),
        ("c", "c", 1, 1, 0, 70.0, 70.0, 0.2, 70.0 / 10.0),
        ("w", "a", 1, 1, 0, 20.0, 20.0, 0.1, 20.0 / 10.0),
    ]
    assertDataFrameEqual(nodes, spark.createDataFrame(want_nodes, nodes.schema))
    # No canary at all: no rows, never zeros.
    assert impact.rolls(events(spark, [(0, "r0", "a", "restart")])).count() == 0

"""Trends and diagnosis: recovery durations per cluster and day, and nodes that recover slowly
for their cluster.

A slow node (its disk, its JVM) and a node with more data both take long; the rate (segments
recovered per second) tells them apart, since it does not grow with the data. A node is
flagged slow when its median rate is below its cluster's median rate divided by SLOW_FACTOR:

- the cluster's rate is the median of its nodes' median rates, over the nodes with at least
  MIN_EPISODES rated episodes: a median, not a mean, so the slow nodes themselves (or one
  very fast node) do not move the bar they are judged by; a node's median rate, not its mean,
  so one stalled episode does not condemn it;
- SLOW_FACTOR 2: "well below", at half the cluster's rate, beyond the spread of healthy nodes
  of one cluster (the same hardware and settings) and the noise of a few episodes;
- only a node with at least MIN_EPISODES rated episodes is judged (rollguard.shared
  .expectations.MIN_EPISODES, the same bar as for its expectations); the others are never
  flagged.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from rollguard.shared.expectations import MIN_EPISODES

SLOW_FACTOR = 2.0


def diagnose(nodes: DataFrame) -> DataFrame:
    """The node table with clusterRate and slow (see the module's docstring)."""
    judged = F.col("ratedEpisodes") >= MIN_EPISODES
    cluster_rate = F.percentile(F.when(judged, F.col("medianRate")), 0.5).over(
        Window.partitionBy("cluster")
    )
    with_rate = nodes.select("*", cluster_rate.alias("clusterRate"))
    slow = F.coalesce(
        judged & (F.col("medianRate") < F.col("clusterRate") / SLOW_FACTOR), F.lit(False)
    )
    return with_rate.select("*", slow.alias("slow"))


def daily(episodes: DataFrame) -> DataFrame:
    """Completed recoveries per cluster and UTC day of their start: count, p50, p90, max."""
    duration = F.col("durationSeconds")
    day = F.date_format(F.timestamp_millis(F.col("start")), "yyyy-MM-dd")
    return (
        episodes.filter(F.col("outcome") == "completed")
        .select("cluster", day.alias("day"), duration)
        .groupBy("cluster", "day")
        .agg(
            F.count("*").alias("completed"),
            F.percentile(duration, 0.5).alias("p50Seconds"),
            F.percentile(duration, 0.9).alias("p90Seconds"),
            F.max(duration).alias("maxSeconds"),
        )
    )

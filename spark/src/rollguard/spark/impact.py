"""What restarts cost clients, from the roll canary's events (`rollguard roll --canary TOPIC`):
each restart's (or live step's) `canary-cost` carries its window's figures, measured by the
roll's own producer and consumer, and the idle baseline's p99 beside them.

Definitions (the report's "What restarts cost clients", docs/operations.md, The report):
- a roll's client impact: over its `canary-cost` events (restarts measured), the sends answered
  and failed, the worst and the median restart's p99 send latency, the baseline's p99, the
  consumer's longest gap; rolls without a canary have no row (never zeros);
- a node's across the fleet: over every roll's `canary-cost` of that node, the same, and in how
  many rolls;
- medians are exact (`percentile`), over the restarts' own p99s: a restart with nothing
  acknowledged has no p99 and counts in `failed` only;
- the worst against the baseline is each restart's p99 over its own roll's baseline p99, the
  highest of them: a node's across rolls never sets one roll's p99 against another's baseline.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rollguard.shared.dataset import Event

COST = Event.CANARY_COST.value


def _figures() -> list[Column]:
    return [
        F.count("*").alias("restarts"),
        F.sum("sent").alias("sent"),
        F.sum("failed").alias("failed"),
        F.max("p99Ms").alias("worstP99Ms"),
        F.percentile("p99Ms", 0.5).alias("medianP99Ms"),
        F.max("maxMs").alias("maxMs"),
        F.max("baselineP99Ms").alias("baselineP99Ms"),
        F.max("longestGapS").alias("longestGapS"),
        F.max(_against_baseline()).alias("worstAgainstBaseline"),
    ]


def _against_baseline() -> Column:
    """A restart's p99 over its roll's baseline p99 (null without either)."""
    base = F.col("baselineP99Ms")
    return F.when(base > 0, F.col("p99Ms") / base)


def rolls(events: DataFrame) -> DataFrame:
    """One row per roll with a canary: cluster, rollId, start (its first measured restart's
    time), restarts, sent, failed, worstP99Ms, medianP99Ms, maxMs, baselineP99Ms,
    longestGapS, worstAgainstBaseline."""
    costs = events.filter(F.col("action") == COST)
    return costs.groupBy("cluster", "rollId").agg(F.min("ts").alias("start"), *_figures())


def nodes(events: DataFrame) -> DataFrame:
    """One row per node measured in any roll: cluster, node, rolls, and the figures above over
    every restart of it."""
    costs = events.filter((F.col("action") == COST) & F.col("node").isNotNull())
    return costs.groupBy("cluster", "node").agg(
        F.countDistinct("rollId").alias("rolls"), *_figures()
    )

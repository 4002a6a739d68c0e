"""The dataset `rollguard collect` writes and `rollguard-report` reads: its tables' columns and
the names of the roller's events, declared once.

The collector (`rollguard.roller.collect`) writes each table as Parquet through pyarrow, the
report (`rollguard.spark`) reads it with Spark, and bench/report.py writes test datasets: each
derives its own schema from `TIMELINE` and `EVENTS` here, so that a column added, retyped or
made nullable is so for all of them. This module names column types in neither library's terms
(shared imports neither pyarrow nor pyspark); the derivations map `ColumnType` to theirs.

    OUT/timeline/cluster=C/date=YYYY-MM-DD/part-<run>.parquet   one row per timeline record
    OUT/events/cluster=C/date=YYYY-MM-DD/part-<run>.parquet     one row per roller event

`cluster` and `date` are the folders' (Hive-style partitions, `PARTITIONS`), not columns in the
files: a reader of the folders sees them after the table's own columns.

The roller (`rollguard.roller.roll`) writes an event, one JSON line, whenever something about a
roll or a node changes; its `action` is an `Event`, copied as it is into the events table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ColumnType(StrEnum):
    """A column's type, as the Parquet files store it."""

    STRING = "string"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT64 = "float64"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: ColumnType
    nullable: bool = True


@dataclass(frozen=True, slots=True)
class Table:
    """One table of the dataset: its folder under the dataset's root, and its columns in the
    files' order."""

    folder: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        """The column called `name`; KeyError naming the table when there is none."""
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(f"the {self.folder} table has no column {name!r}")


# The folders a table's files are in: cluster=C/date=YYYY-MM-DD (the UTC day of `ts`).
PARTITIONS = (
    Column("cluster", ColumnType.STRING, nullable=False),
    Column("date", ColumnType.STRING, nullable=False),
)

# One row per record of an agent's recovery timeline (rollguard.shared.timeline), unique on
# (node, bootId, seq) within a journal.
TIMELINE = Table(
    "timeline",
    (
        Column("node", ColumnType.STRING, nullable=False),  # the inventory's name for the node
        Column("nodeId", ColumnType.STRING),  # the agent's
        # The collector's count of the node's journal resets: the report orders a node's
        # records by (journal, seq), never by time.
        Column("journal", ColumnType.INT32, nullable=False),
        Column("bootId", ColumnType.STRING, nullable=False),
        Column("seq", ColumnType.INT64, nullable=False),
        Column("ts", ColumnType.INT64, nullable=False),  # UTC epoch milliseconds
        Column("brokerState", ColumnType.INT32),  # null: the agent had no sample, or a gap marker
        Column("remainingLogsToRecover", ColumnType.INT32),
        Column("remainingSegmentsToRecover", ColumnType.INT32),
        # "loading" / "recovering" (rollguard.shared.wire.RecoveryPhase), or "none": a sample
        # without a recovery object (rollguard.shared.timeline); null without a sample, from
        # older agents, and in datasets collected before it: readers then judge the record by
        # its state and counters alone.
        Column("recoveryPhase", ColumnType.STRING),
    ),
)

# One row per roller event (the roller's events-<rollId>.jsonl files).
CANARY_COLUMNS = (
    Column("sent", ColumnType.INT64),
    Column("failed", ColumnType.INT64),
    Column("p50Ms", ColumnType.FLOAT64),
    Column("p99Ms", ColumnType.FLOAT64),
    Column("maxMs", ColumnType.FLOAT64),
    Column("longestGapS", ColumnType.FLOAT64),
    Column("baselineP99Ms", ColumnType.FLOAT64),
)

EVENTS = Table(
    "events",
    (
        Column("ts", ColumnType.INT64, nullable=False),  # UTC epoch milliseconds
        Column("rollId", ColumnType.STRING, nullable=False),
        Column("node", ColumnType.STRING),  # null for the roll's own events
        Column("action", ColumnType.STRING, nullable=False),  # an Event
        Column("reason", ColumnType.STRING),
        # A figure some events carry: `roll-predicted` the predicted roll, `roll-completed` (and
        # failed, interrupted) the actual one, `canary-baseline` and `canary-cost` their window,
        # in seconds; null for the others and in datasets collected before it.
        Column("seconds", ColumnType.FLOAT64),
        # What a restart cost the roll's canary (`canary-cost`; `canary-baseline` its idle
        # baseline's): sends answered, failed, send latency p50/p99/max in milliseconds, the
        # consumer's longest gap, and beside a cost its baseline's p99; null for other events
        # and in datasets collected before them.
        *CANARY_COLUMNS,
    ),
)

TABLES = (TIMELINE, EVENTS)


class Event(StrEnum):
    """A roller event's `action`. Values are stored in datasets: never rename one."""

    # The roll's own (no node).
    ROLL_PREDICTED = "roll-predicted"  # before the first restart: seconds, upperSeconds
    ROLL_START = "roll-start"  # reason "resumed" for a resumed roll
    ROLL_COMPLETED = "roll-completed"  # seconds
    ROLL_FAILED = "roll-failed"  # why; seconds
    ROLL_INTERRUPTED = "roll-interrupted"  # seconds
    ADMIN_UNAVAILABLE = "admin-unavailable"  # Kafka's Admin API cannot be read (once per reason)
    # The platform's API (Kubernetes) does not answer: waited out (once per reason, and once
    # when it answers again)
    PLATFORM_UNAVAILABLE = "platform-unavailable"
    # A gate holds the roll (roller.roll.gates): gate, name, deficit, opensAt (once per
    # reason); then once when every gate is open again
    GATE_CLOSED = "gate-closed"
    GATE_OPEN = "gate-open"
    ELECT_LEADERS = "elect-leaders"  # after a batch: partitions
    ELECT_FAILED = "elect-failed"
    # A node's.
    PREFLIGHT = "preflight"  # its agent's first answer, before any action: skew
    SKIP = "skip"  # no restart needed, or opted out
    HOLD = "hold"  # kept for later by --hold
    DEFER = "defer"  # not safe to restart yet (once per reason)
    WAIT_READY = "wait-ready"  # not ready before its turn (once per reason)
    RESTART = "restart"  # its restart begins: instance; batch, rack in a batch
    RESTART_NOT_OBSERVED = "restart-not-observed"  # resumed: the restart on record never happened
    OBSERVE_AGENT = "observe-agent"  # its agent's answer: brokerState, remaining counters
    WAIT_RECOVERY = "wait-recovery"  # at every poll while its logs recover: the verdict
    CATCH_UP = "catch-up"  # partitions not yet back in the ISR: count (once per change)
    # after its restart: partitions whose ISR it was already out of before it (not waited for)
    OUT_OF_SYNC_BEFORE = "out-of-sync-before"
    READY = "ready"  # restarted, ready and in sync
    # Its configuration changed live, no restart (issue 41): keys (names only), cluster (those
    # set once at the cluster default); then once applied, read back and in sync again
    CONFIGURE = "configure"
    CONFIGURED = "configured"
    # The roll's canary (`roll --canary TOPIC`, issue 42). The roll's own: its topic, found or
    # made (topic, partitions, replication, created; a warning when not one partition led by
    # each broker); its idle baseline before the first restart (the figures below); a canary
    # with nothing acknowledged for its delivery timeout (once until it produces again).
    CANARY_TOPIC = "canary-topic"
    CANARY_BASELINE = "canary-baseline"
    CANARY_FAILING = "canary-failing"
    # A node's, once it is back (or at the roll's end when it never was): what its restart (or
    # live step) cost the canary, from its restart to its being back: seconds (the window),
    # sent, failed, p50Ms, p99Ms, maxMs (send latency), e2eP50Ms, e2eP99Ms, e2eMaxMs (end to
    # end), longestGapS (the consumer's), and the baseline's as baselineSent, baselineP50Ms...;
    # `brokers`: by broker id, the same window over the partitions it is the preferred leader of
    # (sent, failed, p50Ms, p99Ms, maxMs, longestGapS)
    CANARY_COST = "canary-cost"
    # At the roll's end: the whole roll (from the baseline's start) by broker, as `brokers` above
    CANARY_BROKERS = "canary-brokers"


# The roll's last event, when it ended (a roll without one is unfinished); with `--canary`, the
# canary's `canary-cost` of the last restarts may follow it, once their sends are answered
# (within the canary's delivery timeout).
ROLL_OUTCOMES = (Event.ROLL_COMPLETED, Event.ROLL_FAILED, Event.ROLL_INTERRUPTED)

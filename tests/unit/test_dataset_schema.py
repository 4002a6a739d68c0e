"""The dataset's one declaration (`rollguard.shared.dataset`) and what is derived from it: the
collector's pyarrow schemas and the report's Spark StructTypes agree column by column, and the
columns and event names stored in datasets stay what they were."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from rollguard.roller.collect import schema as collector
from rollguard.shared import dataset
from rollguard.shared.dataset import EVENTS, PARTITIONS, TIMELINE, Event, Table
from rollguard.spark import episodes, rolls
from rollguard.spark import schema as report

# What the files hold: a change here is a change of the dataset's format, which every dataset
# already collected keeps (readers must go on reading the old one).
EXPECTED = {
    "timeline": [
        ("node", "string", False),
        ("nodeId", "string", True),
        ("journal", "int32", False),
        ("bootId", "string", False),
        ("seq", "int64", False),
        ("ts", "int64", False),
        ("brokerState", "int32", True),
        ("remainingLogsToRecover", "int32", True),
        ("remainingSegmentsToRecover", "int32", True),
        ("recoveryPhase", "string", True),
    ],
    "events": [
        ("ts", "int64", False),
        ("rollId", "string", False),
        ("node", "string", True),
        ("action", "string", False),
        ("reason", "string", True),
        ("seconds", "float64", True),
        ("sent", "int64", True),
        ("failed", "int64", True),
        ("p50Ms", "float64", True),
        ("p99Ms", "float64", True),
        ("maxMs", "float64", True),
        ("longestGapS", "float64", True),
        ("baselineP99Ms", "float64", True),
    ],
}
ARROW = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64()}
DERIVED = [
    (TIMELINE, collector.TIMELINE_SCHEMA, report.TIMELINE_SCHEMA),
    (EVENTS, collector.EVENTS_SCHEMA, report.EVENTS_SCHEMA),
]


@pytest.mark.parametrize("table", dataset.TABLES, ids=lambda t: t.folder)
def test_the_declared_columns_are_the_datasets_format(table: Table) -> None:
    declared = [(c.name, str(c.type), c.nullable) for c in table.columns]
    assert declared == EXPECTED[table.folder]


@pytest.mark.parametrize(("table", "arrow", "spark"), DERIVED, ids=["timeline", "events"])
def test_the_collectors_arrow_schema_is_the_declared_columns(
    table: Table, arrow: pa.Schema, spark: StructType
) -> None:
    assert arrow.names == list(table.names)
    for column, field in zip(table.columns, arrow, strict=True):
        assert (field.type, field.nullable) == (ARROW[column.type], column.nullable), column.name


@pytest.mark.parametrize(("table", "arrow", "spark"), DERIVED, ids=["timeline", "events"])
def test_the_reports_struct_type_is_the_collectors_schema_then_the_partition_folders(
    table: Table, arrow: pa.Schema, spark: StructType
) -> None:
    # Spark's own reading of the collector's Arrow types, column by column.
    files = from_arrow_schema(arrow)
    assert spark.fields[: len(table.columns)] == files.fields
    assert (
        spark.fields[len(table.columns) :]
        == from_arrow_schema(report.arrow_schema(PARTITIONS)).fields
    )
    assert [f.name for f in spark.fields[len(table.columns) :]] == ["cluster", "date"]


@pytest.mark.parametrize(("table", "arrow", "spark"), DERIVED, ids=["timeline", "events"])
def test_the_reports_arrow_schema_is_the_collectors(
    table: Table, arrow: pa.Schema, spark: StructType
) -> None:
    assert report.arrow_schema(table.columns) == arrow


def test_the_episodes_module_still_names_the_reports_schemas() -> None:
    assert episodes.TIMELINE_SCHEMA is report.TIMELINE_SCHEMA
    assert episodes.EVENTS_SCHEMA is report.EVENTS_SCHEMA


def test_every_partition_folder_is_a_non_null_string() -> None:
    assert [(c.name, str(c.type), c.nullable) for c in PARTITIONS] == [
        ("cluster", "string", False),
        ("date", "string", False),
    ]


def test_a_column_not_in_the_table_is_a_key_error_naming_the_table() -> None:
    assert TIMELINE.column("seq").nullable is False
    with pytest.raises(KeyError, match="the events table has no column 'seq'"):
        EVENTS.column("seq")


# Stored in every events table: never renamed.
STORED = [
    (Event.ROLL_PREDICTED, "roll-predicted"),
    (Event.ROLL_START, "roll-start"),
    (Event.ROLL_COMPLETED, "roll-completed"),
    (Event.ROLL_FAILED, "roll-failed"),
    (Event.ROLL_INTERRUPTED, "roll-interrupted"),
    (Event.ADMIN_UNAVAILABLE, "admin-unavailable"),
    (Event.PLATFORM_UNAVAILABLE, "platform-unavailable"),
    (Event.GATE_CLOSED, "gate-closed"),
    (Event.GATE_OPEN, "gate-open"),
    (Event.ELECT_LEADERS, "elect-leaders"),
    (Event.ELECT_FAILED, "elect-failed"),
    (Event.PREFLIGHT, "preflight"),
    (Event.SKIP, "skip"),
    (Event.HOLD, "hold"),
    (Event.DEFER, "defer"),
    (Event.WAIT_READY, "wait-ready"),
    (Event.RESTART, "restart"),
    (Event.RESTART_NOT_OBSERVED, "restart-not-observed"),
    (Event.OBSERVE_AGENT, "observe-agent"),
    (Event.WAIT_RECOVERY, "wait-recovery"),
    (Event.CATCH_UP, "catch-up"),
    (Event.OUT_OF_SYNC_BEFORE, "out-of-sync-before"),
    (Event.READY, "ready"),
    (Event.CONFIGURE, "configure"),
    (Event.CONFIGURED, "configured"),
    (Event.CANARY_TOPIC, "canary-topic"),
    (Event.CANARY_BASELINE, "canary-baseline"),
    (Event.CANARY_FAILING, "canary-failing"),
    (Event.CANARY_COST, "canary-cost"),
    (Event.CANARY_BROKERS, "canary-brokers"),
]


@pytest.mark.parametrize(("event", "value"), STORED, ids=[v for _, v in STORED])
def test_each_event_keeps_its_stored_name(event: Event, value: str) -> None:
    assert event == value and str(event) == value


def test_every_event_is_in_the_table_of_stored_names() -> None:
    assert [e for e, _ in STORED] == list(Event)


def test_every_action_the_report_reads_is_an_event_the_roller_writes() -> None:
    assert set(rolls.PHASES) <= set(Event)
    assert set(rolls.REASONED) <= set(Event)
    assert tuple(rolls.OUTCOMES) == dataset.ROLL_OUTCOMES

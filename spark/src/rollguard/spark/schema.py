"""The dataset's tables as the report reads them, derived from `rollguard.shared.dataset` (where
the columns are declared once, for the collector that writes them too): Spark StructTypes for the
job, and Arrow schemas for what the driver reads itself (the curves)."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
from pyspark.sql.types import (
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from rollguard.shared.dataset import EVENTS, PARTITIONS, TIMELINE, Column, ColumnType, Table

SPARK_TYPES: dict[ColumnType, DataType] = {
    ColumnType.STRING: StringType(),
    ColumnType.INT32: IntegerType(),
    ColumnType.INT64: LongType(),
    ColumnType.FLOAT64: DoubleType(),
}
ARROW_TYPES: dict[ColumnType, pa.DataType] = {
    ColumnType.STRING: pa.string(),
    ColumnType.INT32: pa.int32(),
    ColumnType.INT64: pa.int64(),
    ColumnType.FLOAT64: pa.float64(),
}


def struct_type(table: Table) -> StructType:
    """The table as Spark reads the collector's folders: its columns, then the partitions'."""
    columns = (*table.columns, *PARTITIONS)
    return StructType([StructField(c.name, SPARK_TYPES[c.type], c.nullable) for c in columns])


def arrow_schema(columns: Iterable[Column]) -> pa.Schema:
    """Some of a table's columns (with PARTITIONS, for a reader of the folders), for Arrow."""
    return pa.schema([pa.field(c.name, ARROW_TYPES[c.type], nullable=c.nullable) for c in columns])


TIMELINE_SCHEMA = struct_type(TIMELINE)
EVENTS_SCHEMA = struct_type(EVENTS)

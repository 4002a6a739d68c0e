"""The dataset's tables as the collector writes them: pyarrow schemas derived from
`rollguard.shared.dataset`, where the columns are declared once for every reader and writer."""

from __future__ import annotations

import pyarrow as pa

from rollguard.shared.dataset import EVENTS, TIMELINE, ColumnType, Table

ARROW_TYPES: dict[ColumnType, pa.DataType] = {
    ColumnType.STRING: pa.string(),
    ColumnType.INT32: pa.int32(),
    ColumnType.INT64: pa.int64(),
    ColumnType.FLOAT64: pa.float64(),
}


def arrow_schema(table: Table) -> pa.Schema:
    """The table's columns in its files (the partition folders are not in them)."""
    return pa.schema(
        [pa.field(c.name, ARROW_TYPES[c.type], nullable=c.nullable) for c in table.columns]
    )


TIMELINE_SCHEMA = arrow_schema(TIMELINE)
EVENTS_SCHEMA = arrow_schema(EVENTS)

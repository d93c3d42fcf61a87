"""The four-column table (id, ts, a text and a number) the engine suites write and read,
as an Iceberg schema and as the matching Arrow schema."""

from __future__ import annotations

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestampType


def four_columns(text: str, number: str) -> tuple[Schema, pa.Schema]:
    """Optional columns `id` (long), `ts` (timestamp), `text` (string), `number` (double)."""
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "ts", TimestampType(), required=False),
        NestedField(3, text, StringType(), required=False),
        NestedField(4, number, DoubleType(), required=False),
    )
    arrow = pa.schema(
        [
            ("id", pa.int64()),
            ("ts", pa.timestamp("us")),
            (text, pa.string()),
            (number, pa.float64()),
        ]
    )
    return schema, arrow

"""Metadata pieces several suites build alike: schemas nested to a given depth (for the
nesting limit's tests) and a first view version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def nested_schema(kinds: Sequence[str], depth: int, *, first_id: int = 100) -> dict[str, Any]:
    """A schema whose types nest exactly `depth` levels (its own struct is level 1): level
    `i` is `kinds[i % len(kinds)]` ("struct", "list" or "map"); nested ids count up by two
    from `first_id`."""
    type_: Any = "int"
    next_id = first_id
    for i in range(depth - 1):
        kind = kinds[i % len(kinds)]
        if kind == "struct":
            type_ = {
                "type": "struct",
                "fields": [{"id": next_id, "name": f"f{i}", "required": False, "type": type_}],
            }
        elif kind == "list":
            type_ = {
                "type": "list",
                "element-id": next_id,
                "element-required": False,
                "element": type_,
            }
        else:
            type_ = {
                "type": "map",
                "key-id": next_id,
                "key": "string",
                "value-id": next_id + 1,
                "value-required": False,
                "value": type_,
            }
        next_id += 2
    return {"type": "struct", "fields": [{"id": 1, "name": "x", "required": False, "type": type_}]}


def first_view_version() -> dict[str, Any]:
    """Version 1 of a view: `select 1` in Spark SQL, schema 0, namespace `db`."""
    return {
        "version-id": 1,
        "schema-id": 0,
        "timestamp-ms": 1_000,
        "summary": {},
        "representations": [{"type": "sql", "sql": "select 1", "dialect": "spark"}],
        "default-namespace": ["db"],
    }

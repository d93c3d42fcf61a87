"""PyIceberg's view calls (create, load, list, exists, drop) against icelog."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.e2e]


def test_pyiceberg_view_calls(catalog: Any, namespace: str) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField
    from pyiceberg.view.metadata import ViewVersion

    schema = Schema(NestedField(1, "id", LongType(), required=False))
    version = ViewVersion.model_validate(
        {
            "version-id": 1,
            "schema-id": 0,
            "timestamp-ms": 1_700_000_000_000,
            "summary": {"engine-name": "pyiceberg"},
            "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}],
            "default-namespace": [namespace],
        }
    )
    created = catalog.create_view(f"{namespace}.v", schema, version)
    assert created.metadata.current_version_id == 1
    loaded = catalog.load_view(f"{namespace}.v")
    assert loaded.metadata == created.metadata
    assert catalog.view_exists(f"{namespace}.v") is True
    assert catalog.view_exists(f"{namespace}.nope") is False
    assert catalog.list_views(namespace) == [(namespace, "v")]
    assert catalog.list_tables(namespace) == []
    catalog.drop_view(f"{namespace}.v")
    assert catalog.view_exists(f"{namespace}.v") is False

"""DuckDB 1.5.5 (iceberg extension, loaded offline) on tables PyIceberg wrote through icelog."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pytest

from tests.support import duckdb_ext
from tests.support.four_columns import four_columns
from tests.support.server import CatalogServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SCHEMA, ARROW = four_columns("name", "amount")


def batch(ids: range) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"id": i, "ts": datetime(2024, 3, 1, i % 24), "name": f"n{i}", "amount": i / 2}
            for i in ids
        ],
        schema=ARROW,
    )


@pytest.fixture
def duck() -> Iterator[Any]:
    con = duckdb_ext.connect()
    yield con
    con.close()


def attach(duck: Any, server: CatalogServer, alias: str = "ice", token: str | None = None) -> str:
    """Attach the server's warehouse as `alias`: with `token`, or its clients' token when it
    has one."""
    how = "AUTHORIZATION_TYPE 'none'"
    token = token or server.token
    if token:
        duck.execute(f"CREATE SECRET {alias}_token (TYPE iceberg, TOKEN '{token}')")
        how = f"SECRET {alias}_token"
    duck.execute(
        f"ATTACH '{server.warehouse}' AS {alias} (TYPE iceberg, ENDPOINT '{server.uri}', {how})"
    )
    return alias


def test_iceberg_scan_of_metadata_location(catalog: Any, namespace: str, duck: Any) -> None:
    table = catalog.create_table(f"{namespace}.scanned", schema=SCHEMA)
    table.append(batch(range(10)))
    first = catalog.load_table(f"{namespace}.scanned")
    table.append(batch(range(10, 25)))
    table.delete("id < 5")
    table = catalog.load_table(f"{namespace}.scanned")

    location = table.metadata_location
    assert duck.execute(
        f"SELECT count(*), sum(id), min(id), max(id) FROM iceberg_scan('{location}')"
    ).fetchall() == [(20, sum(range(5, 25)), 5, 24)]
    assert duck.execute(
        f"SELECT name, amount FROM iceberg_scan('{location}') WHERE id = 7"
    ).fetchall() == [("n7", 3.5)]

    snapshots = duck.execute(
        f"SELECT snapshot_id FROM iceberg_snapshots('{location}') ORDER BY sequence_number"
    ).fetchall()
    assert [s[0] for s in snapshots] == [s.snapshot_id for s in table.snapshots()]

    # The metadata file of an earlier commit still describes that earlier state.
    assert duck.execute(
        f"SELECT count(*) FROM iceberg_scan('{first.metadata_location}')"
    ).fetchall() == [(10,)]


def test_attach_rest_catalog_and_read(
    catalog: Any, namespace: str, duck: Any, catalog_server: CatalogServer
) -> None:
    table = catalog.create_table(f"{namespace}.attached", schema=SCHEMA)
    table.append(batch(range(12)))
    table.append(batch(range(12, 20)))

    alias = attach(duck, catalog_server)
    tables = duck.execute(
        "SELECT schema, name FROM (SHOW ALL TABLES) WHERE database = ?", [alias]
    ).fetchall()
    assert (namespace, "attached") in tables
    assert duck.execute(
        f"SELECT count(*), sum(id), max(name) FROM {alias}.{namespace}.attached"
    ).fetchall() == [(20, sum(range(20)), "n9")]
    assert duck.execute(
        f"SELECT ts FROM {alias}.{namespace}.attached WHERE id = 13"
    ).fetchall() == [(datetime(2024, 3, 1, 13),)]


def test_duckdb_inserts_into_a_pyiceberg_table(
    catalog: Any, namespace: str, duck: Any, catalog_server: CatalogServer
) -> None:
    table = catalog.create_table(f"{namespace}.shared", schema=SCHEMA)
    table.append(batch(range(3)))

    alias = attach(duck, catalog_server)
    duck.execute(
        f"INSERT INTO {alias}.{namespace}.shared "
        "VALUES (100, TIMESTAMP '2024-04-01 00:00:00', 'duck', 1.25)"
    )

    reloaded = catalog.load_table(f"{namespace}.shared")
    assert sorted(reloaded.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 100]
    snapshots = reloaded.snapshots()
    assert len(snapshots) == 2
    assert snapshots[1].parent_snapshot_id == snapshots[0].snapshot_id


def test_duckdb_creates_a_table(
    catalog: Any, namespace: str, duck: Any, catalog_server: CatalogServer
) -> None:
    """DuckDB's CREATE TABLE is a staged create (stage-create, then an assert-create commit)."""
    alias = attach(duck, catalog_server)
    duck.execute(f"CREATE TABLE {alias}.{namespace}.made_by_duck (k INTEGER, v VARCHAR)")
    duck.execute(f"INSERT INTO {alias}.{namespace}.made_by_duck VALUES (1, 'one'), (2, 'two')")

    made = catalog.load_table(f"{namespace}.made_by_duck")
    assert [f.name for f in made.schema().fields] == ["k", "v"]
    assert sorted(made.scan().to_arrow().to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "v": "one"},
        {"k": 2, "v": "two"},
    ]

"""Spark against a soft-delete warehouse: DROP TABLE, undrop, DROP TABLE ... PURGE."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_spark import SEED, sql
from tests.support.clients import files_under
from tests.support.server import CatalogServer
from tests.support.spark import register_rest_catalog
from tests.support.warehouses import create_warehouse, deleted_tabulars, undrop

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(300)]

COLUMNS = "id BIGINT, ts TIMESTAMP, category STRING, amount DOUBLE"


def _soft_warehouse_with_db(spark: Any, server: CatalogServer) -> tuple[str, str]:
    """A new soft-deleting warehouse (an hour to expiry) with namespace `db`: its Spark
    catalog's name and the warehouse's id."""
    name, wid = create_warehouse(server, {"type": "soft", "expiration-seconds": 3600})
    cat = register_rest_catalog(
        spark, f"soft_{name}", server.uri, warehouse=name, token=server.token
    )
    spark.sql(f"CREATE NAMESPACE {cat}.db")
    return cat, wid


def test_drop_list_undrop_and_read_again(spark: Any, catalog_server: CatalogServer) -> None:
    cat, wid = _soft_warehouse_with_db(spark, catalog_server)
    table = f"{cat}.db.orders"
    spark.sql(f"CREATE TABLE {table} ({COLUMNS}) USING iceberg PARTITIONED BY (days(ts))")
    spark.sql(f"INSERT INTO {table} VALUES {SEED}")
    spark.sql(f"UPDATE {table} SET amount = amount * 2 WHERE category = 'b'")
    before = sql(spark, f"SELECT * FROM {table} ORDER BY id")
    location = sql(spark, f"DESCRIBE TABLE EXTENDED {table}")
    files = files_under(next(str(r[1]) for r in location if r[0] == "Location"))
    assert files

    spark.sql(f"DROP TABLE {table}")
    assert sql(spark, f"SHOW TABLES IN {cat}.db") == []
    assert all(p.exists() for p in files), "a soft drop keeps every file"
    [dropped] = deleted_tabulars(catalog_server, wid)
    assert (dropped["name"], dropped["namespace"], dropped["typ"]) == ("orders", ["db"], "table")
    # A namespace holding a soft-deleted table cannot be dropped.
    with pytest.raises(Exception, match=r"(?i)not empty|soft-deleted"):
        spark.sql(f"DROP NAMESPACE {cat}.db")

    assert undrop(catalog_server, wid, {"type": "table", "id": dropped["id"]}).status_code == 204
    assert sql(spark, f"SELECT * FROM {table} ORDER BY id") == before
    spark.sql(f"INSERT INTO {table} VALUES (7, TIMESTAMP '2024-01-04 10:00:00', 'c', 1.0)")
    assert sql(spark, f"SELECT count(*) FROM {table}") == [(7,)]
    assert deleted_tabulars(catalog_server, wid) == []


def test_drop_purge_in_a_soft_warehouse(spark: Any, catalog_server: CatalogServer) -> None:
    """Spark's DROP TABLE ... PURGE drops without purge over REST, then deletes the files
    itself: the catalog keeps the entry soft-deleted, but undrop can no longer restore it."""
    cat, wid = _soft_warehouse_with_db(spark, catalog_server)
    table = f"{cat}.db.events"
    spark.sql(f"CREATE TABLE {table} ({COLUMNS}) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES {SEED}")
    spark.sql(f"DROP TABLE {table} PURGE")
    [dropped] = deleted_tabulars(catalog_server, wid)
    refused = undrop(catalog_server, wid, {"type": "table", "id": dropped["id"]})
    assert refused.status_code == 409
    assert "metadata file" in refused.json()["error"]["message"]

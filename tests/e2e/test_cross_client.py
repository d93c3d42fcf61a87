"""One catalog, three engines: Spark writes, PyIceberg and DuckDB read, and the reverse."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pytest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.types import LongType

from tests.e2e.test_duckdb import attach
from tests.support import duckdb_ext
from tests.support.clients import rest_catalog
from tests.support.four_columns import four_columns
from tests.support.server import CatalogServer

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture
def duck() -> Iterator[Any]:
    con = duckdb_ext.connect()
    yield con
    con.close()


def spark_rows(spark: Any, statement: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in spark.sql(statement).collect()]


def test_spark_writes_pyiceberg_and_duckdb_read(
    spark: Any,
    spark_catalog: str,
    catalog: Any,
    namespace: str,
    duck: Any,
    catalog_server: CatalogServer,
) -> None:
    table = f"{spark_catalog}.{namespace}.orders"
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMP, customer STRING, total DOUBLE) "
        "USING iceberg PARTITIONED BY (days(ts))"
    )
    spark.sql(
        f"""INSERT INTO {table} VALUES
            (1, TIMESTAMP '2024-05-01 08:00:00', 'ann', 10.0),
            (2, TIMESTAMP '2024-05-01 09:00:00', 'bob', 20.0),
            (3, TIMESTAMP '2024-05-02 10:00:00', 'cid', 30.0)"""
    )
    spark.sql(
        f"""MERGE INTO {table} t
            USING (SELECT 2L AS id, 25.0D AS total UNION ALL SELECT 4L, 40.0D) s
            ON t.id = s.id
            WHEN MATCHED THEN UPDATE SET t.total = s.total
            WHEN NOT MATCHED THEN
              INSERT (id, ts, customer, total)
              VALUES (s.id, TIMESTAMP '2024-05-03 11:00:00', 'dan', s.total)"""
    )
    expected = [(1, "ann", 10.0), (2, "bob", 25.0), (3, "cid", 30.0), (4, "dan", 40.0)]
    assert spark_rows(spark, f"SELECT id, customer, total FROM {table} ORDER BY id") == expected

    # PyIceberg sees the same table, schema, partitioning and history.
    loaded = catalog.load_table(f"{namespace}.orders")
    got = sorted(
        (r["id"], r["customer"], r["total"])
        for r in loaded.scan(selected_fields=("id", "customer", "total")).to_arrow().to_pylist()
    )
    assert got == expected
    assert [f.name for f in loaded.schema().fields] == ["id", "ts", "customer", "total"]
    assert str(loaded.spec().fields[0].transform) == "day"
    assert len(loaded.snapshots()) == 2
    first = loaded.snapshots()[0].snapshot_id
    assert sorted(loaded.scan(snapshot_id=first).to_arrow().column("total").to_pylist()) == [
        10.0,
        20.0,
        30.0,
    ]

    # DuckDB, straight from the metadata file and through the REST catalog.
    assert (
        duck.execute(
            "SELECT id, customer, total "
            f"FROM iceberg_scan('{loaded.metadata_location}') ORDER BY id"
        ).fetchall()
        == expected
    )
    attach(duck, catalog_server)
    assert (
        duck.execute(
            f"SELECT id, customer, total FROM ice.{namespace}.orders ORDER BY id"
        ).fetchall()
        == expected
    )


def test_pyiceberg_writes_spark_reads(
    spark: Any, spark_catalog: str, catalog: Any, namespace: str
) -> None:
    schema, arrow = four_columns("sku", "price")
    table = catalog.create_table(f"{namespace}.products", schema=schema)
    table.append(
        pa.Table.from_pylist(
            [
                {"id": i, "ts": datetime(2024, 6, 1, i), "sku": f"sku-{i}", "price": i * 1.0}
                for i in range(5)
            ],
            schema=arrow,
        )
    )
    first_snapshot = catalog.load_table(f"{namespace}.products").current_snapshot().snapshot_id
    with table.update_schema() as update:
        update.rename_column("price", "unit_price")
        update.add_column("stock", LongType())
    table = catalog.load_table(f"{namespace}.products")
    table.delete("id = 0")

    name = f"{spark_catalog}.{namespace}.products"
    assert spark.table(name).columns == ["id", "ts", "sku", "unit_price", "stock"]
    assert spark_rows(spark, f"SELECT id, sku, unit_price, stock FROM {name} ORDER BY id") == [
        (1, "sku-1", 1.0, None),
        (2, "sku-2", 2.0, None),
        (3, "sku-3", 3.0, None),
        (4, "sku-4", 4.0, None),
    ]
    assert spark_rows(spark, f"SELECT count(*) FROM {name} VERSION AS OF {first_snapshot}") == [
        (5,)
    ]

    # Spark commits on top of PyIceberg's history, and PyIceberg sees that commit.
    spark.sql(f"INSERT INTO {name} VALUES (9, TIMESTAMP '2024-06-02 00:00:00', 'sku-9', 9.0, 3)")
    reloaded = catalog.load_table(f"{namespace}.products")
    assert sorted(reloaded.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4, 9]
    assert len(reloaded.snapshots()) == 3
    assert reloaded.snapshots()[-1].parent_snapshot_id == reloaded.snapshots()[-2].snapshot_id


def test_names_with_spaces_and_plus_signs(
    spark: Any, spark_catalog: str, catalog: Any, namespace: str
) -> None:
    """Java encodes a space in a path segment as '+', PyIceberg as '%20'; '+' itself as '%2B'."""
    odd = "odd name+1"
    spark.sql(f"CREATE TABLE {spark_catalog}.{namespace}.`{odd}` (id BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO {spark_catalog}.{namespace}.`{odd}` VALUES (1), (2)")

    assert catalog.list_tables(namespace) == [(namespace, odd)]
    table = catalog.load_table((namespace, odd))
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    table.append(table.scan().to_arrow())
    assert spark_rows(spark, f"SELECT count(*) FROM {spark_catalog}.{namespace}.`{odd}`") == [(4,)]
    assert [r[1] for r in spark_rows(spark, f"SHOW TABLES IN {spark_catalog}.{namespace}")] == [odd]


def test_concurrent_spark_and_pyiceberg_appends(
    spark: Any, spark_catalog: str, catalog: Any, namespace: str, catalog_server: CatalogServer
) -> None:
    """Java and Python writers race on one table; both retry on 409 and no row is lost."""
    name = f"{spark_catalog}.{namespace}.race"
    spark.sql(
        f"CREATE TABLE {name} (id BIGINT, writer STRING) USING iceberg "
        "TBLPROPERTIES ('commit.retry.num-retries' = '50', 'commit.retry.min-wait-ms' = '20')"
    )
    per_writer = 4
    errors: list[BaseException] = []
    arrow = pa.schema([("id", pa.int64()), ("writer", pa.string())])

    def spark_writer(n: int) -> None:
        try:
            for i in range(per_writer):
                spark.sql(f"INSERT INTO {name} VALUES ({n * 100 + i}, 'spark{n}')")
        except BaseException as exc:
            errors.append(exc)

    def python_writer(n: int) -> None:
        try:
            own = rest_catalog(catalog_server, name=f"py{n}")
            for i in range(per_writer):
                data = pa.Table.from_pylist([{"id": n * 100 + i, "writer": f"py{n}"}], schema=arrow)
                for _ in range(100):
                    try:
                        own.load_table(f"{namespace}.race").append(data)
                        break
                    except CommitFailedException:
                        continue
                else:
                    raise AssertionError("too many conflicts")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=spark_writer, args=(n,)) for n in (1, 2)]
    threads += [threading.Thread(target=python_writer, args=(n,)) for n in (3, 4, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors

    expected = sorted(n * 100 + i for n in (1, 2, 3, 4, 5) for i in range(per_writer))
    assert [r[0] for r in spark_rows(spark, f"SELECT id FROM {name} ORDER BY id")] == expected
    table = catalog.load_table(f"{namespace}.race")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == expected
    assert len(table.snapshots()) == len(expected)

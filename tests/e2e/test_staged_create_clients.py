"""Creates through staged transactions with auth on, by a user whose only right is `create`
on one namespace: Spark's CTAS, REPLACE TABLE AS SELECT and
`DataFrameWriterV2.createOrReplace`, PyIceberg's `create_table_transaction`, DuckDB's CREATE
TABLE. Each is a `stage-create` and then a commit with `assert-create` (a replace: a commit
on the table its maker now owns). A user who may only read the namespace makes nothing. One
server per backend for the module (SQLite and PostgreSQL, both with an identity
provider)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import httpx
import pyarrow as pa
import pytest

from tests.e2e.test_duckdb import attach
from tests.support import duckdb_ext
from tests.support.clients import rest_catalog
from tests.support.fixtures import E2E_ADMIN, ServerFactory
from tests.support.idp import TestIdentityProvider
from tests.support.server import CatalogServer
from tests.support.spark import register_rest_catalog

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "data": pa.array(["a", "b", "c"])})


@dataclass
class Place:
    server: CatalogServer
    backend: str
    namespace: str
    maker: str  # token: `create` on the namespace, nothing else
    reader: str  # token: `select` on the namespace, nothing else


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("sqlite-auth", id="sqlite-auth"),
        pytest.param("postgres-auth", id="postgres-auth", marks=pytest.mark.postgres),
    ],
)
def place(
    request: pytest.FixtureRequest,
    catalog_server_factory: ServerFactory,
    e2e_idp: TestIdentityProvider,
) -> Place:
    backend = str(request.param)
    server = catalog_server_factory(backend)
    admin = {"Authorization": f"Bearer {e2e_idp.issue(E2E_ADMIN)}"}
    namespace = f"staged_{secrets.token_hex(3)}"
    made = httpx.post(f"{server.uri}/v1/namespaces", json={"namespace": [namespace]}, headers=admin)
    assert made.status_code == 200, made.text
    prefix = httpx.get(
        f"{server.uri}/v1/config", params={"warehouse": "default"}, headers=admin
    ).json()["overrides"]["prefix"]
    found = httpx.get(
        f"{server.base}/management/v1/warehouse/{prefix}/namespace-id",
        params={"namespace": namespace},
        headers=admin,
    ).json()["namespace-id"]
    writes = [
        {"type": "create", "user": "oidc~maker"},
        {"type": "select", "user": "oidc~reader"},
    ]
    granted = httpx.post(
        f"{server.base}/management/v1/permissions/namespace/{found}/assignments",
        json={"writes": writes},
        headers=admin,
    )
    assert granted.status_code == 204, granted.text
    return Place(
        server, backend, namespace, e2e_idp.issue("maker", expires_in=3600),
        e2e_idp.issue("reader", expires_in=3600),
    )  # fmt: skip


def test_pyiceberg_create_table_transaction(place: Place) -> None:
    from pyiceberg.exceptions import ForbiddenError

    maker = rest_catalog(place.server, token=place.maker)
    ident = f"{place.namespace}.py_staged"
    txn = maker.create_table_transaction(ident, schema=ROWS.schema)
    txn.append(ROWS)
    txn.commit_transaction()
    assert maker.load_table(ident).scan().to_arrow().num_rows == 3
    # The maker owns it: later commits are theirs too.
    maker.load_table(ident).append(ROWS)
    assert maker.load_table(ident).scan().to_arrow().num_rows == 6

    reader = rest_catalog(place.server, token=place.reader)
    assert reader.load_table(ident).scan().to_arrow().num_rows == 6
    with pytest.raises(ForbiddenError):
        reader.create_table_transaction(f"{place.namespace}.py_refused", schema=ROWS.schema)
    assert not maker.table_exists(f"{place.namespace}.py_refused")


def test_duckdb_create_table(place: Place) -> None:
    con = duckdb_ext.connect()
    try:
        alias = attach(con, place.server, "maker", token=place.maker)
        table = f"{alias}.{place.namespace}.duck_made"
        con.execute(f"CREATE TABLE {table} (k INTEGER, v VARCHAR)")
        con.execute(f"INSERT INTO {table} VALUES (1, 'one'), (2, 'two')")
        assert con.execute(f"SELECT count(*) FROM {table}").fetchone() == (2,)
        reader = attach(con, place.server, "reader", token=place.reader)
        with pytest.raises(Exception, match=r"403|[Ff]orbidden|[Nn]ot allowed"):
            con.execute(f"CREATE TABLE {reader}.{place.namespace}.duck_refused (k INTEGER)")
    finally:
        con.close()


@pytest.mark.spark
def test_spark_ctas_rtas_and_create_or_replace(spark: Any, place: Place) -> None:
    suffix = place.backend.replace("-", "_")
    cat = register_rest_catalog(spark, f"maker_{suffix}", place.server.uri, token=place.maker)
    ns = f"{cat}.{place.namespace}"
    spark.sql(f"CREATE TABLE {ns}.sp_ctas USING iceberg AS SELECT 1L AS id, 'a' AS data")
    assert spark.table(f"{ns}.sp_ctas").count() == 1
    spark.sql(f"REPLACE TABLE {ns}.sp_ctas USING iceberg AS SELECT 2L AS id, 2.0D AS amount")
    assert spark.table(f"{ns}.sp_ctas").columns == ["id", "amount"]
    spark.sql(f"CREATE OR REPLACE TABLE {ns}.sp_new USING iceberg AS SELECT 3L AS id")
    frame = spark.createDataFrame([(4, "d"), (5, "e")], "id BIGINT, data STRING")
    frame.writeTo(f"{ns}.sp_v2").using("iceberg").createOrReplace()  # a create
    frame.limit(1).writeTo(f"{ns}.sp_v2").using("iceberg").createOrReplace()  # a replace
    assert spark.table(f"{ns}.sp_v2").count() == 1
    assert spark.table(f"{ns}.sp_new").count() == 1

    read_only = register_rest_catalog(
        spark, f"reader_{suffix}", place.server.uri, token=place.reader
    )
    with pytest.raises(Exception, match=r"403|Forbidden|Not allowed"):
        spark.sql(
            f"CREATE TABLE {read_only}.{place.namespace}.sp_refused USING iceberg "
            "AS SELECT 1L AS id"
        )
    assert spark.table(f"{read_only}.{place.namespace}.sp_ctas").count() == 1

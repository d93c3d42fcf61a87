"""Real clients against an icelog that requires tokens from an OpenID provider (the local
test provider of tests/support/idp.py): PyIceberg, DuckDB and Spark, each with a token it
was given and with client credentials it trades for one — at the provider's token endpoint,
or at icelog's (`/v1/oauth/tokens`, passed through) when it knows only the catalog URI."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pyarrow as pa
import pytest

from tests.e2e.test_duckdb import attach
from tests.support import duckdb_ext
from tests.support.clients import rest_catalog
from tests.support.fixtures import ServerFactory
from tests.support.idp import TestIdentityProvider
from tests.support.server import CatalogServer
from tests.support.spark import register_rest_catalog

pytestmark = [pytest.mark.e2e]

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "data": pa.array(["a", "b", "c"])})


@pytest.fixture(scope="module")
def idp() -> Iterator[TestIdentityProvider]:
    with TestIdentityProvider() as provider:
        provider.add_client("etl", "etl-secret", {"aud": "icelog"})
        yield provider


@pytest.fixture(scope="module")
def server(catalog_server_factory: ServerFactory, idp: TestIdentityProvider) -> CatalogServer:
    """Alice bootstraps (project_admin of the default project) and hands out rights on the
    default warehouse: bob reads, the etl client writes, carol administers the data."""
    server = catalog_server_factory(
        "sqlite",
        env={"ICELOG_OPENID_PROVIDER_URI": idp.uri, "ICELOG_OPENID_AUDIENCE": "icelog"},
    )
    alice = {"Authorization": f"Bearer {idp.issue('alice')}"}
    management = f"{server.base}/management/v1"
    bootstrap = httpx.post(
        f"{management}/bootstrap", json={"accept-terms-of-use": True}, headers=alice
    )
    assert bootstrap.status_code == 204, bootstrap.text
    config = httpx.get(f"{server.uri}/v1/config", params={"warehouse": "default"}, headers=alice)
    warehouse = config.json()["overrides"]["prefix"]
    writes = [
        {"type": "select", "user": "oidc~bob"},
        {"type": "modify", "user": "oidc~service-account-etl"},
        {"type": "create", "user": "oidc~service-account-etl"},
    ]
    granted = httpx.post(
        f"{management}/permissions/warehouse/{warehouse}/assignments",
        json={"writes": writes}, headers=alice,
    )  # fmt: skip
    assert granted.status_code == 204, granted.text
    project = httpx.post(
        f"{management}/permissions/project/assignments",
        json={"writes": [{"type": "data_admin", "user": "oidc~carol"}]}, headers=alice,
    )  # fmt: skip
    assert project.status_code == 204, project.text
    return server


def test_without_a_token_clients_are_refused(server: CatalogServer) -> None:
    response = httpx.get(f"{server.uri}/v1/config", params={"warehouse": "default"})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "NotAuthorizedException"
    from pyiceberg.exceptions import OAuthError, UnauthorizedError

    with pytest.raises((UnauthorizedError, OAuthError)):
        rest_catalog(server)


def test_pyiceberg_with_a_token_and_with_client_credentials(
    server: CatalogServer, idp: TestIdentityProvider
) -> None:
    alice = rest_catalog(server, token=idp.issue("alice", extra_claims={"name": "Alice"}))
    alice.create_namespace("auth_py")
    table = alice.create_table("auth_py.t", schema=ROWS.schema)
    table.append(ROWS)
    etl = rest_catalog(
        server, credential="etl:etl-secret", **{"oauth2-server-uri": idp.token_endpoint}
    )
    assert etl.load_table("auth_py.t").scan().to_arrow().num_rows == 3
    etl.load_table("auth_py.t").append(ROWS)
    assert alice.load_table("auth_py.t").scan().to_arrow().num_rows == 6
    # With nothing but the catalog URI: the credential goes to icelog's token endpoint,
    # which passes it to the provider.
    same_etl = rest_catalog(server, credential="etl:etl-secret")
    assert same_etl.load_table("auth_py.t").scan().to_arrow().num_rows == 6
    # Both were provisioned, and the log names who did what.
    token = idp.issue("alice")
    users = httpx.get(
        f"{server.base}/management/v1/user", headers={"Authorization": f"Bearer {token}"}
    ).json()["users"]
    assert {u["id"] for u in users} == {"oidc~alice", "oidc~service-account-etl"}
    events = httpx.get(
        f"{server.base}/management/v1/events",
        params={"tabular-id": str(table.metadata.table_uuid)},
        headers={"Authorization": f"Bearer {token}"},
    ).json()["events"]
    actors = [e["actor"] for e in events]
    assert actors[0] == "oidc~alice" and "oidc~service-account-etl" in actors


def test_duckdb_with_a_token_and_with_client_credentials(
    server: CatalogServer, idp: TestIdentityProvider
) -> None:
    writer = rest_catalog(server, token=idp.issue("alice"))
    writer.create_namespace("auth_duck")
    writer.create_table("auth_duck.t", schema=ROWS.schema).append(ROWS)
    con = duckdb_ext.connect()
    try:
        con.execute(f"CREATE SECRET tok (TYPE iceberg, TOKEN '{idp.issue('bob')}')")
        con.execute(
            f"ATTACH '{server.warehouse}' AS ice (TYPE iceberg, ENDPOINT '{server.uri}', "
            "SECRET tok)"
        )
        assert con.execute("SELECT count(*) FROM ice.auth_duck.t").fetchone() == (3,)
        # No OAUTH2_SERVER_URI: DuckDB asks the catalog's token endpoint.
        con.execute(
            "CREATE SECRET cc (TYPE iceberg, CLIENT_ID 'etl', CLIENT_SECRET 'etl-secret', "
            f"ENDPOINT '{server.uri}')"
        )
        con.execute(
            f"ATTACH '{server.warehouse}' AS ice2 (TYPE iceberg, ENDPOINT '{server.uri}', "
            "SECRET cc)"
        )
        con.execute("INSERT INTO ice2.auth_duck.t VALUES (4, 'd')")
        assert con.execute("SELECT count(*) FROM ice2.auth_duck.t").fetchone() == (4,)
    finally:
        con.close()
    # Without a secret the attach is refused.
    plain = duckdb_ext.connect()
    try:
        with pytest.raises(Exception, match=r"401|[Uu]nauthori|NotAuthorized"):
            attach(plain, server)
    finally:
        plain.close()


@pytest.mark.spark
def test_spark_with_a_token_and_with_client_credentials(
    spark: Any, server: CatalogServer, idp: TestIdentityProvider
) -> None:
    with_token = register_rest_catalog(spark, "ice_token", server.uri)
    spark.conf.set(f"spark.sql.catalog.{with_token}.token", idp.issue("carol"))
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {with_token}.auth_spark")
    spark.sql(f"CREATE TABLE {with_token}.auth_spark.t (id BIGINT, data STRING) USING iceberg")
    spark.sql(f"INSERT INTO {with_token}.auth_spark.t VALUES (1, 'a'), (2, 'b')")
    with_credential = register_rest_catalog(spark, "ice_cred", server.uri)
    prefix = f"spark.sql.catalog.{with_credential}"
    # Only the catalog URI: Iceberg Java asks the catalog's token endpoint (the default).
    spark.conf.set(f"{prefix}.credential", "etl:etl-secret")
    spark.sql(
        f"MERGE INTO {with_credential}.auth_spark.t t USING (SELECT 2 AS id, 'B' AS data "
        "UNION ALL SELECT 3, 'c') s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.data = s.data WHEN NOT MATCHED THEN INSERT *"
    )
    rows = spark.sql(f"SELECT id, data FROM {with_token}.auth_spark.t ORDER BY id").collect()
    assert [(r.id, r.data) for r in rows] == [(1, "a"), (2, "B"), (3, "c")]


def _grant(server: CatalogServer, idp: TestIdentityProvider, path: str, user: str) -> None:
    body = {"writes": [{"type": "select", "user": f"oidc~{user}"}]}
    headers = {"Authorization": f"Bearer {idp.issue('alice')}"}
    granted = httpx.post(
        f"{server.base}/management/v1/permissions/{path}/assignments", json=body, headers=headers
    )
    assert granted.status_code == 204, granted.text


def test_pyiceberg_with_only_a_namespace_or_a_table_grant(
    server: CatalogServer, idp: TestIdentityProvider
) -> None:
    """Select on one namespace (nina) or one table (otto) and nothing else is enough to
    connect to the warehouse by name, find the way and read."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    alice = rest_catalog(server, token=idp.issue("alice"))
    for namespace in ("nav_sales", "nav_hr"):
        alice.create_namespace(namespace)
    orders = alice.create_table("nav_sales.orders", schema=ROWS.schema)
    orders.append(ROWS)
    alice.create_table("nav_sales.refunds", schema=ROWS.schema)
    alice.create_table("nav_hr.salaries", schema=ROWS.schema).append(ROWS)
    headers = {"Authorization": f"Bearer {idp.issue('alice')}"}
    warehouse = httpx.get(
        f"{server.uri}/v1/config", params={"warehouse": "default"}, headers=headers
    ).json()["overrides"]["prefix"]
    found = httpx.get(
        f"{server.base}/management/v1/warehouse/{warehouse}/namespace-id",
        params={"namespace": "nav_sales"}, headers=headers,
    )  # fmt: skip
    _grant(server, idp, f"namespace/{found.json()['namespace-id']}", "nina")
    table_id = orders.metadata.table_uuid
    _grant(server, idp, f"warehouse/{warehouse}/table/{table_id}", "otto")

    for reader in ("nina", "otto"):
        catalog = load_catalog(
            reader, type="rest", uri=server.uri, warehouse="default", token=idp.issue(reader)
        )
        assert catalog.list_namespaces() == [("nav_sales",)]
        assert catalog.load_table("nav_sales.orders").scan().to_arrow().num_rows == 3
        # The namespace on the way answers; what lies off it does not exist for them.
        assert catalog.load_namespace_properties("nav_sales") is not None
        with pytest.raises(NoSuchTableError):
            catalog.load_table("nav_hr.salaries")
        with pytest.raises(NoSuchNamespaceError):
            catalog.list_tables("nav_hr")
    nina = load_catalog("n", type="rest", uri=server.uri, warehouse="default",
                        token=idp.issue("nina"))  # fmt: skip
    assert sorted(nina.list_tables("nav_sales")) == [
        ("nav_sales", "orders"),
        ("nav_sales", "refunds"),
    ]
    otto = load_catalog("o", type="rest", uri=server.uri, warehouse="default",
                        token=idp.issue("otto"))  # fmt: skip
    assert otto.list_tables("nav_sales") == [("nav_sales", "orders")]

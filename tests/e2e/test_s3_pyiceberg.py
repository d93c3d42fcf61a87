"""PyIceberg and DuckDB on S3 warehouses (moto with IAM checks on) with no keys of their
own: through STS vended credentials, and (PyIceberg) through remote signing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

import httpx
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.support import duckdb_ext
from tests.support.clients import rest_catalog, wait_until
from tests.support.fixtures import ServerFactory
from tests.support.moto_server import (
    admin_user,
    client,
    enforce_auth,
    hide_ambient_aws_credentials,
    moto_s3,
    relax_auth,
    vended_role,
)
from tests.support.server import CatalogServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)


def rows(ids: range) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "name": f"n{i}"} for i in ids],
        schema=pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())]),
    )


@dataclass
class Lake:
    endpoint: str
    key: str
    secret: str
    server: CatalogServer
    role: str = ""

    def admin(self) -> Any:
        return client(self.endpoint, "s3", self.key, self.secret)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        listed = self.admin().list_objects_v2(Bucket=bucket, Prefix=prefix)
        return [o["Key"] for o in listed.get("Contents", [])]

    def warehouse(self, bucket: str, **profile: Any) -> str:
        name = f"wh-{uuid4().hex[:8]}"
        body = {
            "warehouse-name": name,
            "storage-profile": {
                "type": "s3",
                "bucket": bucket,
                "key-prefix": "warehouse",
                "region": "us-east-1",
                "endpoint": self.endpoint,
                "path-style-access": True,
                "flavor": "s3-compat",
                **profile,
            },
            "storage-credential": {
                "type": "s3",
                "credential-type": "access-key",
                "access-key-id": self.key,
                "secret-access-key": self.secret,
            },
        }
        response = httpx.post(f"{self.server.base}/management/v1/warehouse", json=body, timeout=60)
        assert response.status_code == 200, response.text
        return name


@pytest.fixture(scope="module")
def lake(
    tmp_path_factory: pytest.TempPathFactory, catalog_server_factory: ServerFactory
) -> Iterator[Lake]:
    with moto_s3(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        key, secret = admin_user(endpoint, "icelog")
        server = catalog_server_factory("sqlite", {"ICELOG_TASK_POLL_INTERVAL_SECONDS": "0.2"})
        found = Lake(endpoint, key, secret, server)
        for bucket in ("vended", "signed"):
            found.admin().create_bucket(Bucket=bucket)
        found.role = vended_role(endpoint, "icelog", "vended")
        # From here on moto checks every key, token and signature: a client without
        # valid credentials of its own gets nothing.
        enforce_auth(endpoint)
        try:
            yield found
        finally:
            relax_auth(endpoint)


@pytest.fixture(autouse=True)
def no_ambient_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    hide_ambient_aws_credentials(monkeypatch)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")


def test_pyiceberg_writes_and_reads_with_vended_credentials_only(lake: Lake) -> None:
    name = lake.warehouse("vended", **{"sts-enabled": True, "sts-role-arn": lake.role})
    catalog = rest_catalog(lake.server, warehouse=name)
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", schema=SCHEMA)
    assert table.location().startswith("s3://vended/warehouse/db/events-")
    # The load-table answer carried temporary credentials, nothing the client configured.
    assert table.io.properties["s3.session-token"]
    assert table.io.properties["s3.access-key-id"] != lake.key
    assert "s3.secret-access-key" not in catalog.properties
    table.append(rows(range(100)))
    table.append(rows(range(100, 150)))
    read = catalog.load_table("db.events").scan().to_arrow()
    assert sorted(read.column("id").to_pylist()) == list(range(150))
    prefix = table.location().split("s3://vended/", 1)[1]
    assert any(k.endswith(".parquet") for k in lake.keys("vended", prefix))

    # /credentials hands out fresh ones for the same table.
    wid = table.io.properties["client.refresh-credentials-endpoint"].split("/")[1]
    refreshed = httpx.get(
        f"{lake.server.uri}/v1/{wid}/namespaces/db/tables/events/credentials", timeout=30
    )
    assert refreshed.status_code == 200
    [credential] = refreshed.json()["storage-credentials"]
    assert credential["prefix"] == table.location()
    assert credential["config"]["s3.session-token"]

    # Without delegation the client has no way in: moto refuses it.
    plain = rest_catalog(
        lake.server, name="plain", warehouse=name, **{"header.X-Iceberg-Access-Delegation": ""}
    )
    with pytest.raises(OSError):
        plain.load_table("db.events").scan().to_arrow()

    # DuckDB reads the same table through the REST catalog, with vended credentials only.
    duck = duckdb_ext.connect()
    try:
        duck.execute(
            f"ATTACH '{name}' AS lake (TYPE iceberg, ENDPOINT '{lake.server.uri}', "
            "AUTHORIZATION_TYPE 'none')"
        )
        assert duck.execute("SELECT count(*), sum(id) FROM lake.db.events").fetchall() == [
            (150, sum(range(150)))
        ]
    finally:
        duck.close()

    catalog.purge_table("db.events")
    assert wait_until(lambda: lake.keys("vended", prefix) == [], timeout=30)
    assert lake.secret not in lake.server.log()


def test_pyiceberg_through_remote_signing(lake: Lake) -> None:
    name = lake.warehouse("signed", **{"remote-signing-enabled": True})
    catalog = rest_catalog(lake.server, warehouse=name)
    catalog.create_namespace("db")
    table = catalog.create_table("db.signed", schema=SCHEMA)
    other = catalog.create_table("db.other", schema=SCHEMA)
    assert table.io.properties["s3.signer"] == "S3V4RestSigner"
    assert "s3.secret-access-key" not in table.io.properties
    # The 1.11 spec's description of the signer comes with the table (PyIceberg ignores it).
    loaded = httpx.get(
        f"{lake.server.uri}/v1/{catalog.properties['prefix']}/namespaces/db/tables/signed",
        headers={"X-Iceberg-Access-Delegation": "remote-signing"},
        timeout=30,
    )
    assert loaded.json()["remote-signing-config"] == {"properties": {}, "headers": {}}
    table.append(rows(range(20)))
    read = catalog.load_table("db.signed").scan().to_arrow()
    assert sorted(read.column("id").to_pylist()) == list(range(20))
    prefix = table.location().split("s3://signed/", 1)[1]
    assert any(k.endswith(".parquet") for k in lake.keys("signed", prefix))

    # The signer of one table refuses a request for another table's files.
    signer = f"{table.io.properties['s3.signer.uri']}/{table.io.properties['s3.signer.endpoint']}"
    foreign = other.location().replace("s3://signed/", f"{lake.endpoint}/signed/")
    refused = httpx.post(
        signer,
        json={
            "region": "us-east-1",
            "method": "GET",
            "uri": f"{foreign}/metadata/x.json",
            "headers": {"x-amz-content-sha256": ["UNSIGNED-PAYLOAD"]},
        },
        timeout=30,
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["type"] == "ForbiddenException"
    assert lake.secret not in refused.text
    assert lake.secret not in lake.server.log()

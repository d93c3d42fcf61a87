"""ADLS and GCS warehouses through the management and catalog APIs, against Azurite and
fake-gcs-server: the catalog's own metadata files live in the emulator, a purge deletes
them, and the storage secret (an account key, a service-account key) is never stored
outside the sealed vault — in no event, read model or log line."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest

from tests.integration.conftest import SCHEMA, Api
from tests.integration.test_s3_warehouses import assert_never_stored, create_warehouse
from tests.support.azurite import ACCOUNT, ACCOUNT_KEY, Azurite, azurite
from tests.support.gcs_server import (
    FakeGoogleAuth,
    ServiceKey,
    fake_gcs,
    fake_google_auth,
    make_bucket,
    new_key,
    object_names,
    pem_body,
)

ROOT = "/management/v1"


@pytest.fixture(scope="module")
def az(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    with azurite(tmp_path_factory.mktemp("azurite")) as running:
        yield running


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fake_gcs(tmp_path_factory.mktemp("gcs") / "fake-gcs.log") as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def google() -> Iterator[FakeGoogleAuth]:
    with fake_google_auth() as auth:
        yield auth


def _blobs(az: Azurite, filesystem: str, prefix: str = "") -> list[str]:
    container = az.admin().get_container_client(filesystem)
    return [b.name for b in container.list_blobs(name_starts_with=prefix)]


def _table_lifecycle(api: Api, warehouse_id: str, listed: Any, prefix: str) -> None:
    """Create, commit and purge a table; `listed()` names the objects under the warehouse."""
    catalog = f"/catalog/v1/{warehouse_id}"
    assert api.client.post(f"{catalog}/namespaces", json={"namespace": ["db"]}).status_code == 200
    created = api.client.post(
        f"{catalog}/namespaces/db/tables", json={"name": "events", "schema": SCHEMA}
    )
    assert created.status_code == 200, created.text
    location = created.json()["metadata-location"]
    assert location.startswith(f"{prefix}/db/events-")
    committed = api.client.post(
        f"{catalog}/namespaces/db/tables/events",
        json={"updates": [{"action": "set-properties", "updates": {"owner": "bi"}}]},
    )
    assert committed.status_code == 200, committed.text
    assert len([n for n in listed() if n.endswith(".metadata.json")]) == 2
    # A location in another store (or outside the warehouse) is refused, nothing written.
    outside = api.client.post(
        f"{catalog}/namespaces/db/tables",
        json={"name": "elsewhere", "schema": SCHEMA, "location": "s3://other/t"},
    )
    assert outside.status_code == 400, outside.text
    dropped = api.client.delete(
        f"{catalog}/namespaces/db/tables/events", params={"purgeRequested": "true"}
    )
    assert dropped.status_code == 204
    assert api.run_tasks() >= 1
    assert listed() == []


def test_an_adls_warehouse_keeps_its_files_in_azure_and_never_its_key(
    api: Api, az: Azurite, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    filesystem = az.new_filesystem()
    response = create_warehouse(
        api,
        {
            "storage-profile": {
                "type": "adls",
                "account-name": ACCOUNT,
                "filesystem": filesystem,
                "key-prefix": "wh",
                "endpoint": az.endpoint,
                "sas-enabled": False,
            },
            "storage-credential": {
                "type": "az",
                "credential-type": "shared-access-key",
                "key": ACCOUNT_KEY,
            },
        },
    )
    assert response.status_code == 200, response.text
    wid = str(response.json()["warehouse-id"])
    shown = api.client.get(f"{ROOT}/warehouse/{wid}")
    stored = shown.json()["storage-profile"]
    base = f"abfss://{filesystem}@{ACCOUNT}.dfs.core.windows.net/wh"
    assert stored["base-location"] == base and stored["credential-id"]
    assert ACCOUNT_KEY not in shown.text
    assert _blobs(az, filesystem) == []  # the access probe left nothing behind
    _table_lifecycle(api, wid, lambda: _blobs(az, filesystem, "wh/db/"), base)
    assert_never_stored(api, ACCOUNT_KEY)
    assert ACCOUNT_KEY not in caplog.text


def test_a_wrong_adls_key_is_a_400_that_never_shows_it(api: Api, az: Azurite) -> None:
    wrong = ACCOUNT_KEY[:-8] + "AAAAAAA="
    response = create_warehouse(
        api,
        {
            "storage-profile": {
                "type": "adls",
                "account-name": ACCOUNT,
                "filesystem": az.new_filesystem(),
                "endpoint": az.endpoint,
                "sas-enabled": False,
            },
            "storage-credential": {
                "type": "az",
                "credential-type": "shared-access-key",
                "key": wrong,
            },
        },
    )
    assert response.status_code == 400, response.text
    assert "Storage validation failed" in response.text
    assert wrong not in response.text and "sig=" not in response.text
    assert_never_stored(api, wrong)


def test_a_gcs_warehouse_keeps_its_files_in_gcs_and_never_its_key(
    api: Api, gcs: str, google: FakeGoogleAuth, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key: ServiceKey = google.register(new_key(google.token_uri))
    bucket = f"icelog-{uuid4().hex[:20]}"
    make_bucket(gcs, bucket)
    response = create_warehouse(
        api,
        {
            "storage-profile": {
                "type": "gcs",
                "bucket": bucket,
                "key-prefix": "wh",
                "endpoint": gcs,
                "sts-endpoint": google.sts_endpoint,
            },
            "storage-credential": key.credential(),
        },
    )
    assert response.status_code == 200, response.text
    wid = str(response.json()["warehouse-id"])
    shown = api.client.get(f"{ROOT}/warehouse/{wid}")
    assert shown.json()["storage-profile"]["base-location"] == f"gs://{bucket}/wh"
    secret = pem_body(key)
    assert secret not in shown.text
    assert object_names(gcs, bucket) == []
    _table_lifecycle(
        api,
        wid,
        lambda: [n for n in object_names(gcs, bucket) if n.startswith("wh/db/")],
        f"gs://{bucket}/wh",
    )
    assert_never_stored(api, secret)
    assert secret not in caplog.text

"""S3 warehouses through the management and catalog APIs, against moto in server mode."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.commands.management import CREDENTIAL_GRACE_S
from tests.integration.conftest import SCHEMA, Api, replica_settings
from tests.integration.test_namespaces_api import error_of
from tests.support.hostile import s3_credential, s3_profile
from tests.support.moto_server import admin_user, client, enforce_auth, moto_s3, relax_auth

ROOT = "/management/v1"


@dataclass
class S3:
    endpoint: str
    key: str
    secret: str

    def client(self) -> Any:
        return client(self.endpoint, "s3", self.key, self.secret)

    def new_bucket(self) -> str:
        name = f"lake-{uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        listed = self.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
        return [o["Key"] for o in listed.get("Contents", [])]


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3]:
    with moto_s3(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        key, secret = admin_user(endpoint, "icelog")
        yield S3(endpoint, key, secret)


def profile(s3: S3, bucket: str, **extra: Any) -> dict[str, Any]:
    return s3_profile(s3.endpoint, bucket, "wh", **extra)


credential = s3_credential


def message_of(response: Any) -> str:
    return str(error_of(response)["message"])


def create_warehouse(api: Api, body: dict[str, Any]) -> Any:
    return api.client.post(f"{ROOT}/warehouse", json={"warehouse-name": uuid4().hex, **body})


def s3_warehouse(api: Api, s3: S3, bucket: str, **extra: Any) -> str:
    response = create_warehouse(
        api,
        {
            "storage-profile": profile(s3, bucket, **extra),
            "storage-credential": credential(s3.key, s3.secret),
        },
    )
    assert response.status_code == 200, response.text
    return str(response.json()["warehouse-id"])


def stored_text(api: Api) -> str:
    """Everything the catalog stored (event store, read models, secrets table) as text;
    byte columns also as hex, as PostgreSQL renders them."""
    settings = api.services.settings
    if settings.database_url is None:
        path = settings.sqlite_path
        raw = b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())
        with sqlite3.connect(path) as conn:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            rows = [str(r) for t in tables for r in conn.execute(f'SELECT * FROM "{t}"')]
        return raw.decode("latin-1") + "\n".join(rows)
    with psycopg.connect(settings.database_url) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        ]
        texts: list[str] = []
        for table in tables:
            for (text,) in conn.execute(f'SELECT t::text FROM "{table}" t'):
                texts.append(text)
    return "\n".join(texts)


def assert_never_stored(api: Api, secret: str) -> None:
    text = stored_text(api)
    assert secret not in text
    assert secret.encode().hex() not in text
    assert "secret-access-key" not in text.replace('"secret-access-key"', "")


def test_tables_live_in_s3_and_the_secret_is_never_stored(api: Api, s3: S3) -> None:
    bucket = s3.new_bucket()
    # The `aws-` spellings that the Doris and Fluss guides send are accepted too.
    response = create_warehouse(
        api,
        {
            "storage-profile": profile(s3, bucket),
            "storage-credential": {
                "type": "s3",
                "credential-type": "access-key",
                "aws-access-key-id": s3.key,
                "aws-secret-access-key": s3.secret,
            },
        },
    )
    assert response.status_code == 200, response.text
    wid = response.json()["warehouse-id"]
    shown = api.client.get(f"{ROOT}/warehouse/{wid}")
    assert shown.status_code == 200
    assert s3.secret not in shown.text
    stored = shown.json()["storage-profile"]
    assert stored["base-location"] == f"s3://{bucket}/wh"
    assert stored["credential-id"]
    assert stored["remote-signing-enabled"] is True
    assert s3.keys(bucket) == []  # the access probe cleaned up after itself

    catalog = f"/catalog/v1/{wid}"
    assert api.client.post(f"{catalog}/namespaces", json={"namespace": ["db"]}).status_code == 200
    created = api.client.post(
        f"{catalog}/namespaces/db/tables", json={"name": "events", "schema": SCHEMA}
    )
    assert created.status_code == 200, created.text
    location = created.json()["metadata-location"]
    assert location.startswith(f"s3://{bucket}/wh/db/events-")
    assert location.split(f"s3://{bucket}/", 1)[1] in s3.keys(bucket)

    committed = api.client.post(
        f"{catalog}/namespaces/db/tables/events",
        json={"updates": [{"action": "set-properties", "updates": {"owner": "bi"}}]},
    )
    assert committed.status_code == 200, committed.text
    assert len(s3.keys(bucket, "wh/db/")) == 2
    loaded = api.client.get(f"{catalog}/namespaces/db/tables/events")
    assert loaded.json()["metadata"]["properties"]["owner"] == "bi"

    dropped = api.client.delete(
        f"{catalog}/namespaces/db/tables/events", params={"purgeRequested": "true"}
    )
    assert dropped.status_code == 204
    assert api.run_tasks() >= 1
    assert s3.keys(bucket, "wh/db/") == []
    assert_never_stored(api, s3.secret)


def test_validation_names_the_step_and_never_the_secret(api: Api, s3: S3) -> None:
    bucket = s3.new_bucket()
    enforce_auth(s3.endpoint)
    try:
        unknown_key = create_warehouse(
            api,
            {
                "storage-profile": profile(s3, bucket),
                "storage-credential": credential("AKIAUNKNOWN000000000", "not-the-secret-123"),
            },
        )
        wrong_secret = create_warehouse(
            api,
            {
                "storage-profile": profile(s3, bucket),
                "storage-credential": credential(s3.key, "wrong-secret-456"),
            },
        )
    finally:
        relax_auth(s3.endpoint)
    assert unknown_key.status_code == 400
    message = message_of(unknown_key)
    assert "could not write" in message and "InvalidAccessKeyId" in message
    assert "not-the-secret-123" not in unknown_key.text
    assert wrong_secret.status_code == 400
    assert "SignatureDoesNotMatch" in message_of(wrong_secret)
    assert "wrong-secret-456" not in wrong_secret.text

    missing_bucket = create_warehouse(
        api,
        {
            "storage-profile": profile(s3, "no-such-bucket-here"),
            "storage-credential": credential(s3.key, s3.secret),
        },
    )
    assert missing_bucket.status_code == 400
    assert "NoSuchBucket" in message_of(missing_bucket)
    # Nothing of the refused warehouses was kept: no events, no sealed credentials.
    assert_never_stored(api, s3.secret)
    assert_never_stored(api, "wrong-secret-456")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"region": None}, "region"),
        ({"bucket": "Not_A_Bucket"}, "bucket"),
        ({"flavor": "gcs"}, "flavor"),
        ({"sts-token-validity-seconds": 10}, "sts-token-validity-seconds"),
        ({"endpoint": "ftp://x"}, "endpoint"),
        # Lakekeeper fields icelog does not act on are refused, not silently ignored.
        ({"aws-kms-key-arn": "arn:aws:kms:x"}, "aws-kms-key-arn: Extra inputs are not permitted"),
        # A layout is an object (Lakekeeper's StorageLayout), not a name.
        ({"storage-layout": "full-hierarchy"}, "storage-layout"),
        ({"key-prefix": "a/../b"}, "key-prefix"),
        ({"sts-enabled": True, "flavor": "aws"}, "sts-role-arn"),
    ],
)
def test_bad_profiles_are_refused(api: Api, change: dict[str, Any], expected: str) -> None:
    body = profile(S3("http://127.0.0.1:9", "k", "s"), "lake") | change
    response = create_warehouse(
        api, {"storage-profile": body, "storage-credential": credential("k", "s")}
    )
    assert response.status_code == 400, response.text
    assert expected in message_of(response)


def test_bad_credentials_are_refused(api: Api) -> None:
    body = profile(S3("http://127.0.0.1:9", "k", "s"), "lake")
    for bad, expected in [
        (None, "storage-credential"),
        ({"type": "s3", "credential-type": "aws-system-identity"}, "credential-type"),
        ({"type": "s3", "access-key-id": "k"}, "secret-access-key"),
        ({"type": "az", "access-key-id": "k", "secret-access-key": "s"}, "type"),
    ]:
        response = create_warehouse(api, {"storage-profile": body, "storage-credential": bad})
        assert response.status_code == 400, response.text
        assert expected in message_of(response)


def test_unreachable_endpoint_is_a_clear_error(api: Api) -> None:
    response = create_warehouse(
        api,
        {
            "storage-profile": profile(S3("http://127.0.0.1:9", "k", "s"), "lake"),
            "storage-credential": credential("k", "some-secret"),
        },
    )
    assert response.status_code == 400
    # Nothing listens there: the one phrase for every endpoint that is not S3.
    assert "no S3 service answered at the endpoint" in message_of(response)


def test_credential_and_profile_updates(api: Api, s3: S3) -> None:
    bucket = s3.new_bucket()
    wid = s3_warehouse(api, s3, bucket)
    first = api.client.get(f"{ROOT}/warehouse/{wid}").json()["storage-profile"]
    key2, secret2 = admin_user(s3.endpoint, f"rotated-{uuid4().hex[:8]}")

    rotated = api.client.post(
        f"{ROOT}/warehouse/{wid}/storage-credential",
        json={"new-storage-credential": credential(key2, secret2)},
    )
    assert rotated.status_code == 204, rotated.text
    second = api.client.get(f"{ROOT}/warehouse/{wid}").json()["storage-profile"]
    assert second["credential-id"] != first["credential-id"]
    # The replaced credential stays readable while other replicas may still use their
    # cached profile, then it is deleted, not kept around encrypted.
    secrets = api.services.catalog.app.secrets
    assert secrets is not None
    assert secrets.get(UUID(first["credential-id"])) is not None
    later = int(time.time() * 1000) + int(CREDENTIAL_GRACE_S * 1000) + 1
    secrets.sweep(later)  # type: ignore[attr-defined]
    assert secrets.get(UUID(first["credential-id"])) is None
    assert secrets.get(UUID(second["credential-id"])) is not None

    catalog = f"/catalog/v1/{wid}"
    assert api.client.post(f"{catalog}/namespaces", json={"namespace": ["db"]}).status_code == 200
    created = api.client.post(
        f"{catalog}/namespaces/db/tables", json={"name": "t", "schema": SCHEMA}
    )
    assert created.status_code == 200, created.text

    longer = api.client.post(
        f"{ROOT}/warehouse/{wid}/storage",
        json={"storage-profile": profile(s3, bucket, **{"sts-token-validity-seconds": 7200})},
    )
    assert longer.status_code == 204, longer.text
    third = api.client.get(f"{ROOT}/warehouse/{wid}").json()["storage-profile"]
    assert third["sts-token-validity-seconds"] == 7200
    assert third["credential-id"] == second["credential-id"]  # kept without a new one

    moved = api.client.post(
        f"{ROOT}/warehouse/{wid}/storage",
        json={"storage-profile": profile(s3, s3.new_bucket())},
    )
    assert moved.status_code == 400
    assert "cannot change" in message_of(moved)
    to_file = api.client.post(
        f"{ROOT}/warehouse/{wid}/storage",
        json={"storage-profile": {"type": "file", "base-location": "file:///srv/x"}},
    )
    assert to_file.status_code == 400

    events = api.client.get(
        f"{ROOT}/events", params={"type": "io.icelog.warehouse.storage-profile-changed"}
    ).json()["events"]
    assert len(events) == 2
    assert_never_stored(api, s3.secret)
    assert_never_stored(api, secret2)


def test_table_locations_stay_inside_the_warehouse(api: Api, s3: S3) -> None:
    bucket = s3.new_bucket()
    strict = s3_warehouse(api, s3, bucket)
    relaxed = s3_warehouse(
        api, s3, bucket, **{"key-prefix": "other", "allow-alternative-protocols": True}
    )
    for wid in (strict, relaxed):
        assert (
            api.client.post(f"/catalog/v1/{wid}/namespaces", json={"namespace": ["db"]}).status_code
            == 200
        )

    def create(wid: str, name: str, location: str) -> Any:
        return api.client.post(
            f"/catalog/v1/{wid}/namespaces/db/tables",
            json={"name": name, "schema": SCHEMA, "location": location},
        )

    assert create(strict, "a", f"s3a://{bucket}/wh/a").status_code == 400
    assert create(strict, "b", f"s3://{bucket}/elsewhere/b").status_code == 400
    assert create(strict, "c", f"s3://{bucket}/wh/c").status_code == 200
    nested = create(strict, "d", f"s3://{bucket}/wh/c/d")
    assert nested.status_code == 409
    aliased = create(relaxed, "e", f"s3a://{bucket}/other/e")
    assert aliased.status_code == 200, aliased.text
    assert aliased.json()["metadata"]["location"] == f"s3://{bucket}/other/e"
    assert create(relaxed, "f", f"s3n://{bucket}/other/e/f").status_code == 409


def test_a_create_naming_its_location_sees_a_scheme_change_made_on_another_replica(
    api: Api, s3: S3
) -> None:
    """Creates take their warehouse's storage from a 2 s cache; one that names its own
    location reads the warehouse, so the schemes allowed are the current ones."""
    bucket = s3.new_bucket()
    wid = s3_warehouse(api, s3, bucket, **{"allow-alternative-protocols": True})
    catalog = f"/catalog/v1/{wid}/namespaces"
    assert api.client.post(catalog, json={"namespace": ["db"]}).status_code == 200
    plain = api.client.post(f"{catalog}/db/tables", json={"name": "a", "schema": SCHEMA})
    assert plain.status_code == 200, plain.text  # this process now holds the profile

    settings = replica_settings(api, {"ICELOG_TASK_WORKERS": "0"})
    services = Services.build(settings)
    try:
        with TestClient(create_app(settings, services)) as replica:
            strict = replica.post(
                f"{ROOT}/warehouse/{wid}/storage",
                json={"storage-profile": profile(s3, bucket)},
            )
            assert strict.status_code == 204, strict.text
    finally:
        services.close()
    aliased = api.client.post(
        f"{catalog}/db/tables",
        json={"name": "b", "schema": SCHEMA, "location": f"s3a://{bucket}/wh/b"},
    )
    assert aliased.status_code == 400, aliased.text
    named = api.client.post(
        f"{catalog}/db/tables",
        json={"name": "c", "schema": SCHEMA, "location": f"s3://{bucket}/wh/c"},
    )
    assert named.status_code == 200, named.text


def test_a_revoked_credential_fails_commits_cleanly(api: Api, s3: S3) -> None:
    bucket = s3.new_bucket()
    user = f"revoked-{uuid4().hex[:8]}"
    key, secret = admin_user(s3.endpoint, user)
    response = create_warehouse(
        api, {"storage-profile": profile(s3, bucket), "storage-credential": credential(key, secret)}
    )
    assert response.status_code == 200, response.text
    catalog = f"/catalog/v1/{response.json()['warehouse-id']}"
    assert api.client.post(f"{catalog}/namespaces", json={"namespace": ["db"]}).status_code == 200
    created = api.client.post(
        f"{catalog}/namespaces/db/tables", json={"name": "t", "schema": SCHEMA}
    )
    assert created.status_code == 200, created.text

    enforce_auth(s3.endpoint)
    try:
        iam = client(s3.endpoint, "iam", s3.key, s3.secret)
        iam.delete_access_key(UserName=user, AccessKeyId=key)
        refused = api.client.post(
            f"{catalog}/namespaces/db/tables/t",
            json={"updates": [{"action": "set-properties", "updates": {"a": "b"}}]},
        )
    finally:
        relax_auth(s3.endpoint)
    assert refused.status_code == 503, refused.text
    assert "could not write" in message_of(refused) and "InvalidAccessKeyId" in message_of(refused)
    assert secret not in refused.text
    # Nothing was committed: the table is still at its first metadata file.
    loaded = api.client.get(f"{catalog}/namespaces/db/tables/t").json()
    assert loaded["metadata-location"] == created.json()["metadata-location"]

"""PyIceberg on GCS warehouses (fake-gcs-server) with no storage keys of its own: a running
`icelog serve` vends downscoped tokens, with authentication off and on.

Each warehouse is created through the management API with the access check on, with a
service-account key whose `token_uri` is the local token endpoint and a profile whose
`sts-endpoint` is the local STS (tests/support/gcs_server.py `FakeGoogleAuth`, which keeps
every token exchange). fake-gcs-server accepts any bearer token and enforces no access
boundary, so:

- what PyIceberg sent is seen by a recording proxy in front of the emulator (the only
  tokens on its requests are the catalog's own and the ones vended for the table);
- what a token may reach is the boundary icelog asked STS for, its CEL condition evaluated
  by tests/support/cel_conditions.py (which parses nothing but the shape icelog writes);
- read-only is the role asked for (`objectViewer`), not a refused write.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pytest
from pyiceberg.exceptions import BadRequestError, ForbiddenError, NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from icelog.commands.storage.gcs.boundary import READ_ROLE, WRITE_ROLE
from tests.support.cel_conditions import allows, clauses
from tests.support.clients import wait_until
from tests.support.fixtures import ServerFactory
from tests.support.gcs_server import (
    PROJECT_ID,
    Exchange,
    FakeGoogleAuth,
    ServiceKey,
    fake_gcs,
    fake_google_auth,
    make_bucket,
    new_key,
    object_names,
    pem_body,
    recording_proxy,
)
from tests.support.idp import TestIdentityProvider
from tests.support.server import CatalogServer
from tests.support.vended_e2e import Deployment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TOKEN = "gcs.oauth2.token"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)
FAST_TASKS = {"ICELOG_TASK_POLL_INTERVAL_SECONDS": "0.2"}


def rows(ids: range, *, score: bool = False) -> pa.Table:
    fields = [pa.field("id", pa.int64()), pa.field("name", pa.string())]
    if score:
        fields.append(pa.field("score", pa.float64()))
    data = [{"id": i, "name": f"n{i}", **({"score": i / 2} if score else {})} for i in ids]
    return pa.Table.from_pylist(data, schema=pa.schema(fields))


def new_name(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(3)}"


def new_bucket(endpoint: str) -> str:
    name = f"icelog-{secrets.token_hex(10)}"
    make_bucket(endpoint, name)
    return name


def key_of(location: str, bucket: str) -> str:
    """The object key prefix of a table location (no outer '/')."""
    root = f"gs://{bucket}/"
    assert location.startswith(root), location
    return location[len(root) :].strip("/")


def exchange_of(auth: FakeGoogleAuth, token: str) -> Exchange:
    """The token exchange that produced a vended token (`downscoped-<n>` is the n-th)."""
    assert token.startswith("downscoped-"), token
    return auth.exchanges[int(token.removeprefix("downscoped-")) - 1]


def condition_of(exchange: Exchange) -> str:
    """The CEL condition of the exchange's one rule."""
    (rule,) = exchange.rules
    expression: str = rule["availabilityCondition"]["expression"]
    return expression


def role_of(exchange: Exchange) -> list[str]:
    (rule,) = exchange.rules
    permissions: list[str] = rule["availablePermissions"]
    return permissions


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fake_gcs(tmp_path_factory.mktemp("gcs") / "fake-gcs.log") as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def auth() -> Iterator[FakeGoogleAuth]:
    """The key's token endpoint and STS, for this module alone: never reset, so that
    `downscoped-<n>` always names the n-th exchange."""
    with fake_google_auth() as running:
        yield running


@pytest.fixture(scope="module")
def key(auth: FakeGoogleAuth) -> ServiceKey:
    return auth.register(new_key(auth.token_uri))


@pytest.fixture(scope="module")
def open_deployment(catalog_server_factory: ServerFactory) -> Deployment:
    return Deployment("open", catalog_server_factory("sqlite", FAST_TASKS))


@pytest.fixture(scope="module")
def auth_deployment(
    catalog_server_factory: ServerFactory, e2e_idp: TestIdentityProvider
) -> Deployment:
    return Deployment("auth", catalog_server_factory("sqlite-auth", FAST_TASKS), e2e_idp)


@pytest.fixture(params=["open", "auth"])
def deployment(request: pytest.FixtureRequest) -> Deployment:
    found: Deployment = request.getfixturevalue(f"{request.param}_deployment")
    return found


def profile(endpoint: str, auth: FakeGoogleAuth, bucket: str) -> dict[str, Any]:
    return {
        "type": "gcs",
        "bucket": bucket,
        "key-prefix": "wh",
        "endpoint": endpoint,
        "sts-endpoint": auth.sts_endpoint,
    }


def warehouse(
    deployment: Deployment, endpoint: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> tuple[str, str]:
    """A new warehouse on `bucket` (the access check on): (name, id)."""
    name = new_name("gcs")
    return name, deployment.warehouse(name, profile(endpoint, auth, bucket), key.credential())


def no_secret_in_log(server: CatalogServer, key: ServiceKey) -> None:
    log = server.log()
    assert pem_body(key) not in log and key.info["private_key_id"] not in log
    assert "catalog-token-" not in log and "downscoped-" not in log


# -- the round trip -------------------------------------------------------------------------


def test_pyiceberg_round_trip_with_vended_tokens_only(
    emulator: str,
    auth: FakeGoogleAuth,
    key: ServiceKey,
    deployment: Deployment,
) -> None:
    """Create, append, scan, add a column, append and scan again, refresh the credentials,
    purge: PyIceberg reaches the store with nothing but the tokens the catalog vends for
    the table, as the proxy in front of the emulator saw."""
    bucket = new_bucket(emulator)
    with recording_proxy(emulator) as proxy:
        name, wid = warehouse(deployment, proxy.url, auth, key, bucket)
        assert object_names(emulator, bucket) == [], "the access check leaves nothing behind"
        catalog = deployment.catalog(name)
        catalog.create_namespace("db")
        table = catalog.create_table("db.events", schema=SCHEMA)
        location = table.location()
        prefix = key_of(location, bucket)
        assert prefix.startswith("wh/db/events-")

        props = table.io.properties
        assert type(table.io).__name__ == "PyArrowFileIO"
        assert props["gcs.service.host"] == proxy.url
        assert props["gcs.project-id"] == PROJECT_ID
        assert int(props["gcs.oauth2.token-expires-at"]) > (time.time() + 3000) * 1000
        refresh = f"v1/{wid}/namespaces/db/tables/events/credentials"
        assert props["gcs.oauth2.refresh-credentials-endpoint"] == refresh
        assert props["client.refresh-credentials-endpoint"] == refresh
        assert all(pem_body(key) not in str(v) for v in props.values())
        vended = {props[TOKEN]}

        table.append(rows(range(100)))
        table.append(rows(range(100, 150)))
        read = catalog.load_table("db.events").scan().to_arrow()
        assert sorted(read.column("id").to_pylist()) == list(range(150))

        with table.update_schema() as update:
            update.add_column("score", DoubleType())
        table = catalog.load_table("db.events")
        vended.add(table.io.properties[TOKEN])
        table.append(rows(range(150, 160), score=True))
        loaded = catalog.load_table("db.events")
        vended.add(loaded.io.properties[TOKEN])
        read = loaded.scan().to_arrow()
        assert read.column_names == ["id", "name", "score"]
        scores = dict(
            zip(read.column("id").to_pylist(), read.column("score").to_pylist(), strict=True)
        )
        assert len(scores) == 160
        assert scores[0] is None and scores[159] == 79.5

        stored = object_names(emulator, bucket)
        assert all(n.startswith(f"{prefix}/") for n in stored), stored
        assert sum(n.endswith(".parquet") for n in stored) == 3

        # Every token vended for the table is bounded to it, read-write for its writer.
        for token in vended:
            exchange = exchange_of(auth, token)
            assert role_of(exchange) == [WRITE_ROLE]
            assert all(allows(exchange.boundary, name=n) for n in stored)
            assert not allows(exchange.boundary, name="wh/db/other/data/x.parquet")

        # /credentials hands out a token for the same table.
        answered = deployment.credentials(wid, "db", "events")
        assert answered.status_code == 200, answered.text
        [credential] = answered.json()["storage-credentials"]
        assert credential["prefix"] == location
        config = credential["config"]
        assert int(config["gcs.oauth2.token-expires-at"]) > time.time() * 1000
        fresh = exchange_of(auth, config[TOKEN])
        assert role_of(fresh) == [WRITE_ROLE]
        own = ("name", f"projects/_/buckets/{bucket}/objects/{prefix}/")
        assert clauses(condition_of(fresh))[0] == own
        vended.add(config[TOKEN])

        catalog.purge_table("db.events")
        assert not catalog.table_exists("db.events")
        assert wait_until(lambda: object_names(emulator, bucket) == [], timeout=30)
    seen = proxy.seen

    # What reached the store: the catalog's own token (its metadata files, the access
    # check, the purge) and the tokens vended for this table, nothing else; the data files
    # went with a vended token.
    catalog_tokens = {a for _, _, a in seen if a and a.startswith("Bearer catalog-token-")}
    used = {a for _, _, a in seen} - catalog_tokens
    assert used and used <= {f"Bearer {t}" for t in vended}, used
    parquet_writes = [
        a for m, path, a in seen if m == "POST" and unquote(path).endswith(".parquet")
    ]
    assert len(parquet_writes) == 3 and set(parquet_writes) <= used
    no_secret_in_log(deployment.server, key)


# -- scope ---------------------------------------------------------------------------------------


@pytest.mark.attack
def test_table_a_token_covers_no_other_table(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, deployment: Deployment
) -> None:
    """The boundary of table A's vended token, evaluated against every object of table B
    (its sibling, even one whose name starts like A's) denies them all, and allows A's."""
    bucket = new_bucket(emulator)
    name, _ = warehouse(deployment, emulator, auth, key, bucket)
    catalog = deployment.catalog(name)
    catalog.create_namespace("db")
    tables = {t: catalog.create_table(f"db.{t}", schema=SCHEMA) for t in ("a", "b")}
    for table in tables.values():
        table.append(rows(range(3)))
    # A table placed where its key starts with A's: a listing of "A" would name it.
    a_key = key_of(tables["a"].location(), bucket)
    tables["a10"] = catalog.create_table(
        "db.a10", schema=SCHEMA, location=f"gs://{bucket}/{a_key}0"
    )
    tables["a10"].append(rows(range(2)))
    keys = {t: key_of(table.location(), bucket) for t, table in tables.items()}
    stored = object_names(emulator, bucket)
    objects = {t: [n for n in stored if n.startswith(f"{k}/")] for t, k in keys.items()}
    assert all(len(found) >= 4 for found in objects.values()), objects

    a = exchange_of(auth, catalog.load_table("db.a").io.properties[TOKEN])
    assert role_of(a) == [WRITE_ROLE]
    assert all(allows(a.boundary, name=n) for n in objects["a"])
    for other in ("b", "a10"):
        assert not any(allows(a.boundary, name=n) for n in objects[other]), other
        assert not allows(a.boundary, list_prefix=f"{keys[other]}/")
    assert allows(a.boundary, list_prefix=f"{keys['a']}/metadata/")
    for wider in (keys["a"], "wh/db/", "wh/", ""):
        assert not allows(a.boundary, list_prefix=wider), wider
    b = exchange_of(auth, catalog.load_table("db.b").io.properties[TOKEN])
    assert all(allows(b.boundary, name=n) for n in objects["b"])
    assert not any(allows(b.boundary, name=n) for n in objects["a"])


# -- rights --------------------------------------------------------------------------------------


@pytest.mark.attack
def test_read_only_and_describe_only_users(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, auth_deployment: Deployment
) -> None:
    """With auth on: `select` on table A gets a token bounded to A with the viewer role
    (the emulator checks no token: the role asked of STS is what makes it read-only),
    `describe` gets the metadata and no token; neither reaches table B."""
    deployment = auth_deployment
    bucket = new_bucket(emulator)
    name, wid = warehouse(deployment, emulator, auth, key, bucket)
    writer = deployment.catalog(name)
    writer.create_namespace("db")
    table = writer.create_table("db.a", schema=SCHEMA)
    table.append(rows(range(5)))
    writer.create_table("db.b", schema=SCHEMA)
    assert role_of(exchange_of(auth, table.io.properties[TOKEN])) == [WRITE_ROLE]
    table_id = str(table.metadata.table_uuid)
    reader_token = deployment.grant_on_table(wid, table_id, "select", new_name("gcs-reader"))
    describer_token = deployment.grant_on_table(wid, table_id, "describe", new_name("gcs-desc"))
    a_key = key_of(table.location(), bucket)

    reader = deployment.catalog(name, token=reader_token, name="reader")
    mine = reader.load_table("db.a")
    exchange = exchange_of(auth, mine.io.properties[TOKEN])
    assert role_of(exchange) == [READ_ROLE]
    assert allows(exchange.boundary, name=f"{a_key}/data/x.parquet")
    assert not allows(exchange.boundary, name="wh/db/b/data/x.parquet")
    assert sorted(mine.scan().to_arrow().column("id").to_pylist()) == list(range(5))
    answered = deployment.credentials(wid, "db", "a", token=reader_token)
    assert answered.status_code == 200, answered.text
    [credential] = answered.json()["storage-credentials"]
    assert role_of(exchange_of(auth, credential["config"][TOKEN])) == [READ_ROLE]
    with pytest.raises(NoSuchTableError):
        reader.load_table("db.b")

    exchanges = len(auth.exchanges)
    describer = deployment.catalog(name, token=describer_token, name="describer")
    seen = describer.load_table("db.a")
    assert seen.metadata.table_uuid == table.metadata.table_uuid
    given = {k for k in seen.io.properties if k.startswith(("gcs.", "client."))}
    assert given == {"gcs.service.host"}, given  # where the store is, and nothing else
    refused = deployment.credentials(wid, "db", "a", token=describer_token)
    assert refused.status_code == 403, refused.text
    assert "downscoped-" not in refused.text
    with pytest.raises(ForbiddenError):
        describer.load_credentials("db.a", seen.location())
    assert len(auth.exchanges) == exchanges, "nothing was even asked of STS"


# -- adversarial ---------------------------------------------------------------------------------


@pytest.mark.attack
def test_a_table_location_outside_the_warehouse_is_refused(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, deployment: Deployment
) -> None:
    """A create-table naming another bucket or a folder of the bucket beside the
    warehouse's gets no table, no object there and no token."""
    bucket, other = new_bucket(emulator), new_bucket(emulator)
    name, _ = warehouse(deployment, emulator, auth, key, bucket)
    catalog = deployment.catalog(name)
    catalog.create_namespace("db")
    exchanges = len(auth.exchanges)
    for location in (
        f"gs://{other}/wh/db/evil",
        f"gs://{bucket}/elsewhere/evil",
        f"gs://{bucket}/wharf/evil",
        f"gs://{bucket}/wh/db/../../evil",
        f"s3://{bucket}/wh/db/evil",
    ):
        with pytest.raises(BadRequestError):
            catalog.create_table("db.evil", schema=SCHEMA, location=location)
        assert not catalog.table_exists("db.evil"), location
    assert object_names(emulator, other) == []
    assert object_names(emulator, bucket) == []
    assert len(auth.exchanges) == exchanges


@pytest.mark.attack
def test_a_hostile_table_name_or_location_never_widens_the_condition(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, deployment: Deployment
) -> None:
    """A quote in a table's name is not in its location (the storage layout writes names
    safely); a quote in a location the client chose gets no token. Either way every
    condition sent to STS has the one shape icelog writes, confined to one table."""
    bucket = new_bucket(emulator)
    name, _ = warehouse(deployment, emulator, auth, key, bucket)
    catalog = deployment.catalog(name)
    catalog.create_namespace("db")
    first = len(auth.exchanges)
    injected = "x') || true || resource.name.startsWith('"
    for hostile in ("it's", injected, "back\\slash"):
        table = catalog.create_table(("db", hostile), schema=SCHEMA)
        table_key = key_of(table.location(), bucket)
        assert "'" not in table_key and "\\" not in table_key, table_key
        exchange = exchange_of(auth, table.io.properties[TOKEN])
        assert allows(exchange.boundary, name=f"{table_key}/metadata/v1.metadata.json")
        assert not allows(exchange.boundary, name="wh/db/victim/metadata/v1.metadata.json")
        assert not allows(exchange.boundary, list_prefix="wh/db/")
    before = len(auth.exchanges)
    with pytest.raises(BadRequestError, match="cannot be scoped"):
        catalog.create_table("db.chosen", schema=SCHEMA, location=f"gs://{bucket}/wh/db/{injected}")
    assert len(auth.exchanges) == before, "no token was asked for"
    for exchange in auth.exchanges[first:]:
        expression = condition_of(exchange)
        parsed = clauses(expression)  # nothing but `<subject>.startsWith('<literal>') || ...`
        assert len(parsed) == 3 and "'" not in "".join(p for _, p in parsed), expression
        assert exchange.rules[0]["availableResource"].endswith(f"/buckets/{bucket}")


def test_a_create_refused_for_its_credentials_leaves_no_table(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, open_deployment: Deployment
) -> None:
    bucket = new_bucket(emulator)
    name, _ = warehouse(open_deployment, emulator, auth, key, bucket)
    catalog = open_deployment.catalog(name)
    catalog.create_namespace("db")
    with pytest.raises(BadRequestError):
        catalog.create_table("db.quoted", schema=SCHEMA, location=f"gs://{bucket}/wh/db/it's")
    assert not catalog.table_exists("db.quoted")
    assert object_names(emulator, bucket) == []

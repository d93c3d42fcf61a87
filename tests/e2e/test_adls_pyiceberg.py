"""PyIceberg on ADLS Gen2 warehouses (Azurite) with no storage keys of its own: a running
`icelog serve` vends SAS tokens, with authentication off and on.

Each warehouse is created through the management API with the access check on, as a user
sends it. On Azurite a warehouse vends with `sas-scope: filesystem` (sr=c): Azurite signs
no directory SAS (sr=d), so the access check, which tries one vended token, refuses the
default `directory` scope there (pinned below). What the emulator enforces, and so what is
proven by use:

- a SAS opens one filesystem (the signature names the container): one warehouse's token
  reaches none of another warehouse's filesystem;
- a SAS's permissions: a read-only token (`sp=rl`) cannot write.

What it cannot enforce, and so what is proven by the token's fields and signature (with
tests/support/sas_check.py, the independent checker Azurite itself agrees with, see
tests/integration/test_storage_adls.py): that a `directory`-scope token for table A names
A's folder and not B's. That warehouse is made on a server that skips the access check.
"""

from __future__ import annotations

import datetime as dt
import secrets
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobClient, ContainerClient
from pyiceberg.exceptions import BadRequestError, ForbiddenError, NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from tests.support import sas_check
from tests.support.azurite import ACCOUNT, ACCOUNT_KEY, Azurite, azurite
from tests.support.clients import wait_until
from tests.support.fixtures import ServerFactory
from tests.support.idp import TestIdentityProvider
from tests.support.server import CatalogServer
from tests.support.vended_e2e import Deployment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

HOST = f"{ACCOUNT}.dfs.core.windows.net"
SAS_KEY = f"adls.sas-token.{HOST}"
SHARED_KEY = {"type": "az", "credential-type": "shared-access-key", "key": ACCOUNT_KEY}
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


def profile(az: Azurite, filesystem: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "adls",
        "account-name": ACCOUNT,
        "filesystem": filesystem,
        "endpoint": az.endpoint,
        "sas-scope": "filesystem",
        **extra,
    }


def blobs(az: Azurite, filesystem: str, prefix: str = "") -> list[str]:
    listed = az.admin().get_container_client(filesystem).list_blobs(name_starts_with=prefix)
    return sorted(b.name for b in listed)


def folder(location: str, filesystem: str) -> str:
    """The blob name prefix of a table location in `filesystem` (no outer '/')."""
    root = f"abfss://{filesystem}@{HOST}/"
    assert location.startswith(root), location
    return location[len(root) :].strip("/")


def sas_of(properties: dict[str, Any]) -> dict[str, str]:
    """The fields of the SAS a FileIO's properties carry."""
    return sas_check.fields(properties[SAS_KEY])


def expiry(fields: dict[str, str]) -> float:
    """When a SAS stops working (epoch seconds)."""
    signed = dt.datetime.strptime(fields["se"], "%Y-%m-%dT%H:%M:%SZ")
    return signed.replace(tzinfo=dt.UTC).timestamp()


def new_name(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(3)}"


# -- deployments ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def az(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    with azurite(tmp_path_factory.mktemp("azurite")) as running:
        yield running


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


@pytest.fixture(scope="module")
def unchecked_server(catalog_server_factory: ServerFactory) -> CatalogServer:
    """The one server here without the access check: for `directory`-scope warehouses,
    whose check Azurite must fail (it signs no directory SAS)."""
    return catalog_server_factory("sqlite", {"ICELOG_SKIP_STORAGE_VALIDATION": "true"})


def no_secret_in_log(server: CatalogServer, *tokens: str) -> None:
    log = server.log()
    assert ACCOUNT_KEY not in log
    for token in tokens:
        signature = sas_check.fields(token)["sig"]
        assert signature not in log and quote(signature, safe="") not in log


# -- the round trip -------------------------------------------------------------------------


def test_pyiceberg_round_trip_with_vended_sas_only(az: Azurite, deployment: Deployment) -> None:
    """Create, append, scan, add a column, append and scan again, refresh the credentials,
    purge: PyIceberg reaches Azurite with nothing but the SAS the catalog vends."""
    filesystem = az.new_filesystem()
    name = new_name("adls")
    wid = deployment.warehouse(name, profile(az, filesystem), SHARED_KEY)
    assert blobs(az, filesystem) == [], "the access check leaves nothing behind"
    catalog = deployment.catalog(name)
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", schema=SCHEMA)
    location = table.location()
    prefix = folder(location, filesystem)
    assert prefix.startswith("db/events-")

    props = table.io.properties
    token = props[SAS_KEY]
    fields = sas_of(props)
    assert (fields["sr"], fields["sp"]) == ("c", "racwdl")  # the filesystem, read-write
    assert "si" not in fields and "spr" not in fields
    assert expiry(fields) > time.time() + 3000
    assert props["adls.connection-string"] == (
        f"BlobEndpoint={az.endpoint};SharedAccessSignature={token}"
    )
    assert all(ACCOUNT_KEY not in str(v) for v in props.values())
    refresh = f"v1/{wid}/namespaces/db/tables/events/credentials"
    assert props["adls.refresh-credentials-endpoint"] == refresh
    assert props["client.refresh-credentials-endpoint"] == refresh

    table.append(rows(range(100)))
    table.append(rows(range(100, 150)))
    read = catalog.load_table("db.events").scan().to_arrow()
    assert sorted(read.column("id").to_pylist()) == list(range(150))

    with table.update_schema() as update:
        update.add_column("score", DoubleType())
    table = catalog.load_table("db.events")
    table.append(rows(range(150, 160), score=True))
    read = catalog.load_table("db.events").scan().to_arrow()
    assert read.column_names == ["id", "name", "score"]
    scores = dict(zip(read.column("id").to_pylist(), read.column("score").to_pylist(), strict=True))
    assert len(scores) == 160
    assert scores[0] is None and scores[159] == 79.5

    stored = blobs(az, filesystem)
    assert all(n.startswith(f"{prefix}/") for n in stored), stored
    assert sum(n.endswith(".parquet") for n in stored) == 3
    assert any(n.endswith(".metadata.json") for n in stored)

    # /credentials hands out a working SAS for the same table.
    answered = deployment.credentials(wid, "db", "events")
    assert answered.status_code == 200, answered.text
    [credential] = answered.json()["storage-credentials"]
    assert credential["prefix"] == location
    fresh = sas_of(credential["config"])
    assert (fresh["sr"], fresh["sp"]) == ("c", "racwdl")
    assert expiry(fresh) > time.time() + 1800
    from pyiceberg.io import load_file_io

    io = load_file_io(properties=dict(credential["config"]), location=location)
    current = table.metadata_location
    stored_metadata = az.admin().get_blob_client(filesystem, folder(current, filesystem))
    with io.new_input(current).open() as stream:
        assert stream.read() == stored_metadata.download_blob().readall()

    catalog.purge_table("db.events")
    assert not catalog.table_exists("db.events")
    assert wait_until(lambda: blobs(az, filesystem) == [], timeout=30), blobs(az, filesystem)
    no_secret_in_log(deployment.server, token, credential["config"][SAS_KEY])


# -- scope ---------------------------------------------------------------------------------------


@pytest.mark.attack
def test_a_filesystem_sas_reaches_its_filesystem_and_no_other(
    az: Azurite, open_deployment: Deployment
) -> None:
    """`sas-scope: filesystem` opens the warehouse's whole filesystem (sr=c), by design: the
    token of table A reads table B of the same warehouse. Azurite checks the container the
    signature names: the same token reaches nothing of a warehouse in another filesystem."""
    deployment = open_deployment
    first_fs, second_fs = az.new_filesystem(), az.new_filesystem()
    first, second = new_name("adls_one"), new_name("adls_two")
    deployment.warehouse(first, profile(az, first_fs), SHARED_KEY)
    deployment.warehouse(second, profile(az, second_fs), SHARED_KEY)
    one, two = deployment.catalog(first), deployment.catalog(second, name="two")
    for catalog in (one, two):
        catalog.create_namespace("db")
    table_a = one.create_table("db.a", schema=SCHEMA)
    table_b = one.create_table("db.b", schema=SCHEMA)
    table_c = two.create_table("db.c", schema=SCHEMA)
    for table in (table_a, table_b, table_c):
        table.append(rows(range(3)))
    table_b, table_c = one.load_table("db.b"), two.load_table("db.c")

    token = table_a.io.properties[SAS_KEY]
    assert sas_of(table_a.io.properties)["sr"] == "c"
    # Signed for the first filesystem, and for none of the second's names.
    f = sas_check.fields(token)
    for container, verifies in ((first_fs, True), (second_fs, False)):
        resource = sas_check.canonical_resource(ACCOUNT, container)
        signed = sas_check.signature(f, resource, ACCOUNT_KEY, delegation=False)
        assert (signed == f["sig"]) is verifies

    # Filesystem-wide: A's FileIO reads B's metadata.
    with table_a.io.new_input(table_b.metadata_location).open() as stream:
        assert stream.read().startswith(b"{")

    # The other filesystem: Azurite refuses the token for a read, a listing and a write.
    c_metadata = folder(table_c.metadata_location, second_fs)
    with pytest.raises(HttpResponseError) as refused:
        BlobClient(az.endpoint, second_fs, c_metadata, credential=token).download_blob()
    assert refused.value.status_code == 403
    with pytest.raises(HttpResponseError) as refused:
        list(ContainerClient(az.endpoint, second_fs, credential=token).list_blobs())
    assert refused.value.status_code == 403
    before = blobs(az, second_fs)
    with pytest.raises(HttpResponseError) as refused:
        BlobClient(az.endpoint, second_fs, "db/planted", credential=token).upload_blob(b"x")
    assert refused.value.status_code == 403
    # And PyIceberg's FileIO with A's config cannot open C's files either.
    with pytest.raises(Exception), table_a.io.new_input(table_c.metadata_location).open() as s:  # noqa: B017
        s.read()
    assert blobs(az, second_fs) == before


def test_the_access_check_refuses_directory_sas_on_azurite(
    az: Azurite, open_deployment: Deployment
) -> None:
    """The emulator's limit through the management API: the check vends one directory SAS
    and Azurite refuses it (it has no hierarchical namespace); the answer says what to do."""
    filesystem = az.new_filesystem()
    refused = open_deployment.create_warehouse(
        new_name("adls_dir"),
        profile(az, filesystem, **{"sas-scope": "directory", "key-prefix": "wh"}),
        SHARED_KEY,
    )
    assert refused.status_code == 400, refused.text
    message = refused.json()["error"]["message"]
    assert "a vended SAS token was refused" in message and "hierarchical namespace" in message
    assert ACCOUNT_KEY not in message and "sig=" not in message
    assert blobs(az, filesystem) == []


@pytest.mark.attack
def test_a_directory_sas_names_its_tables_folder_and_no_other(
    az: Azurite, unchecked_server: CatalogServer
) -> None:
    """`sas-scope: directory` (the default, for real ADLS Gen2): the SAS PyIceberg gets for
    table A is a directory SAS whose signature binds A's folder — not B's, not a sibling
    that only starts like A's, not the warehouse — and a hostile table name moves no
    boundary. Azurite cannot use such tokens, so their signature is recomputed here."""
    deployment = Deployment("unchecked", unchecked_server)
    filesystem = az.new_filesystem()
    name = new_name("adls_dir")
    wid = deployment.warehouse(
        name, profile(az, filesystem, **{"sas-scope": "directory", "key-prefix": "wh"}), SHARED_KEY
    )
    catalog = deployment.catalog(name)
    catalog.create_namespace("db")
    hostile = "a'b..%2F..%2Fx"
    tables = {t: catalog.create_table(("db", t), schema=SCHEMA) for t in ("a", "b", hostile)}
    folders = {t: folder(table.location(), filesystem) for t, table in tables.items()}
    assert all(f.startswith("wh/db/") and f.count("/") == 2 for f in folders.values()), folders

    def verifies(token: str, name: str) -> bool:
        f = sas_check.fields(token)
        resource = sas_check.canonical_resource(ACCOUNT, filesystem, name)
        return sas_check.signature(f, resource, ACCOUNT_KEY, delegation=False) == f["sig"]

    for t, table in tables.items():
        token = table.io.properties[SAS_KEY]
        f = sas_check.fields(token)
        assert (f["sr"], f["sdd"], f["sp"]) == ("d", "3", "racwdl")
        assert verifies(token, folders[t])
        others = [folders[o] for o in tables if o != t]
        for elsewhere in [*others, f"{folders[t]}0", "wh/db", "wh", ""]:
            assert not verifies(token, elsewhere), (t, elsewhere)

    # /credentials: the same scope.
    answered = deployment.credentials(wid, "db", "a")
    assert answered.status_code == 200, answered.text
    [credential] = answered.json()["storage-credentials"]
    assert verifies(credential["config"][SAS_KEY], folders["a"])
    assert not verifies(credential["config"][SAS_KEY], folders["b"])


# -- rights --------------------------------------------------------------------------------------


@pytest.mark.attack
def test_read_only_and_describe_only_users(az: Azurite, auth_deployment: Deployment) -> None:
    """With auth on: `select` on table A gets a read-only SAS (Azurite refuses its writes),
    `describe` on A gets the metadata and no credentials at all; neither reaches table B."""
    deployment = auth_deployment
    filesystem = az.new_filesystem()
    name = new_name("adls_rights")
    wid = deployment.warehouse(name, profile(az, filesystem), SHARED_KEY)
    writer = deployment.catalog(name)
    writer.create_namespace("db")
    table = writer.create_table("db.a", schema=SCHEMA)
    table.append(rows(range(5)))
    writer.create_table("db.b", schema=SCHEMA)
    assert sas_of(table.io.properties)["sp"] == "racwdl"  # the owner writes
    table_id = str(table.metadata.table_uuid)
    reader_token = deployment.grant_on_table(wid, table_id, "select", new_name("adls-reader"))
    describer_token = deployment.grant_on_table(wid, table_id, "describe", new_name("adls-desc"))

    reader = deployment.catalog(name, token=reader_token, name="reader")
    mine = reader.load_table("db.a")
    fields = sas_of(mine.io.properties)
    assert fields["sp"] == "rl" and not set(fields["sp"]) & set("wcda")
    assert sorted(mine.scan().to_arrow().column("id").to_pylist()) == list(range(5))
    before = blobs(az, filesystem)
    with pytest.raises(RuntimeError, match="AuthorizationPermissionMismatch"):  # adlfs's words
        mine.append(rows(range(5, 8)))
    token = mine.io.properties[SAS_KEY]
    new_blob = f"{folder(mine.location(), filesystem)}/data/planted.parquet"
    with pytest.raises(HttpResponseError) as denied:
        BlobClient(az.endpoint, filesystem, new_blob, credential=token).upload_blob(b"x")
    assert denied.value.status_code == 403
    existing = folder(mine.metadata_location, filesystem)
    with pytest.raises(HttpResponseError) as denied:
        BlobClient(az.endpoint, filesystem, existing, credential=token).delete_blob()
    assert denied.value.status_code == 403
    assert blobs(az, filesystem) == before
    answered = deployment.credentials(wid, "db", "a", token=reader_token)
    assert answered.status_code == 200, answered.text
    [credential] = answered.json()["storage-credentials"]
    assert sas_of(credential["config"])["sp"] == "rl"
    with pytest.raises(NoSuchTableError):
        reader.load_table("db.b")

    describer = deployment.catalog(name, token=describer_token, name="describer")
    seen = describer.load_table("db.a")
    assert seen.metadata.table_uuid == table.metadata.table_uuid
    given = {k for k in seen.io.properties if k.startswith(("adls.", "client."))}
    # Where the account is (an endpoint, no credential), and nothing else.
    assert given == {f"adls.connection-string.{HOST}"}, given
    assert seen.io.properties[f"adls.connection-string.{HOST}"] == az.endpoint
    refused_credentials = deployment.credentials(wid, "db", "a", token=describer_token)
    assert refused_credentials.status_code == 403, refused_credentials.text
    assert "sig=" not in refused_credentials.text
    with pytest.raises(ForbiddenError):
        describer.load_credentials("db.a", seen.location())


# -- adversarial ---------------------------------------------------------------------------------


@pytest.mark.attack
def test_a_table_location_outside_the_warehouse_is_refused(
    az: Azurite, deployment: Deployment
) -> None:
    """A create-table naming another filesystem, another account, or a location whose
    folder could not be scoped (a percent-escape) gets no table there and no SAS."""
    filesystem, other = az.new_filesystem(), az.new_filesystem()
    name = new_name("adls_out")
    deployment.warehouse(name, profile(az, filesystem), SHARED_KEY)
    catalog = deployment.catalog(name)
    catalog.create_namespace("db")
    for location in (
        f"abfss://{other}@{HOST}/db/evil",
        f"abfss://{filesystem}@otheraccount.dfs.core.windows.net/db/evil",
        f"abfss://{filesystem}@{ACCOUNT}.dfs.evil.example/db/evil",
        f"wasbs://{other}@{ACCOUNT}.blob.core.windows.net/db/evil",
    ):
        with pytest.raises(BadRequestError):
            catalog.create_table("db.evil", schema=SCHEMA, location=location)
        assert not catalog.table_exists("db.evil"), location
    assert blobs(az, other) == []
    # A '%' could make the folder the service checks and the one clients use two places:
    # no SAS for it.
    with pytest.raises(BadRequestError, match="cannot be scoped"):
        catalog.create_table(
            "db.escaped", schema=SCHEMA, location=f"abfss://{filesystem}@{HOST}/db/t%2541"
        )


def test_a_create_refused_for_its_credentials_leaves_no_table(
    az: Azurite, open_deployment: Deployment
) -> None:
    filesystem = az.new_filesystem()
    name = new_name("adls_half")
    open_deployment.warehouse(name, profile(az, filesystem), SHARED_KEY)
    catalog = open_deployment.catalog(name)
    catalog.create_namespace("db")
    with pytest.raises(BadRequestError):
        catalog.create_table(
            "db.escaped", schema=SCHEMA, location=f"abfss://{filesystem}@{HOST}/db/t%2541"
        )
    assert not catalog.table_exists("db.escaped")
    assert blobs(az, filesystem) == []

"""The ADLS storage kind against Azurite: FileIO, SAS vending, the access check, PyIceberg's
FileIO fed with vended config, and the service-principal path through a stand-in Entra ID.

What Azurite can and cannot prove (docs/storage.md, "ADLS Gen2"):

- it serves the Blob API only and has no hierarchical namespace, so it refuses the directory
  SAS (`sr=d`) tokens this kind vends for real ADLS Gen2 accounts (403); the scope of those
  tokens is proven here by their signed fields and by recomputing their signature with an
  independent checker (tests/support/sas_check.py) that Azurite itself validates;
- its OAuth mode (HTTPS) takes the stand-in's tokens and hands out user delegation keys, but
  validates user delegation SAS tokens only up to the 2025-07-05 layout, older than the one
  azure-storage-blob signs.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobClient, BlobServiceClient

from icelog.commands.storage.adls import KIND
from icelog.commands.storage.adls.clients import NO_TOKEN, NOT_AZURE, service_client
from icelog.commands.storage.adls.fileio import AdlsFileIO
from icelog.commands.storage.adls.probe import HNS_HINT
from icelog.commands.storage.adls.vending import CONNECTION_STRING, SAS_TOKEN
from icelog.commands.storage.kind import StorageLimits
from icelog.commands.storage.policy import StoragePolicy
from icelog.domain.errors import BadRequestError, ConflictError, ServiceUnavailableError
from icelog.domain.locations import Location
from icelog.domain.ports import OutsideStorageError, UnreadableFileError
from tests.support import sas_check
from tests.support.azurite import (
    ACCOUNT,
    ACCOUNT_KEY,
    Azurite,
    Tls,
    azurite,
    azurite_oauth,
    self_signed,
)
from tests.support.entra import EntraStandIn
from tests.support.server import free_port

SHARED_KEY = {"type": "az", "credential-type": "shared-access-key", "key": ACCOUNT_KEY}
HOST = f"{ACCOUNT}.dfs.core.windows.net"


@pytest.fixture(scope="module")
def az(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    with azurite(tmp_path_factory.mktemp("azurite")) as running:
        yield running


def normalized(
    endpoint: str, filesystem: str, credential: Any = None, **extra: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    profile = {
        "type": "adls",
        "account-name": ACCOUNT,
        "filesystem": filesystem,
        "key-prefix": "wh",
        "endpoint": endpoint,
        "sas-enabled": False,
        **extra,
    }
    stored, sealed = KIND.normalize(profile, credential or SHARED_KEY, StoragePolicy())
    assert sealed is not None
    return stored, sealed


def file_io(az: Azurite, filesystem: str, **limits: Any) -> tuple[AdlsFileIO, str]:
    profile, credential = normalized(az.endpoint, filesystem)
    io = KIND.file_io(profile, credential, StorageLimits(**limits))
    assert isinstance(io, AdlsFileIO)
    return io, profile["base-location"]


# -- FileIO ---------------------------------------------------------------------------------


def test_write_read_exists_and_never_overwrite(az: Azurite) -> None:
    io, base = file_io(az, az.new_filesystem())
    location = f"{base}/db/t/metadata/00000-a.metadata.json"
    assert not io.exists(location)
    io.write_new(location, b'{"format-version": 2}')
    assert io.exists(location)
    assert io.read(location) == b'{"format-version": 2}'
    with pytest.raises(ConflictError):
        io.write_new(location, b"replaced")
    assert io.read(location) == b'{"format-version": 2}'


def test_reads_are_bounded_in_size(az: Azurite) -> None:
    io, base = file_io(az, az.new_filesystem(), max_read_bytes=100)
    io.write_new(f"{base}/exact", b"x" * 100)
    io.write_new(f"{base}/over", b"x" * 101)
    io.write_new(f"{base}/empty", b"")
    assert io.read(f"{base}/exact") == b"x" * 100
    assert io.read(f"{base}/empty") == b""
    with pytest.raises(UnreadableFileError, match="larger than 100 bytes"):
        io.read(f"{base}/over")
    with pytest.raises(FileNotFoundError):
        io.read(f"{base}/absent")


def test_delete_says_whether_the_blob_was_there(az: Azurite) -> None:
    io, base = file_io(az, az.new_filesystem())
    io.write_new(f"{base}/db/t/data/f.parquet", b"data")
    assert io.delete(f"{base}/db/t/data/f.parquet") is True
    assert io.delete(f"{base}/db/t/data/f.parquet") is False
    assert not io.exists(f"{base}/db/t/data/f.parquet")


def test_holds_files_looks_below_whole_segments(az: Azurite) -> None:
    io, base = file_io(az, az.new_filesystem())
    assert io.holds_files(f"{base}/db/t1") is False
    io.write_new(f"{base}/db/t10/data/f.parquet", b"data")
    assert io.holds_files(f"{base}/db/t1") is False  # t10 is not below t1
    assert io.holds_files(f"{base}/db/t10") is True
    assert io.holds_files(f"{base}/db") is True
    assert io.holds_files(base) is True


def test_directory_entries_are_not_files(az: Azurite) -> None:
    # On a hierarchical-namespace account the Blob API shows a directory as an empty blob
    # marked hdi_isfolder=true (Azurite keeps the marker as set here).
    filesystem = az.new_filesystem()
    io, base = file_io(az, filesystem)
    marker = {"hdi_isfolder": "true"}
    admin = az.admin()
    admin.get_blob_client(filesystem, "wh/db/t/metadata").upload_blob(b"", metadata=marker)
    admin.get_blob_client(filesystem, "wh/db/t").upload_blob(b"", metadata=marker)
    assert io.exists(f"{base}/db/t/metadata") is False
    with pytest.raises(UnreadableFileError, match="a directory"):
        io.read(f"{base}/db/t/metadata")
    assert io.holds_files(f"{base}/db/t") is False  # only an empty directory below it
    io.write_new(f"{base}/db/t/metadata/v1.metadata.json", b"{}")
    assert io.holds_files(f"{base}/db/t") is True


def test_wasbs_spelling_names_the_same_blob(az: Azurite) -> None:
    filesystem = az.new_filesystem()
    io, base = file_io(az, filesystem)
    io.write_new(f"{base}/db/t/a", b"A")
    wasbs = f"wasbs://{filesystem}@{ACCOUNT}.blob.core.windows.net/wh/db/t/a"
    assert io.read(wasbs) == b"A"
    assert io.exists(wasbs)
    with pytest.raises(ConflictError):
        io.write_new(wasbs, b"B")


@pytest.mark.attack
@pytest.mark.parametrize(
    "outside",
    [
        "abfss://{other}@" + HOST + "/wh/db/t/a",  # another filesystem
        "abfss://{fs}@otheraccount.dfs.core.windows.net/wh/db/t/a",  # another account
        "abfss://{fs}@" + ACCOUNT + ".dfs.evil.example/wh/db/t/a",  # another host
        "abfss://{fs}@" + HOST + "/wh2/db/t/a",  # a sibling of the prefix
        "abfss://{fs}@" + HOST + "/other",  # above the prefix
        "wasbs://{fs}@" + ACCOUNT + ".blob.core.windows.net/wh2/a",
        "s3://{fs}/wh/db/t/a",
        "file:///wh/db/t/a",
    ],
)
def test_locations_outside_the_root_are_refused_before_any_request(outside: str) -> None:
    # A client for a port nothing listens on: any request would fail as a 503, not a 400.
    dead = BlobServiceClient(
        f"http://127.0.0.1:{free_port()}/{ACCOUNT}",
        credential={"account_name": ACCOUNT, "account_key": ACCOUNT_KEY},
        retry_total=0,
    )
    io = AdlsFileIO(dead, Location.parse(f"abfss://lake@{HOST}/wh"))
    location = outside.format(fs="lake", other="other")
    for call in (io.read, io.exists, io.delete, io.holds_files):
        with pytest.raises(OutsideStorageError):
            call(location)
    with pytest.raises(OutsideStorageError):
        io.write_new(location, b"x")
    with pytest.raises(OutsideStorageError):  # the warehouse folder is never a file
        io.write_new(f"abfss://lake@{HOST}/wh", b"x")
    with pytest.raises(BadRequestError):  # never parsed into a place at all
        io.read(f"abfss://lake@{HOST}/wh/db/../../x")


@pytest.mark.attack
def test_a_dripping_store_cannot_hold_a_read() -> None:
    """A server that answers a download and then sends a byte now and then: the read ends at
    its deadline, not when the body would."""

    class Drip(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(206)
            for name, value in {
                "Content-Length": "1000",
                "Content-Range": "bytes 0-999/1000",
                "x-ms-blob-type": "BlockBlob",
                "x-ms-request-id": str(uuid.uuid4()),
                "ETag": '"0x1"',
                "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT",
            }.items():
                self.send_header(name, value)
            self.end_headers()
            try:
                for _ in range(1000):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.5)
            except OSError:
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = BlobServiceClient(
            f"http://127.0.0.1:{server.server_address[1]}/{ACCOUNT}",
            credential={"account_name": ACCOUNT, "account_key": ACCOUNT_KEY},
            retry_total=0,
            read_timeout=5,
        )
        io = AdlsFileIO(client, Location.parse(f"abfss://lake@{HOST}/wh"), read_timeout_s=1.5)
        started = time.monotonic()
        with pytest.raises(UnreadableFileError, match=r"not read within 1\.5 s"):
            io.read(f"abfss://lake@{HOST}/wh/slow.json")
        assert time.monotonic() - started < 8
    finally:
        server.shutdown()
        server.server_close()


# -- vending --------------------------------------------------------------------------------


def vending_profile(
    az: Azurite, filesystem: str, **extra: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    return normalized(az.endpoint, filesystem, **{"sas-enabled": True, **extra})


@pytest.mark.attack
@pytest.mark.parametrize("write", [False, True])
def test_vended_sas_opens_only_the_table_directory(az: Azurite, write: bool) -> None:
    filesystem = az.new_filesystem()
    profile, credential = vending_profile(az, filesystem, **{"sas-token-validity-seconds": 900})
    table = f"{profile['base-location']}/db/t1"
    before = time.time()
    vended = KIND.vend(profile, credential, table, write=write)
    token = vended.config[f"{SAS_TOKEN}{HOST}"]
    f = sas_check.fields(token)
    assert f["sr"] == "d"  # a directory ...
    assert f["sdd"] == "3"  # ... three segments below the filesystem: wh/db/t1
    assert f["sp"] == ("racwdl" if write else "rl")
    assert "spr" not in f and "si" not in f  # no stored policy could widen it
    expiry = dt.datetime.strptime(f["se"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    assert before + 900 - 2 <= expiry.timestamp() <= time.time() + 900
    assert vended.expires_at_ms == int(expiry.timestamp()) * 1000
    assert vended.config[f"adls.sas-token-expires-at-ms.{HOST}"] == str(vended.expires_at_ms)

    # The signature binds the table's folder: it verifies for /blob/<account>/<fs>/wh/db/t1
    # and for no other resource (a sibling table, the warehouse, the whole filesystem).
    def verifies(name: str) -> bool:
        resource = sas_check.canonical_resource(ACCOUNT, filesystem, name)
        return sas_check.signature(f, resource, ACCOUNT_KEY, delegation=False) == f["sig"]

    assert verifies("wh/db/t1")
    for other in ("wh/db/t10", "wh/db/t2", "wh/db", "wh", ""):
        assert not verifies(other), other


def test_the_sas_checker_agrees_with_azurite(az: Azurite) -> None:
    """The independent checker's tokens are what Azurite accepts, and one changed field
    makes Azurite refuse: it computes signatures as the service does."""
    filesystem = az.new_filesystem()
    az.admin().get_blob_client(filesystem, "wh/db/t1/a").upload_blob(b"A")
    se = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    blob_token = sas_check.service_sas(
        ACCOUNT, ACCOUNT_KEY, filesystem, "wh/db/t1/a", resource="b", sp="r", se=se
    )
    assert (
        BlobClient(az.endpoint, filesystem, "wh/db/t1/a", credential=blob_token)
        .download_blob()
        .readall()
        == b"A"
    )
    tampered = blob_token.replace("sp=r", "sp=rw")
    with pytest.raises(HttpResponseError) as refused:
        BlobClient(az.endpoint, filesystem, "wh/db/t1/a", credential=tampered).download_blob()
    assert refused.value.status_code == 403


@pytest.mark.attack
def test_vended_permissions_are_enforced(az: Azurite) -> None:
    """Azurite enforces SAS permissions (not directory scope): the vended read-only
    permissions cannot write or delete, the read-write ones can. Signed here for the
    filesystem, the one scope Azurite honours besides single blobs."""
    filesystem = az.new_filesystem()
    az.admin().get_blob_client(filesystem, "wh/db/t1/a").upload_blob(b"A")
    profile, credential = vending_profile(az, filesystem)
    table = f"{profile['base-location']}/db/t1"
    se = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for write in (False, True):
        permissions = sas_check.fields(
            KIND.vend(profile, credential, table, write=write).config[f"{SAS_TOKEN}{HOST}"]
        )["sp"]
        token = sas_check.service_sas(
            ACCOUNT, ACCOUNT_KEY, filesystem, "", resource="c", sp=permissions, se=se
        )
        blob = BlobClient(az.endpoint, filesystem, f"wh/db/t1/new-{write}", credential=token)
        reader = BlobClient(az.endpoint, filesystem, "wh/db/t1/a", credential=token)
        assert reader.download_blob().readall() == b"A"
        if write:
            blob.upload_blob(b"new", overwrite=False)
            blob.delete_blob()
        else:
            with pytest.raises(HttpResponseError) as refused:
                blob.upload_blob(b"new")
            assert refused.value.status_code == 403
            with pytest.raises(HttpResponseError) as refused:
                reader.delete_blob()
            assert refused.value.status_code == 403


def test_azurite_refuses_directory_sas(az: Azurite) -> None:
    """The emulator's limit, pinned: a vended token (sr=d) opens nothing on Azurite. When this
    fails, Azurite has learnt directory SAS and the tests above can use it directly."""
    filesystem = az.new_filesystem()
    az.admin().get_blob_client(filesystem, "wh/db/t1/a").upload_blob(b"A")
    profile, credential = vending_profile(az, filesystem)
    vended = KIND.vend(profile, credential, f"{profile['base-location']}/db/t1", write=False)
    token = vended.config[f"{SAS_TOKEN}{HOST}"]
    with pytest.raises(HttpResponseError) as refused:
        BlobClient(az.endpoint, filesystem, "wh/db/t1/a", credential=token).download_blob()
    assert refused.value.status_code == 403


@pytest.mark.attack
@pytest.mark.parametrize(
    "location",
    [
        "abfss://{fs}@" + HOST + "/wh",  # the whole warehouse
        "abfss://{fs}@" + HOST + "/wh2/db/t",
        "abfss://other@" + HOST + "/wh/db/t",
        "abfss://{fs}@" + HOST + "/wh/db/t%2541",
    ],
)
def test_vending_refuses_anything_but_a_table_folder(az: Azurite, location: str) -> None:
    profile, credential = vending_profile(az, "lake")
    with pytest.raises(BadRequestError, match="Cannot vend credentials"):
        KIND.vend(profile, credential, location.format(fs="lake"), write=True)


def test_pyiceberg_file_io_reads_the_vended_config(az: Azurite) -> None:
    """PyIceberg 0.12 picks its fsspec FileIO (adlfs) for abfss and reaches the emulator's
    account through the vended connection string, with the vended token: Azurite answers 403
    to the directory SAS (it has none). With the token swapped for a filesystem SAS of the
    same permissions (the scope Azurite honours) it writes and reads the table's files, and
    a read-only token cannot write."""
    from pyiceberg.io import load_file_io
    from pyiceberg.io.fsspec import FsspecFileIO

    filesystem = az.new_filesystem()
    profile, credential = vending_profile(az, filesystem)
    table = f"{profile['base-location']}/db/t1"
    se = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def swapped(write: bool) -> dict[str, str]:
        config = dict(KIND.vend(profile, credential, table, write=write).config)
        vended = config[f"{SAS_TOKEN}{HOST}"]
        assert config[CONNECTION_STRING] == (
            f"BlobEndpoint={az.endpoint};SharedAccessSignature={vended}"
        )
        honoured = sas_check.service_sas(
            ACCOUNT, ACCOUNT_KEY, filesystem, "", resource="c",
            sp=sas_check.fields(vended)["sp"], se=se,
        )  # fmt: skip
        return {key: value.replace(vended, honoured) for key, value in config.items()}

    verbatim = KIND.vend(profile, credential, table, write=True).config
    io = load_file_io(properties=dict(verbatim), location=table)
    assert isinstance(io, FsspecFileIO)
    # adlfs wraps the service's answer in exceptions of its own.
    with (
        pytest.raises(Exception) as refused,
        io.new_output(f"{table}/data/a.parquet").create() as out,
    ):
        out.write(b"rows")
    assert "403" in str(refused.value) or "AuthorizationFailure" in str(refused.value)

    io = load_file_io(properties=swapped(write=True), location=table)
    with io.new_output(f"{table}/data/a.parquet").create() as out:
        out.write(b"rows")
    assert io.new_input(f"{table}/data/a.parquet").open().read() == b"rows"
    stored = az.admin().get_blob_client(filesystem, "wh/db/t1/data/a.parquet")
    assert stored.download_blob().readall() == b"rows"

    io = load_file_io(properties=swapped(write=False), location=table)
    assert io.new_input(f"{table}/data/a.parquet").open().read() == b"rows"
    with pytest.raises(Exception), io.new_output(f"{table}/data/b.parquet").create() as out:  # noqa: B017
        out.write(b"rows")
    assert not az.admin().get_blob_client(filesystem, "wh/db/t1/data/b.parquet").exists()


def test_a_filesystem_scope_serves_pyiceberg_on_azurite_with_the_vended_config(
    az: Azurite,
) -> None:
    """`sas-scope: filesystem` (a warehouse owning its filesystem): the access check passes
    with vending on, and PyIceberg writes and reads with exactly the vended config."""
    from pyiceberg.io import load_file_io

    filesystem = az.new_filesystem()
    profile, credential = vending_profile(
        az, filesystem, **{"key-prefix": "", "sas-scope": "filesystem"}
    )
    KIND.check_access(profile, credential)
    table = f"{profile['base-location']}/db/t1"
    vended = KIND.vend(profile, credential, table, write=True)
    assert sas_check.fields(vended.config[f"{SAS_TOKEN}{HOST}"])["sr"] == "c"
    io = load_file_io(properties=dict(vended.config), location=table)
    with io.new_output(f"{table}/data/a.parquet").create() as out:
        out.write(b"rows")
    reader = load_file_io(
        properties=dict(KIND.vend(profile, credential, table, write=False).config), location=table
    )
    assert reader.new_input(f"{table}/data/a.parquet").open().read() == b"rows"
    with pytest.raises(Exception), reader.new_output(f"{table}/data/b.parquet").create() as out:  # noqa: B017
        out.write(b"rows")


# -- the access check -----------------------------------------------------------------------


def test_access_check_passes_and_leaves_nothing_behind(az: Azurite) -> None:
    filesystem = az.new_filesystem()
    profile, credential = normalized(az.endpoint, filesystem)
    KIND.check_access(profile, credential)
    left = list(az.admin().get_container_client(filesystem).list_blobs())
    assert left == []


@pytest.mark.attack
def test_access_check_with_a_wrong_key_never_shows_it(az: Azurite) -> None:
    wrong = "A" * 20 + ACCOUNT_KEY[20:]
    profile, credential = normalized(
        az.endpoint,
        az.new_filesystem(),
        {"type": "az", "credential-type": "shared-access-key", "key": wrong},
    )
    with pytest.raises(BadRequestError) as failed:
        KIND.check_access(profile, credential)
    message = failed.value.message
    assert message.startswith("Storage validation failed: could not write abfss://")
    assert "(HTTP 403)" in message
    assert wrong not in message and ACCOUNT_KEY not in message and "sig=" not in message


def test_access_check_names_a_missing_filesystem(az: Azurite) -> None:
    profile, credential = normalized(az.endpoint, f"missing{uuid.uuid4().hex[:8]}")
    with pytest.raises(BadRequestError, match=r"ContainerNotFound \(HTTP 404\)"):
        KIND.check_access(profile, credential)


@pytest.mark.attack
def test_access_check_does_not_map_the_network() -> None:
    # A closed port and a web server that is not Azure read the same.
    profile, credential = normalized(f"http://127.0.0.1:{free_port()}/{ACCOUNT}", "lake")
    with pytest.raises(BadRequestError) as closed:
        KIND.check_access(profile, credential)
    assert closed.value.message == f"Storage validation failed: {NOT_AZURE}"

    class NotAzure(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_PUT(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotAzure)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        profile, credential = normalized(
            f"http://127.0.0.1:{server.server_address[1]}/{ACCOUNT}", "lake"
        )
        with pytest.raises(BadRequestError) as web:
            KIND.check_access(profile, credential)
        assert web.value.message == closed.value.message
    finally:
        server.shutdown()
        server.server_close()


def test_access_check_with_vending_tries_a_vended_token(az: Azurite) -> None:
    """With sas-enabled the check uses one vended token: Azurite, like a Blob storage account
    without a hierarchical namespace, refuses directory SAS, and the check says so."""
    filesystem = az.new_filesystem()
    profile, credential = vending_profile(az, filesystem)
    with pytest.raises(BadRequestError) as failed:
        KIND.check_access(profile, credential)
    message = failed.value.message
    assert "a vended SAS token was refused" in message
    assert "AuthorizationFailure (HTTP 403)" in message and HNS_HINT in message
    assert "sig=" not in message and ACCOUNT_KEY not in message
    assert list(az.admin().get_container_client(filesystem).list_blobs()) == []


# -- service principal: user delegation SAS through a stand-in Entra ID ---------------------

TENANT = str(uuid.uuid4())
CLIENT_ID = str(uuid.uuid4())
CLIENT_SECRET = "sp-secret-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def oauth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Azurite, EntraStandIn]]:
    """An HTTPS Azurite taking bearer tokens, and the authority that issues them, both with
    a self-signed certificate the SDKs trust through REQUESTS_CA_BUNDLE."""
    workdir = tmp_path_factory.mktemp("azurite-oauth")
    tls: Tls = self_signed(workdir / "tls")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("REQUESTS_CA_BUNDLE", str(tls.cert))
        with (
            EntraStandIn(tls, {CLIENT_ID: CLIENT_SECRET}) as entra,
            azurite_oauth(workdir / "data", tls) as running,
        ):
            yield running, entra


def service_principal(secret: str = CLIENT_SECRET) -> dict[str, str]:
    return {
        "type": "az",
        "credential-type": "client-credentials",
        "client-id": CLIENT_ID,
        "tenant-id": TENANT,
        "client-secret": secret,
    }


def sp_profile(
    oauth: tuple[Azurite, EntraStandIn], secret: str = CLIENT_SECRET, **extra: Any
) -> tuple[dict[str, Any], dict[str, Any], str]:
    running, entra = oauth
    filesystem = running.new_filesystem()
    profile, credential = normalized(
        running.endpoint,
        filesystem,
        service_principal(secret),
        **{"authority-host": entra.url, **extra},
    )
    return profile, credential, filesystem


def test_a_service_principal_gets_its_token_from_the_authority_host(
    oauth: tuple[Azurite, EntraStandIn],
) -> None:
    _, entra = oauth
    profile, credential, _ = sp_profile(oauth)
    seen = len(entra.seen)
    KIND.check_access(profile, credential)
    token_requests = [s for s in entra.seen[seen:] if s.method == "POST"]
    assert token_requests, "the check asked the authority host for a token"
    assert token_requests[0].path == f"/{TENANT}/oauth2/v2.0/token"
    assert token_requests[0].form["client_id"] == CLIENT_ID
    assert token_requests[0].form["grant_type"] == "client_credentials"
    assert "https://storage.azure.com/.default" in token_requests[0].form["scope"]


@pytest.mark.attack
def test_a_refused_client_secret_fails_the_check_without_showing_it(
    oauth: tuple[Azurite, EntraStandIn],
) -> None:
    wrong = "wrong-" + uuid.uuid4().hex
    profile, credential, _ = sp_profile(oauth, wrong)
    with pytest.raises(BadRequestError) as failed:
        KIND.check_access(profile, credential)
    assert failed.value.message.endswith(NO_TOKEN)
    assert wrong not in failed.value.message and CLIENT_SECRET not in failed.value.message


def test_user_delegation_sas_is_signed_with_the_services_key(
    oauth: tuple[Azurite, EntraStandIn],
) -> None:
    """The vended token carries the user delegation key Azurite issued to the principal
    (its object and tenant ids, validity, service) and its signature, recomputed with that
    key by the independent checker, binds the table folder."""
    _running, entra = oauth
    profile, credential, filesystem = sp_profile(
        oauth, CLIENT_SECRET, **{"sas-token-validity-seconds": 600}
    )
    profile["sas-enabled"] = True
    table = f"{profile['base-location']}/db/t1"
    vended = KIND.vend(profile, credential, table, write=True)
    f = sas_check.fields(vended.config[f"{SAS_TOKEN}{HOST}"])
    assert (f["sr"], f["sdd"], f["sp"]) == ("d", "3", "racwdl")
    assert f["skoid"] == entra.object_id and f["sktid"] == TENANT and f["sks"] == "b"
    assert f["ske"] == f["se"]  # the token cannot outlive its key

    # Azurite derives a key's value from its fields: asking again for the same validity
    # returns the value the token was signed with.
    key = service_client(profile, credential).get_user_delegation_key(
        dt.datetime.strptime(f["skt"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC),
        dt.datetime.strptime(f["ske"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC),
    )
    for name, expected in (("wh/db/t1", True), ("wh/db/t10", False), ("wh", False)):
        resource = sas_check.canonical_resource(ACCOUNT, filesystem, name)
        assert key.value is not None
        signed = sas_check.signature(f, resource, key.value, delegation=True)
        assert (signed == f["sig"]) is expected, name


def test_the_checker_signs_user_delegation_sas_as_azurite_does(
    oauth: tuple[Azurite, EntraStandIn],
) -> None:
    """The checker's user-delegation layout, validated by Azurite for the newest version it
    knows (2025-07-05; the vended tokens use a later one, whose layout adds two empty lines)."""
    profile, credential, filesystem = sp_profile(oauth)
    admin = service_client(profile, credential)
    admin.get_blob_client(filesystem, "wh/db/t1/a").upload_blob(b"A")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    key = admin.get_user_delegation_key(now - dt.timedelta(minutes=1), now + dt.timedelta(hours=1))
    assert key.value is not None
    f: dict[str, str] = {
        "sp": "r",
        "st": str(key.signed_start),
        "se": str(key.signed_expiry),
        "skoid": str(key.signed_oid),
        "sktid": str(key.signed_tid),
        "skt": str(key.signed_start),
        "ske": str(key.signed_expiry),
        "sks": str(key.signed_service),
        "skv": str(key.signed_version),
        "sv": "2025-07-05",
        "sr": "b",
    }
    resource = sas_check.canonical_resource(ACCOUNT, filesystem, "wh/db/t1/a")
    f["sig"] = sas_check.signature(f, resource, key.value, delegation=True)
    from urllib.parse import urlencode

    running, _ = oauth
    blob = BlobClient(running.endpoint, filesystem, "wh/db/t1/a", credential=urlencode(f))
    assert blob.download_blob().readall() == b"A"


def test_vending_with_a_service_principal_and_sas_check(
    oauth: tuple[Azurite, EntraStandIn],
) -> None:
    """The whole check with vending: the delegation key is obtained (the principal may ask
    for one), and the token's use is refused by Azurite for want of a hierarchical namespace."""
    profile, credential, _ = sp_profile(oauth, CLIENT_SECRET, **{"sas-enabled": True})
    with pytest.raises(BadRequestError) as failed:
        KIND.check_access(profile, credential)
    assert "a vended SAS token was refused" in failed.value.message
    assert CLIENT_SECRET not in failed.value.message


# -- secrets ------------------------------------------------------------------------------


@pytest.mark.attack
def test_no_secret_in_any_repr(az: Azurite) -> None:
    profile, credential = vending_profile(az, az.new_filesystem())
    vended = KIND.vend(profile, credential, f"{profile['base-location']}/db/t", write=True)
    token = vended.config[f"{SAS_TOKEN}{HOST}"]
    io = KIND.file_io(profile, credential, StorageLimits())
    for thing in (vended, io, KIND):
        text = repr(thing)
        assert ACCOUNT_KEY not in text and token not in text and "sig=" not in text
    with pytest.raises(ServiceUnavailableError) as failed:
        AdlsFileIO(
            BlobServiceClient(f"http://127.0.0.1:{free_port()}/{ACCOUNT}?{token}", retry_total=0),
            Location.parse(profile["base-location"]),
        ).read(f"{profile['base-location']}/db/t/x")
    assert "sig=" not in failed.value.message and token not in failed.value.message

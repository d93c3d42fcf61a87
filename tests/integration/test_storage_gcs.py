"""The GCS storage kind against fake-gcs-server, with a local token endpoint and STS.

What the emulator proves: the JSON API calls (multipart insert with `ifGenerationMatch=0`,
ranged reads, listings, deletes), containment before any request, bounds, the access
check, and that PyIceberg's FileIO reaches the store with exactly the config `vend`
returns. What it cannot: fake-gcs-server checks no token and no access boundary, so the
boundaries are asserted as icelog sent them to STS (`FakeGoogleAuth` keeps every exchange),
not as Google would enforce them.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from icelog.commands.storage.gcs import KIND
from icelog.commands.storage.gcs.auth import HttpxRequest, ServiceAccountTokens, shared_client
from icelog.commands.storage.gcs.boundary import READ_ROLE, WRITE_ROLE
from icelog.commands.storage.gcs.fileio import GcsFileIO, GcsStorageError
from icelog.commands.storage.gcs.vending import GcsVendor
from icelog.commands.storage.kind import StorageLimits
from icelog.commands.storage.policy import StoragePolicy
from icelog.domain.errors import BadRequestError, ConflictError
from icelog.domain.locations import Location
from icelog.domain.ports import OutsideStorageError, UnreadableFileError
from tests.support.cel_conditions import allows, clauses
from tests.support.gcs_server import (
    PROJECT_ID,
    FakeGoogleAuth,
    ServiceKey,
    fake_gcs,
    fake_google_auth,
    make_bucket,
    new_key,
    object_names,
    pem_body,
    put_object,
    recording_proxy,
)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fake_gcs(tmp_path_factory.mktemp("gcs") / "fake-gcs.log") as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def auth_server() -> Iterator[FakeGoogleAuth]:
    with fake_google_auth() as auth:
        yield auth


@pytest.fixture
def auth(auth_server: FakeGoogleAuth) -> FakeGoogleAuth:
    auth_server.reset()
    return auth_server


@pytest.fixture(scope="module")
def key(auth_server: FakeGoogleAuth) -> ServiceKey:
    return auth_server.register(new_key(auth_server.token_uri))


@pytest.fixture
def bucket(emulator: str) -> str:
    """A bucket of the test's own."""
    name = f"icelog-{uuid.uuid4().hex[:20]}"
    make_bucket(emulator, name)
    return name


def setup(
    endpoint: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str, **fields: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(profile, sealed credential) as the management API would store them."""
    profile, sealed = KIND.normalize(
        {
            "type": "gcs",
            "bucket": bucket,
            "key-prefix": "wh",
            "endpoint": endpoint,
            "sts-endpoint": auth.sts_endpoint,
            **fields,
        },
        key.credential(),
        StoragePolicy(),
    )
    assert sealed is not None
    return profile, sealed


def file_io(
    endpoint: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str, **limits: Any
) -> GcsFileIO:
    profile, sealed = setup(endpoint, auth, key, bucket)
    io = KIND.file_io(profile, sealed, StorageLimits(**limits))
    assert isinstance(io, GcsFileIO)
    return io


# -- FileIO ------------------------------------------------------------------------------------
def test_write_read_exists_delete(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    io = file_io(emulator, auth, key, bucket)
    location = f"gs://{bucket}/wh/db/t/metadata/00000-a.metadata.json"
    assert not io.exists(location)
    io.write_new(location, b'{"format-version": 2}')
    assert io.exists(location)
    assert io.read(location) == b'{"format-version": 2}'
    with pytest.raises(ConflictError):
        io.write_new(location, b"{}")  # the emulator enforced ifGenerationMatch=0
    assert io.read(location) == b'{"format-version": 2}'  # never overwritten
    assert io.delete(location) is True
    assert io.delete(location) is False
    assert not io.exists(location)
    with pytest.raises(FileNotFoundError):
        io.read(location)
    assert object_names(emulator, bucket) == []


def test_an_object_someone_else_wrote_is_never_replaced(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    put_object(emulator, bucket, "wh/db/t/metadata/v1.metadata.json", b"theirs")
    io = file_io(emulator, auth, key, bucket)
    with pytest.raises(ConflictError):
        io.write_new(f"gs://{bucket}/wh/db/t/metadata/v1.metadata.json", b"ours")
    assert io.read(f"gs://{bucket}/wh/db/t/metadata/v1.metadata.json") == b"theirs"


def test_object_names_are_kept_as_written(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    io = file_io(emulator, auth, key, bucket)
    # A partition value's '/' is written by Iceberg as %2F: one object, literally so named.
    location = f"gs://{bucket}/wh/db/t/data/p=a%2Fb/ünï code +x.parquet"
    io.write_new(location, b"x")
    assert object_names(emulator, bucket) == ["wh/db/t/data/p=a%2Fb/ünï code +x.parquet"]
    assert io.read(location) == b"x"
    assert io.delete(location)


def test_holds_files_looks_below_the_folder_only(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    io = file_io(emulator, auth, key, bucket)
    put_object(emulator, bucket, "wh/db/t10/data/a.parquet", b"x")
    put_object(emulator, bucket, "wh/db/t1", b"an object named like the folder")
    assert io.holds_files(f"gs://{bucket}/wh/db/t10")
    assert io.holds_files(f"gs://{bucket}/wh/db")
    assert not io.holds_files(f"gs://{bucket}/wh/db/t1")
    put_object(emulator, bucket, "wh/db/t1/deep/er/file", b"x")
    assert io.holds_files(f"gs://{bucket}/wh/db/t1")


def test_the_warehouse_root_holds_files_by_definition(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    with recording_proxy(emulator) as proxy:
        assert file_io(proxy.url, auth, key, bucket).holds_files(f"gs://{bucket}/wh")
    assert proxy.seen == []


def test_holds_files_is_one_listing_of_at_most_one_object(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    for n in range(5):
        put_object(emulator, bucket, f"wh/db/t/data/{n}", b"x")
    with recording_proxy(emulator) as proxy:
        io = file_io(proxy.url, auth, key, bucket)
        assert io.holds_files(f"gs://{bucket}/wh/db/t")
    ((method, path, _),) = proxy.seen
    assert method == "GET"
    assert "maxResults=1" in path and "prefix=wh%2Fdb%2Ft%2F" in path


def test_reads_are_bounded_in_size(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    io = file_io(emulator, auth, key, bucket, max_read_bytes=100)
    put_object(emulator, bucket, "wh/exact", b"x" * 100)
    put_object(emulator, bucket, "wh/over", b"x" * 101)
    put_object(emulator, bucket, "wh/huge", b"x" * (1 << 20))
    put_object(emulator, bucket, "wh/empty", b"")
    assert io.read(f"gs://{bucket}/wh/exact") == b"x" * 100
    for name in ("over", "huge"):
        with pytest.raises(UnreadableFileError) as raised:
            io.read(f"gs://{bucket}/wh/{name}")
        assert raised.value.reason == "larger than 100 bytes"
    assert io.read(f"gs://{bucket}/wh/empty") == b""


@pytest.fixture
def dripping_store() -> Iterator[str]:
    """An endpoint that answers every read with a byte every 0.1 s, for ever (almost)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                for _ in range(600):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.attack
def test_a_store_that_drips_bytes_is_cut_off_at_the_deadline(
    dripping_store: str, auth: FakeGoogleAuth, key: ServiceKey
) -> None:
    io = file_io(dripping_store, auth, key, "lake", read_timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(UnreadableFileError) as raised:
        io.read("gs://lake/wh/db/t/metadata/v1.metadata.json")
    assert raised.value.reason == "not read within 1 s"
    assert time.monotonic() - started < 2.5


@pytest.mark.attack
def test_metadata_calls_to_a_dripping_store_end_too(
    dripping_store: str, auth: FakeGoogleAuth, key: ServiceKey
) -> None:
    io = file_io(dripping_store, auth, key, "lake", read_timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(GcsStorageError) as raised:
        io.exists("gs://lake/wh/db/t/metadata/v1.metadata.json")
    assert raised.value.reason == "no GCS service answered at the endpoint"
    assert time.monotonic() - started < 4  # three attempts of 0.5 s, and two pauses


OUTSIDE = [
    "gs://{bucket}/wh",  # the warehouse itself is no object
    "gs://{bucket}/wharf/x",  # a sibling that only starts like the warehouse
    "gs://{bucket}/other/wh/x",
    "gs://{bucket}-other/wh/x",
    "gs://other-bucket/wh/x",
    "s3://{bucket}/wh/x",
    "file:///etc/passwd",
    "gs://{bucket}/wh/../x",
    "gs://{bucket}/wh/%2e%2e/x",
    "gs://{bucket}/wh/a%2F..%2F..%2Fx",
]


@pytest.mark.attack
def test_locations_outside_the_warehouse_are_refused_before_any_request(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    with recording_proxy(emulator) as proxy:
        io = file_io(proxy.url, auth, key, bucket)
        for location in OUTSIDE:
            target = location.format(bucket=bucket)
            calls: list[tuple[Callable[..., object], tuple[object, ...]]] = [
                (io.read, (target,)),
                (io.write_new, (target, b"x")),
                (io.exists, (target,)),
                (io.delete, (target,)),
            ]
            if target != f"gs://{bucket}/wh":
                calls.append((io.holds_files, (target,)))
            for call, arguments in calls:
                with pytest.raises(BadRequestError) as raised:
                    call(*arguments)
                refusal = raised.value
                assert isinstance(refusal, OutsideStorageError) or "Invalid" in refusal.message
    assert proxy.seen == []
    assert object_names(emulator, bucket) == []


def test_a_refusing_store_is_a_503_naming_the_object_and_the_reason(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey
) -> None:
    io = file_io(emulator, auth, key, "no-such-bucket-here")
    with pytest.raises(GcsStorageError) as raised:
        io.write_new("gs://no-such-bucket-here/wh/x", b"x")
    assert raised.value.status == 503
    assert raised.value.message == (
        "Storage error: could not write gs://no-such-bucket-here/wh/x: Not Found (HTTP 404)"
    )


def test_an_unreachable_store_says_so_in_one_phrase(auth: FakeGoogleAuth, key: ServiceKey) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{unused.getsockname()[1]}"
    io = file_io(closed, auth, key, "lake")
    with pytest.raises(GcsStorageError) as raised:
        io.exists("gs://lake/wh/x")
    assert raised.value.reason == "no GCS service answered at the endpoint"


# -- the catalog's own token -------------------------------------------------------------------
def test_the_catalogs_token_is_renewed_after_half_its_lifetime(
    auth: FakeGoogleAuth, key: ServiceKey
) -> None:
    now = [time.time()]
    tokens = ServiceAccountTokens(key.info, HttpxRequest(shared_client()), clock=lambda: now[0])
    first = tokens.get()
    assert first.value.startswith("catalog-token-")
    now[0] += 1790  # the endpoint said 3599 s: fresh until 1799.5 s
    assert tokens.get() == first
    assert auth.grants == 1
    now[0] += 12
    assert tokens.get().value != first.value
    assert auth.grants == 2
    assert first.value not in repr(tokens) and pem_body(key) not in repr(tokens)
    assert first.value not in repr(first)


# -- vending -----------------------------------------------------------------------------------
def _rule(auth: FakeGoogleAuth, index: int = -1) -> dict[str, Any]:
    (rule,) = auth.exchanges[index].rules
    return rule


def test_a_read_token_is_bounded_to_viewing_the_tables_prefix(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    profile, sealed = setup(emulator, auth, key, bucket)
    vended = KIND.vend(profile, sealed, f"gs://{bucket}/wh/db/t1", write=False)
    assert vended.config["gcs.oauth2.token"] == "downscoped-1"
    assert vended.config["gcs.project-id"] == PROJECT_ID
    assert vended.config["gcs.service.host"] == emulator
    expires_at = int(vended.config["gcs.oauth2.token-expires-at"])
    assert expires_at == vended.expires_at_ms
    assert 3500_000 < expires_at - time.time() * 1000 <= 3600_000
    (exchange,) = auth.exchanges
    assert exchange.form["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange"
    assert exchange.form["subject_token"].startswith("catalog-token-")  # the catalog's own
    rule = _rule(auth)
    assert rule["availablePermissions"] == [READ_ROLE]
    assert rule["availableResource"] == f"//storage.googleapis.com/projects/_/buckets/{bucket}"
    assert clauses(rule["availabilityCondition"]["expression"]) == [
        ("name", f"projects/_/buckets/{bucket}/objects/wh/db/t1/"),
        ("name", f"projects/_/buckets/{bucket}/folders/wh/db/t1/"),
        ("list", "wh/db/t1/"),
    ]


def test_a_write_token_may_change_objects_of_the_table_only(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    profile, sealed = setup(emulator, auth, key, bucket)
    KIND.vend(profile, sealed, f"gs://{bucket}/wh/db/t1", write=True)
    rule = _rule(auth)
    assert rule["availablePermissions"] == [WRITE_ROLE]
    boundary = auth.exchanges[-1].boundary
    assert allows(boundary, name="wh/db/t1/data/00000-0.parquet")
    assert not allows(boundary, name="wh/db/t2/data/00000-0.parquet")


@pytest.mark.attack
def test_table_t1s_token_never_covers_t10(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    profile, sealed = setup(emulator, auth, key, bucket)
    KIND.vend(profile, sealed, f"gs://{bucket}/wh/db/t1", write=True)
    KIND.vend(profile, sealed, f"gs://{bucket}/wh/db/t10", write=True)
    t1, t10 = auth.exchanges[0].boundary, auth.exchanges[1].boundary
    assert allows(t1, name="wh/db/t1/metadata/v1.metadata.json")
    assert not allows(t1, name="wh/db/t10/metadata/v1.metadata.json")
    assert not allows(t1, list_prefix="wh/db/t1")  # a listing that would name t10's files
    assert allows(t10, name="wh/db/t10/metadata/v1.metadata.json")
    assert not allows(t10, name="wh/db/t1/metadata/v1.metadata.json")


@pytest.mark.attack
@pytest.mark.parametrize(
    "table",
    ["it's", "x') || true || resource.name.startsWith('", "x\\y"],
)
def test_a_hostile_table_name_gets_no_token(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str, table: str
) -> None:
    profile, sealed = setup(emulator, auth, key, bucket)
    with pytest.raises(BadRequestError):
        KIND.vend(profile, sealed, f"gs://{bucket}/wh/db/{table}", write=True)
    assert auth.exchanges == []


def test_calling_again_reuses_the_token_until_half_its_life_then_renews_it(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    profile, sealed = setup(emulator, auth, key, bucket)
    location = f"gs://{bucket}/wh/db/t1"
    first = KIND.vend(profile, sealed, location, write=False)
    assert KIND.vend(profile, sealed, location, write=False).config == first.config
    assert len(auth.exchanges) == 1

    now = [time.time()]
    vendor = GcsVendor(clock=lambda: now[0])
    config = KIND.client_config(profile)
    a = vendor.vend(profile, sealed, location, write=False, client_config=config)
    now[0] += 3599 / 2 + 1
    b = vendor.vend(profile, sealed, location, write=False, client_config=config)
    assert a.config["gcs.oauth2.token"] != b.config["gcs.oauth2.token"]
    assert len(auth.exchanges) == 3


def test_an_sts_answer_without_a_lifetime_lasts_as_long_as_the_catalogs_token(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    auth.sts_expires_in = None
    profile, sealed = setup(emulator, auth, key, bucket)
    vended = KIND.vend(profile, sealed, f"gs://{bucket}/wh/db/t-silent", write=False)
    assert 0 < vended.expires_at_ms - time.time() * 1000 <= 3599_000


def test_pyiceberg_reaches_the_store_with_exactly_the_vended_config(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    """PyIceberg 0.12 picks PyArrow's GcsFileSystem for gs:// (its only FileIO for the
    scheme); it reads gcs.oauth2.token, gcs.oauth2.token-expires-at and gcs.service.host.
    The proxy in front of the emulator shows which token it sent."""
    from pyiceberg.io import load_file_io

    with recording_proxy(emulator) as proxy:
        profile, sealed = setup(proxy.url, auth, key, bucket)
        table = f"gs://{bucket}/wh/db/events"
        vended = KIND.vend(profile, sealed, table, write=True)
        io = load_file_io(properties=dict(vended.config), location=table)
        assert type(io).__name__ == "PyArrowFileIO"
        with io.new_output(f"{table}/data/00000-0.parquet").create() as out:
            out.write(b"written by pyiceberg")
        with io.new_input(f"{table}/data/00000-0.parquet").open() as stream:
            assert stream.read() == b"written by pyiceberg"
        io.delete(f"{table}/data/00000-0.parquet")
    assert object_names(emulator, bucket) == []
    assert proxy.seen, "PyArrow went through the proxy named by gcs.service.host"
    token = vended.config["gcs.oauth2.token"]
    assert {authorization for _, _, authorization in proxy.seen} == {f"Bearer {token}"}


# -- the access check --------------------------------------------------------------------------
def test_the_access_check_passes_and_leaves_nothing_behind(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    profile, sealed = setup(emulator, auth, key, bucket)
    KIND.check_access(profile, sealed)
    assert object_names(emulator, bucket) == []
    (exchange,) = auth.exchanges  # vending tried once, uncached
    assert exchange.rules[0]["availablePermissions"] == [WRITE_ROLE]
    assert clauses(exchange.rules[0]["availabilityCondition"]["expression"])[-1] == (
        "list",
        "wh/.icelog-probe/",
    )
    KIND.check_access(profile, sealed)
    assert len(auth.exchanges) == 2


def test_without_vending_the_check_makes_no_exchange(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    profile, sealed = setup(emulator, auth, key, bucket, **{"sts-enabled": False})
    KIND.check_access(profile, sealed)
    assert auth.exchanges == []


def _check_fails(profile: dict[str, Any], sealed: dict[str, Any]) -> str:
    with pytest.raises(BadRequestError) as raised:
        KIND.check_access(profile, sealed)
    return raised.value.message


@pytest.mark.attack
def test_a_key_the_token_endpoint_refuses_fails_the_check_without_key_material(
    emulator: str, auth: FakeGoogleAuth, bucket: str
) -> None:
    stranger = new_key(auth.token_uri, email="stranger@icelog-test-project.iam.gserviceaccount.com")
    profile, sealed = setup(emulator, auth, stranger, bucket)
    message = _check_fails(profile, sealed)
    assert message == (
        "Storage validation failed: could not get an access token for the service account: "
        "the token endpoint refused the service-account key (invalid_grant)"
    )
    # The endpoint's description quoted the assertion; none of it, nor the key, shows.
    assert "JWT" not in message and pem_body(stranger) not in message
    assert object_names(emulator, bucket) == []


def test_a_token_uri_that_is_not_an_oauth_endpoint(
    emulator: str, auth: FakeGoogleAuth, bucket: str
) -> None:
    lost = new_key(f"{emulator}/token")  # fake-gcs-server answers, but no OAuth
    profile, sealed = setup(emulator, auth, lost, bucket)
    assert _check_fails(profile, sealed) == (
        "Storage validation failed: could not get an access token for the service account: "
        "no OAuth token endpoint answered at the key's token_uri"
    )


def test_a_missing_bucket_fails_the_check_at_the_write(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey
) -> None:
    profile, sealed = setup(emulator, auth, key, "no-such-bucket-here")
    message = _check_fails(profile, sealed)
    assert message.startswith(
        "Storage validation failed: could not write gs://no-such-bucket-here/wh/.icelog-probe-"
    )
    assert message.endswith(": Not Found (HTTP 404)")


@pytest.mark.attack
def test_the_check_does_not_tell_a_web_server_from_a_closed_port(
    auth: FakeGoogleAuth, key: ServiceKey
) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{unused.getsockname()[1]}"
    for endpoint in (auth.url, closed):  # a web server that is not GCS; nothing at all
        profile, sealed = setup(endpoint, auth, key, "lake")
        assert _check_fails(profile, sealed) == (
            "Storage validation failed: no GCS service answered at the endpoint"
        )


def test_an_sts_that_refuses_fails_the_check_with_its_code(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    auth.sts_status = 400
    auth.sts_body = b'{"error": "invalid_request", "error_description": "catalog-token-1 bad"}'
    profile, sealed = setup(emulator, auth, key, bucket)
    message = _check_fails(profile, sealed)
    assert message == (
        "Storage validation failed: the token exchange (STS) refused the request (invalid_request)"
    )
    auth.sts_status, auth.sts_body = 502, b"<html>bad gateway</html>"
    assert _check_fails(profile, sealed) == (
        "Storage validation failed: no token exchange (STS) service answered at the sts-endpoint"
    )
    assert object_names(emulator, bucket) == []  # the probe object went before STS was tried


@pytest.mark.attack
def test_no_secret_in_any_repr_or_message(
    emulator: str, auth: FakeGoogleAuth, key: ServiceKey, bucket: str
) -> None:
    profile, sealed = setup(emulator, auth, key, bucket)
    io = KIND.file_io(profile, sealed, StorageLimits())
    vended = KIND.vend(profile, sealed, f"gs://{bucket}/wh/db/t", write=True)
    token = vended.config["gcs.oauth2.token"]
    texts = [
        repr(KIND),
        repr(io),
        repr(vended),
        str(vended),
        repr(Location.parse(profile["base-location"])),
    ]
    with pytest.raises(GcsStorageError) as raised:
        KIND.file_io(
            {**profile, "bucket": "x-missing", "base-location": "gs://x-missing"},
            sealed,
            StorageLimits(),
        ).write_new("gs://x-missing/y", b"x")
    texts.append(str(raised.value))
    for text in texts:
        assert pem_body(key) not in text
        assert key.info["private_key_id"] not in text
        assert token not in text
        assert "catalog-token" not in text
    assert all(pem_body(key) not in str(value) for value in profile.values())

"""Support for the containment suite of hostile inputs: tests/integration/test_containment_*.py
and tests/e2e/test_containment_crash.py.

- `World`: an "outside world" of sentinel files next to (outside) the warehouses. Names,
  contents, sizes, inodes and mtimes are recorded, and every sentinel's atime is set to
  1970: on a `relatime` mount any read moves it (the constructor proves the machine can see
  that, or fails loudly). `World.problems()` lists every file created, changed, read or
  deleted outside the directories the test allowed (the warehouses), and every protected
  file (another table's, inside a warehouse) that was touched.
- `S3World`: the same for objects: a sentinel bucket in the same moto server and the keys
  of the warehouse bucket outside the warehouse prefixes (reads cannot be seen on S3).
- `catalog()`: the in-process catalog (Starlette TestClient over `Services`) on SQLite or
  PostgreSQL with extra settings; `Api` from tests/integration/conftest.py.
- `assert_error()`: the Iceberg error shape `{"error": {"message", "type", "code"}}`, never 5xx.
- `log_problems()`: what `icelog audit verify` (after a chaining round, as `serve` does),
  `icelog projections verify` and `icelog metadata verify` would report, in-process.
- builders of hostile metadata: snapshots, statistics, Avro manifest lists and manifests.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import fastavro
import pytest
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.audit import Chainer, recorded_heads
from icelog.api.services import Services
from icelog.projections import maintenance
from icelog.projections.audit_chain import AuditChain
from tests.integration.conftest import Api, make_settings
from tests.support import postgres
from tests.support.in_process import default_prefix
from tests.support.moto_server import admin_user, moto_s3
from tests.support.moto_server import client as moto_client

ROOT = "/management/v1"
MIB = 1024 * 1024
EPOCH_NS = 0  # sentinel atimes: 1970-01-01

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


# -- the Iceberg error shape -------------------------------------------------------------------
def assert_error(response: Any, status: int | Iterable[int], error_type: str | None = None) -> str:
    """The expected status in the Iceberg error shape; its message. A 5xx only where it is
    the expected status (a timeout's 503/504)."""
    statuses = {status} if isinstance(status, int) else set(status)
    if response.status_code not in statuses:
        assert response.status_code < 500, f"5xx: {response.status_code} {response.text[:2000]}"
    assert response.status_code in statuses, (
        f"expected {sorted(statuses)}, got {response.status_code}: {response.text[:2000]}"
    )
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert {"message", "type", "code"} <= set(error), error
    assert error["code"] == response.status_code, error
    assert isinstance(error["message"], str) and error["message"], error
    assert isinstance(error["type"], str) and error["type"], error
    if error_type is not None:
        assert error["type"] == error_type, error
    return str(error["message"])


def error_type_of(response: Any) -> str:
    return str(response.json()["error"]["type"])


# -- files ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileState:
    kind: str  # "file", "dir", "link", "other"
    size: int
    mtime_ns: int
    ino: int
    digest: str = ""  # files only
    target: str = ""  # links only

    @staticmethod
    def of(path: Path, *, content: bool) -> FileState:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            return FileState("link", 0, info.st_mtime_ns, info.st_ino, target=os.readlink(path))
        if stat.S_ISDIR(info.st_mode):
            return FileState("dir", 0, 0, info.st_ino)
        if not stat.S_ISREG(info.st_mode):
            return FileState("other", 0, info.st_mtime_ns, info.st_ino)
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if content else ""
        return FileState("file", info.st_size, info.st_mtime_ns, info.st_ino, digest)


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


# The database files in a catalog's data directory change with every request.
_DATABASE_FILE = re.compile(r"^(catalog\.db(-wal|-shm|-journal)?|secrets\.key|server\.log.*)$")


class World:
    """Sentinel files outside the warehouses, and a watch on everything below `base`.

    `base` is a directory that holds the catalog's data directory and warehouses (two levels
    down, so that `<warehouse>/../../x` is `base/x`) and the sentinel tree `base/outside`.
    The names directly in `base.parent` are watched too (`<warehouse>/../../../x`)."""

    def __init__(self, base: Path) -> None:
        self.base = base.resolve()
        self.outside = self.base / "outside"
        self._allowed: list[Path] = []
        self._ignored: list[Callable[[Path], bool]] = [
            lambda p: _DATABASE_FILE.match(p.name) is not None and p.parent != self.outside
        ]
        self._protected: dict[Path, FileState] = {}
        self._sentinels: dict[Path, FileState] = {}
        self._listing: dict[Path, FileState] = {}
        self._parent_names: set[str] = set()
        self._build()
        self.check_reads_are_visible()
        self.arm()

    # -- the tree ---------------------------------------------------------------------------
    def _build(self) -> None:
        files = {
            "secret.txt": b"outside the warehouse: never read, written or deleted\n",
            "etc/passwd": b"root:x:0:0:root:/root:/bin/bash\n",
            "stats/other.puffin": b"PFA1" + b"\0" * 60,
            "lists/snap-1-outside.avro": b"Obj\x01 not really avro",
            "data/part-00000.parquet": b"PAR1" + b"\0" * 100 + b"PAR1",
            "deep/a/b/c/file.bin": os.urandom(64),
            # A valid-looking metadata document: a link to it inside a warehouse must not
            # make it registrable (tests/integration/test_containment_reads.py).
            "metadata/00001-outside.metadata.json": b'{"format-version": 2}',
        }
        for name, data in files.items():
            path = self.outside / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        for path in sorted(self.outside.rglob("*")):
            if path.is_file():
                self._sentinels[path] = FileState.of(path, content=True)

    def sentinel(self, name: str) -> Path:
        path = self.outside / name
        assert path in self._sentinels, f"not a sentinel: {name}"
        return path

    def write_sentinel(self, name: str, data: bytes) -> Path:
        """Another sentinel file (e.g. a valid metadata document), recorded from now on."""
        path = self.outside / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self._sentinels[path] = FileState.of(path, content=True)
        self.arm()
        return path

    @property
    def sentinels(self) -> list[Path]:
        return sorted(self._sentinels)

    def check_reads_are_visible(self) -> None:
        """Fail loudly unless reading a file moves its atime on this machine."""
        probe = self.base / ".atime-probe"
        probe.write_bytes(b"probe")
        mtime = os.stat(probe).st_mtime_ns
        os.utime(probe, ns=(EPOCH_NS, mtime))
        assert os.stat(probe).st_atime_ns == EPOCH_NS
        with probe.open("rb") as handle:
            handle.read()
        moved = os.stat(probe).st_atime_ns != EPOCH_NS
        probe.unlink()
        if not moved:
            pytest.fail(
                f"reading a file under {self.base} does not move its atime (noatime mount?): "
                "this machine cannot detect reads of the sentinel files",
                pytrace=False,
            )

    # -- what may change --------------------------------------------------------------------
    def allow(self, *directories: Path) -> None:
        """Directories the catalog may write (warehouses): not watched, except protected files."""
        for directory in directories:
            resolved = Path(os.path.realpath(directory))
            if resolved not in self._allowed:
                self._allowed.append(resolved)
        self.arm()

    def ignore(self, predicate: Callable[[Path], bool]) -> None:
        self._ignored.append(predicate)

    def protect(self, *paths: Path) -> None:
        """Files inside a warehouse that belong to someone else (another table): they must
        survive unchanged and unread."""
        for path in paths:
            self._protected[path] = FileState.of(path, content=True)
        self.arm()

    def unprotect(self, *paths: Path) -> None:
        for path in paths:
            self._protected.pop(path, None)

    def _allowed_path(self, path: Path) -> bool:
        if path in self._protected or path in self._sentinels:
            return False
        if any(_inside(path, d) for d in self._allowed):
            return True
        return any(ignored(path) for ignored in self._ignored)

    # -- snapshots --------------------------------------------------------------------------
    def arm(self) -> None:
        """Start watching from now: atimes back to 1970, the listing recorded."""
        for path in (*self._sentinels, *self._protected):
            if path.exists():
                os.utime(path, ns=(EPOCH_NS, os.stat(path).st_mtime_ns), follow_symlinks=False)
        self._listing = self._list()
        self._parent_names = set(os.listdir(self.base.parent))

    def _list(self) -> dict[Path, FileState]:
        found: dict[Path, FileState] = {}
        for directory, dirs, files in os.walk(self.base):
            here = Path(directory)
            kept = []
            for name in dirs:
                path = here / name
                if any(_inside(path, d) for d in self._allowed) and not any(
                    _inside(p, path) for p in self._protected
                ):
                    continue
                kept.append(name)
            dirs[:] = kept
            for name in (*dirs, *files):
                path = here / name
                if not self._allowed_path(path):
                    found[path] = FileState.of(path, content=False)
        return found

    def problems(self) -> list[str]:
        found: list[str] = []
        now = self._list()
        for path in sorted(set(now) - set(self._listing)):
            found.append(f"created outside the warehouse: {path} ({now[path].kind})")
        for path in sorted(set(self._listing) - set(now)):
            found.append(f"deleted outside the warehouse: {path}")
        for path, before in sorted(self._listing.items()):
            after = now.get(path)
            if after is None or before.kind == "dir":
                continue
            if (after.kind, after.size, after.mtime_ns, after.ino, after.target) != (
                before.kind,
                before.size,
                before.mtime_ns,
                before.ino,
                before.target,
            ):
                found.append(f"changed outside the warehouse: {path}")
        new_names = set(os.listdir(self.base.parent)) - self._parent_names
        for name in sorted(new_names):
            found.append(f"created next to the test directory: {self.base.parent / name}")
        for kind, watched in (("sentinel", self._sentinels), ("protected", self._protected)):
            for path, before in sorted(watched.items()):
                if not os.path.lexists(path):
                    found.append(f"{kind} file deleted: {path}")
                    continue
                info = os.lstat(path)
                if info.st_atime_ns != EPOCH_NS:
                    found.append(f"{kind} file read: {path}")
                after = FileState.of(path, content=True)
                if after != before:
                    found.append(f"{kind} file changed: {path}")
                # Reading it to compare moved its atime: back to 1970.
                os.utime(path, ns=(EPOCH_NS, info.st_mtime_ns), follow_symlinks=False)
        return found

    def assert_untouched(self) -> None:
        problems = self.problems()
        assert problems == [], "\n".join(problems)


# -- S3 ---------------------------------------------------------------------------------------
@dataclass
class S3World:
    """A sentinel bucket in the same moto server, and the keys of warehouse buckets outside
    the prefixes the test allows. Every object's ETag and LastModified are recorded."""

    client: Any
    sentinel_bucket: str
    watched: dict[str, tuple[str, ...]] = field(default_factory=dict)  # bucket -> allowed
    _objects: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    _buckets: set[str] = field(default_factory=set)

    SENTINELS = (
        "secret.txt",
        "stats/other.puffin",
        "lists/snap-1-outside.avro",
        "data/part-00000.parquet",
        "wh/db/t/metadata/00001-x.metadata.json",  # the same key as inside a warehouse
    )

    def __post_init__(self) -> None:
        self.client.create_bucket(Bucket=self.sentinel_bucket)
        for key in self.SENTINELS:
            self.client.put_object(Bucket=self.sentinel_bucket, Key=key, Body=key.encode())
        self.watched[self.sentinel_bucket] = ()
        self.arm()

    def location(self, key: str) -> str:
        return f"s3://{self.sentinel_bucket}/{key}"

    def watch(self, bucket: str, *allowed_prefixes: str) -> None:
        """Keys of `bucket` outside `allowed_prefixes` (whole segments) must not change."""
        self.watched[bucket] = tuple(p.strip("/") for p in allowed_prefixes)
        self.arm()

    def put(self, bucket: str, key: str, data: bytes = b"x") -> str:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)
        self.arm()
        return f"s3://{bucket}/{key}"

    def _list(self) -> dict[tuple[str, str], tuple[str, str]]:
        found: dict[tuple[str, str], tuple[str, str]] = {}
        for bucket, allowed in self.watched.items():
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=bucket):
                for item in page.get("Contents", []):
                    key = item["Key"]
                    if any(key == p or key.startswith(p + "/") for p in allowed):
                        continue
                    found[(bucket, key)] = (str(item["ETag"]), str(item["LastModified"]))
        return found

    def arm(self) -> None:
        self._objects = self._list()
        self._buckets = {b["Name"] for b in self.client.list_buckets()["Buckets"]}

    def problems(self) -> list[str]:
        now = self._list()
        found = [
            f"object created outside: s3://{b}/{k}"
            for b, k in sorted(set(now) - set(self._objects))
        ]
        found += [
            f"object deleted outside: s3://{b}/{k}"
            for b, k in sorted(set(self._objects) - set(now))
        ]
        found += [
            f"object changed outside: s3://{b}/{k}"
            for (b, k), state in sorted(self._objects.items())
            if (b, k) in now and now[(b, k)] != state
        ]
        buckets = {b["Name"] for b in self.client.list_buckets()["Buckets"]}
        found += [f"bucket created: {b}" for b in sorted(buckets - self._buckets)]
        found += [f"bucket deleted: {b}" for b in sorted(self._buckets - buckets)]
        return found

    def assert_untouched(self) -> None:
        problems = self.problems()
        assert problems == [], "\n".join(problems)


# -- the catalog ------------------------------------------------------------------------------
def services_on(backend: str, base: Path, **overrides: Any) -> Iterator[Services]:
    """Services on `backend` (a fresh PostgreSQL database, dropped after) with their data
    directory at `base/data`; `overrides` replace Settings fields."""
    database_url = postgres.create_database() if backend == "postgres" else None
    try:
        settings = dataclasses.replace(make_settings(base, database_url), **overrides)
        services = Services.build(settings)
        yield services
        services.close()
    finally:
        if database_url:
            postgres.drop_database(database_url)


def catalog(backend: str, base: Path, **overrides: Any) -> Iterator[Api]:
    """The in-process catalog with its data directory at `base/data` (so the default
    warehouse is `base/data/warehouse`); `overrides` replace Settings fields."""
    for services in services_on(backend, base, **overrides):
        app = create_app(services.settings, services)
        with TestClient(app, raise_server_exceptions=False) as client:
            yield Api(client, services, default_prefix(client), base / "data" / "warehouse")


def on_warehouse(api: Api, warehouse_id: str, directory: Path | None = None) -> Api:
    """The same catalog, addressed through another warehouse's prefix."""
    return Api(api.client, api.services, warehouse_id, directory or api.warehouse_dir)


def file_warehouse(
    api: Api, directory: Path, *, delete_profile: dict[str, Any] | None = None, **body: Any
) -> str:
    response = api.client.post(
        f"{ROOT}/warehouse",
        json={
            "warehouse-name": f"wh-{uuid4().hex[:10]}",
            "storage-profile": {"type": "file", "base-location": f"file://{directory}"},
            "delete-profile": delete_profile or {"type": "hard"},
            **body,
        },
    )
    assert response.status_code in (200, 201), response.text
    return str(response.json()["warehouse-id"])


def log_problems(services: Services) -> list[str]:
    """What `icelog audit verify`, `icelog projections verify` and `icelog metadata verify`
    would report (api/cli.py), after one chaining round as `icelog serve` makes them."""
    problems: list[str] = []
    Chainer(services).round(anchor=True)
    chain = AuditChain(services.catalog.app.recorder)
    verdict = chain.verify()
    if verdict.broken_at is not None:
        problems.append(f"audit: broken link at position {verdict.broken_at}: {verdict.reason}")
    for position, link in recorded_heads(services):
        if position <= verdict.head_position and chain.link_at(position) != link:
            problems.append(f"audit: recorded head {position}:{link} no longer matches")
    app = services.catalog.app
    result = maintenance.verify(app.recorder, app.mapper)
    problems += [f"projections: {line}" for line in result.differences[:20]]
    for checked in services.catalog.audit.verify_metadata():
        if checked["status"] != "ok":
            problems.append(f"metadata: {checked}")
    return problems


def assert_log_verifies(services: Services) -> None:
    problems = log_problems(services)
    assert problems == [], "\n".join(problems)


# -- hostile metadata -------------------------------------------------------------------------
def snapshot_update(
    snapshot_id: int, manifest_list: str, sequence_number: int, parent: int | None = None
) -> dict[str, Any]:
    snapshot: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "sequence-number": sequence_number,
        "timestamp-ms": 1_700_000_000_000 + snapshot_id,
        "manifest-list": manifest_list,
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    if parent is not None:
        snapshot["parent-snapshot-id"] = parent
    return {"action": "add-snapshot", "snapshot": snapshot}


def main_ref(snapshot_id: int) -> dict[str, Any]:
    return {
        "action": "set-snapshot-ref",
        "ref-name": "main",
        "type": "branch",
        "snapshot-id": snapshot_id,
    }


def statistics_update(snapshot_id: int, path: str) -> dict[str, Any]:
    return {
        "action": "set-statistics",
        "statistics": {
            "snapshot-id": snapshot_id,
            "statistics-path": path,
            "file-size-in-bytes": 64,
            "file-footer-size-in-bytes": 16,
            "blob-metadata": [],
        },
    }


def partition_statistics_update(snapshot_id: int, path: str) -> dict[str, Any]:
    return {
        "action": "set-partition-statistics",
        "partition-statistics": {
            "snapshot-id": snapshot_id,
            "statistics-path": path,
            "file-size-in-bytes": 64,
        },
    }


_MANIFEST_LIST_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "manifest_file",
        "fields": [{"name": "manifest_path", "type": "string"}],
    }
)
_MANIFEST_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {
                "name": "data_file",
                "type": {
                    "type": "record",
                    "name": "r2",
                    "fields": [{"name": "file_path", "type": "string"}],
                },
            }
        ],
    }
)


def manifest_list_bytes(manifests: Iterable[str]) -> bytes:
    """An Avro manifest list naming `manifests` (only the field purge reads)."""
    out = io.BytesIO()
    fastavro.writer(out, _MANIFEST_LIST_SCHEMA, [{"manifest_path": m} for m in manifests])
    return out.getvalue()


def manifest_bytes(data_files: Iterable[str]) -> bytes:
    """An Avro manifest naming `data_files` (only the field purge reads)."""
    out = io.BytesIO()
    fastavro.writer(out, _MANIFEST_SCHEMA, [{"data_file": {"file_path": f}} for f in data_files])
    return out.getvalue()


def local_path(location: str) -> Path:
    """A file:// location's path (as the server writes it: file:///abs)."""
    assert location.startswith("file:///"), location
    return Path(location[len("file://") :])


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# -- S3 warehouses ----------------------------------------------------------------------------
def s3_profile(endpoint: str, bucket: str, prefix: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "s3",
        "bucket": bucket,
        "key-prefix": prefix,
        "region": "us-east-1",
        "endpoint": endpoint,
        "path-style-access": True,
        "flavor": "s3-compat",
        **extra,
    }


def s3_credential(key: str, secret: str) -> dict[str, Any]:
    return {
        "type": "s3",
        "credential-type": "access-key",
        "access-key-id": key,
        "secret-access-key": secret,
    }


def unchecked_s3_warehouse(name: str, endpoint: str) -> dict[str, Any]:
    """A request for warehouse `name` on bucket `lake` at `endpoint` (no key prefix, no
    path style) with a made-up access key: for checks that never reach the store."""
    return {
        "warehouse-name": name,
        "storage-profile": {
            "type": "s3",
            "bucket": "lake",
            "region": "us-east-1",
            "endpoint": endpoint,
            "flavor": "s3-compat",
        },
        "storage-credential": s3_credential("k", "s"),
    }


def create_s3_warehouse(
    api: Api, endpoint: str, key: str, secret: str, bucket: str, prefix: str, **extra: Any
) -> Any:
    return api.client.post(
        f"{ROOT}/warehouse",
        json={
            "warehouse-name": f"s3-{uuid4().hex[:10]}",
            "storage-profile": s3_profile(endpoint, bucket, prefix, **extra),
            "storage-credential": s3_credential(key, secret),
        },
    )


def s3_warehouse(
    api: Api, endpoint: str, key: str, secret: str, bucket: str, prefix: str, **extra: Any
) -> str:
    response = create_s3_warehouse(api, endpoint, key, secret, bucket, prefix, **extra)
    assert response.status_code in (200, 201), response.text
    return str(response.json()["warehouse-id"])


# -- request bodies ---------------------------------------------------------------------------
VIEW_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def view_body(name: str, namespace: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "schema": VIEW_SCHEMA,
        "view-version": {
            "version-id": 1,
            "schema-id": 0,
            "timestamp-ms": 1_700_000_000_000,
            "summary": {"engine-name": "spark"},
            "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}],
            "default-namespace": namespace,
        },
        "properties": {},
        **extra,
    }


def create_transaction_updates(
    staged: dict[str, Any], location: str, **properties: str
) -> list[dict[str, Any]]:
    """What Iceberg-Java sends to commit a create transaction (after a stage-create)."""
    return [
        {"action": "assign-uuid", "uuid": staged["table-uuid"]},
        {"action": "upgrade-format-version", "format-version": 2},
        {
            "action": "add-schema",
            "schema": staged["schemas"][0],
            "last-column-id": staged["last-column-id"],
        },
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": location},
        {"action": "set-properties", "updates": dict(properties)},
    ]


def level(name: str) -> str:
    """One namespace level or table name as a URL path segment: everything encoded,
    dots too (httpx would remove a literal `..` segment)."""
    from urllib.parse import quote

    return quote(name, safe="").replace(".", "%2E")


def namespace_path(levels: list[str]) -> str:
    return "%1F".join(level(n) for n in levels)


def inside_directory(location: str, directory: Path) -> bool:
    """Whether a file:// location the server wrote resolves below `directory`."""
    real = os.path.realpath(local_path(location))
    return Path(real).is_relative_to(os.path.realpath(directory))


# -- a module's scene: one catalog per backend, its outside world, S3 on demand ---------------
@dataclass(frozen=True)
class Moto:
    """moto in server mode, with an IAM user allowed everything."""

    endpoint: str
    key: str
    secret: str

    def client(self) -> Any:
        return moto_client(self.endpoint, "s3", self.key, self.secret)


def start_moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    with moto_s3(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        key, secret = admin_user(endpoint, "icelog")
        yield Moto(endpoint, key, secret)


@dataclass
class S3Side:
    """An S3 warehouse (bucket `bucket`, prefix `wh`) of the scene's catalog, a sentinel
    bucket, and keys of the warehouse bucket outside `wh/` (`other/`, the sibling `wh2/`)."""

    api: Api  # the catalog, addressed through the S3 warehouse
    s3: Any  # boto3 client of the moto server
    bucket: str
    world: S3World
    warehouse_id: str

    @property
    def root(self) -> str:
        return f"s3://{self.bucket}/wh"

    def keys(self, prefix: str) -> list[str]:
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=prefix)
        return [str(o["Key"]) for o in listed.get("Contents", [])]


@dataclass
class Scene:
    api: Api
    world: World
    base: Path
    moto: Moto | None
    extra: dict[str, str] = field(default_factory=dict)  # what a module adds (warehouse ids)
    _s3: S3Side | None = None

    def s3(self) -> S3Side:
        if self._s3 is None:
            assert self.moto is not None, "this scene has no moto server"
            s3 = self.moto.client()
            bucket = f"lake-{uuid4().hex[:12]}"
            s3.create_bucket(Bucket=bucket)
            world = S3World(s3, f"outside-{uuid4().hex[:12]}")
            warehouse_id = s3_warehouse(
                self.api, self.moto.endpoint, self.moto.key, self.moto.secret, bucket, "wh"
            )
            world.watch(bucket, "wh")
            world.put(bucket, "other/secret.txt", b"another prefix of the same bucket")
            world.put(bucket, "wh2/db/t/metadata/snap.avro", b"a sibling prefix")
            api = on_warehouse(self.api, warehouse_id)
            self._s3 = S3Side(api, s3, bucket, world, warehouse_id)
        return self._s3

    def arm(self) -> None:
        self.world.arm()
        if self._s3 is not None:
            self._s3.world.arm()

    def problems(self) -> list[str]:
        found = self.world.problems()
        if self._s3 is not None:
            found += self._s3.world.problems()
        return found

    def finish(self, *, verify_log: bool = False) -> None:
        """The end of a test: nothing outside touched; with `verify_log`, the log still
        verifies now (it always is at the end of the module: each check reads the whole
        log, ~0.25 s on PostgreSQL after a few hundred requests)."""
        problems = self.problems()
        assert problems == [], "\n".join(problems)
        if verify_log:
            assert_log_verifies(self.api.services)


def open_scene(
    backend: str, base: Path, moto: Moto | None = None, **overrides: Any
) -> Iterator[Scene]:
    """A module's catalog on `backend` with its outside world; the log is verified at the end."""
    for api in catalog(backend, base, **overrides):
        world = World(base)
        world.allow(api.warehouse_dir)
        yield Scene(api, world, base, moto)
        assert_log_verifies(api.services)


@pytest.fixture(scope="module", name="moto")
def module_moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """One moto server a module: a module takes it in with `moto = hostile.module_moto`."""
    yield from start_moto(tmp_path_factory)


def scene_fixture(
    prefix: str, *, prepare: Callable[[Scene], None] | None = None, **overrides: Any
) -> Any:
    """A module's `scene` fixture, once on each backend, over the module's `moto` fixture:
    its catalog (with `overrides` as settings) in a fresh folder `<prefix>-<backend>`, which
    `prepare` may furnish (warehouses, projects) before the first test."""

    @pytest.fixture(scope="module", params=BACKENDS, name="scene")
    def scene(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, moto: Moto
    ) -> Iterator[Scene]:
        base = tmp_path_factory.mktemp(f"{prefix}-{request.param}")
        for opened in open_scene(request.param, base, moto, **overrides):
            if prepare is not None:
                prepare(opened)
            yield opened

    return scene

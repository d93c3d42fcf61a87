"""The scenario behind docs/events.md: an in-process catalog (SQLite event store in a
scratch directory, no background task workers), driven through the REST and management
APIs until every kind of stored event has happened at least once (tables, views,
namespaces, warehouses, projects, soft delete, undrop, expiry, purge, a failed and an
abandoned task attempt, protections, idempotency keys). `collect_events` returns the
stored events mapped exactly as `icelog events tail --json` maps them (`LogAccess` +
`ContextResolver` + `to_cloud_event`/`to_json`); scripts/events_doc.py --record keeps one
example of each type.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro

from icelog.api.app import create_app
from icelog.api.audit import Chainer
from icelog.api.publishing import LogAccess
from icelog.api.services import Services
from icelog.api.settings import Settings
from icelog.domain.errors import ServiceUnavailableError
from icelog.domain.identifiers import NamespaceName, namespace_id
from icelog.publishers.cloud_events import to_cloud_event, to_json
from icelog.publishers.context import ContextResolver

# A fixed scratch directory keeps the locations in the examples readable and stable.
DEFAULT_WORKDIR = Path("/tmp/icelog-events-doc")  # noqa: S108 - scratch catalog, recreated
_MARKER = ".icelog-events-doc"
MGMT = "/management/v1"

SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "order_id", "type": "long", "required": True},
        {"id": 2, "name": "amount", "type": "double", "required": False},
    ],
}
VIEW_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "total", "type": "double", "required": False}],
}


def view_version(sql: str, version_id: int = 1) -> dict[str, Any]:
    return {
        "version-id": version_id,
        "schema-id": 0,
        "timestamp-ms": int(time.time() * 1000),
        "summary": {"engine-name": "spark", "engine-version": "3.5.6"},
        "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
        "default-namespace": ["sales"],
    }


@dataclass
class Catalog:
    """A catalog in-process, with the calls the scenario needs."""

    client: Any  # starlette.testclient.TestClient
    services: Services
    warehouse_id: str
    scratch: Path

    def _check(self, response: Any, *expected: int) -> Any:
        if response.status_code not in (expected or (200, 204)):
            raise RuntimeError(
                f"{response.request.method} {response.request.url}: "
                f"{response.status_code} {response.text}"
            )
        return response.json() if response.content else None

    def rest(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        url = f"/catalog/v1/{self.warehouse_id}{path}"
        return self._check(self.client.request(method, url, json=body, **kw))

    def mgmt(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        return self._check(self.client.request(method, MGMT + path, json=body, **kw))

    def table_id(self, ns: str, name: str) -> str:
        return str(self.rest("GET", f"/namespaces/{ns}/tables/{name}")["metadata"]["table-uuid"])

    def view_id(self, ns: str, name: str) -> str:
        return str(self.rest("GET", f"/namespaces/{ns}/views/{name}")["metadata"]["view-uuid"])

    def namespace_id(self, *levels: str) -> str:
        return str(namespace_id(uuid.UUID(self.warehouse_id), NamespaceName(tuple(levels))))

    def create_table(self, ns: str, name: str, **extra: Any) -> Any:
        body = {"name": name, "schema": SCHEMA, **extra}
        return self.rest("POST", f"/namespaces/{ns}/tables", body)

    def append(self, ns: str, name: str, snapshot_id: int, parent: int | None) -> Any:
        """Commit one appended snapshot, as an engine would (its manifest list is written
        by the engine; here an empty Avro file stands in for it)."""
        table = self.rest("GET", f"/namespaces/{ns}/tables/{name}")["metadata"]
        manifest_list = f"{table['location']}/metadata/snap-{snapshot_id}-1-manifests.avro"
        write_empty_manifest_list(manifest_list)
        sequence = int(table.get("last-sequence-number", 0)) + 1
        snapshot: dict[str, Any] = {
            "snapshot-id": snapshot_id,
            "sequence-number": sequence,
            "timestamp-ms": int(time.time() * 1000),
            "manifest-list": manifest_list,
            "summary": {"operation": "append", "added-records": "250", "added-data-files": "1"},
            "schema-id": 0,
        }
        if parent is not None:
            snapshot["parent-snapshot-id"] = parent
        return self.rest(
            "POST",
            f"/namespaces/{ns}/tables/{name}",
            {
                "requirements": [
                    {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}
                ],
                "updates": [
                    {"action": "add-snapshot", "snapshot": snapshot},
                    {
                        "action": "set-snapshot-ref",
                        "ref-name": "main",
                        "type": "branch",
                        "snapshot-id": snapshot_id,
                    },
                ],
            },
        )

    def create_view(self, ns: str, name: str) -> Any:
        body = {
            "name": name,
            "schema": VIEW_SCHEMA,
            "view-version": view_version("SELECT sum(amount) AS total FROM sales.orders"),
            "properties": {"comment": "revenue"},
        }
        return self.rest("POST", f"/namespaces/{ns}/views", body)

    def deleted_id(self, name: str) -> str:
        listed = self.mgmt("GET", f"/warehouse/{self.warehouse_id}/deleted-tabulars")
        return str(next(t["id"] for t in listed["tabulars"] if t["name"] == name))

    def protect(self, kind: str, entity_id: str, protected: bool) -> Any:
        path = f"/warehouse/{self.warehouse_id}/{kind}/{entity_id}/protection"
        return self.mgmt("POST", path, {"protected": protected})

    def run_tasks(self, worker: str | None = None) -> int:
        return self.services.tasks.run_until_idle(worker)


def write_empty_manifest_list(location: str) -> None:
    """A valid manifest list without entries (the Avro file an empty snapshot has)."""
    path = Path(location.removeprefix("file://"))
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = {
        "type": "record",
        "name": "manifest_file",
        "fields": [{"name": "manifest_path", "type": "string", "field-id": 500}],
    }
    with path.open("wb") as out:
        fastavro.writer(out, fastavro.parse_schema(schema), [])


def wait_until_due(seconds: float) -> None:
    time.sleep(seconds + 0.2)


def run_scenario(cat: Catalog) -> None:
    """Every mutating route and every background outcome, in a plausible order."""
    wh = cat.warehouse_id

    # Namespaces: top-level (warehouse.namespace-added), nested.
    cat.rest("POST", "/namespaces", {"namespace": ["sales"], "properties": {"owner": "finance"}})
    cat.rest("POST", "/namespaces", {"namespace": ["sales", "eu"]})
    cat.rest(
        "POST",
        "/namespaces/sales/properties",
        {"updates": {"retention-days": "30"}, "removals": ["owner"]},
    )

    # A table: create, commits (single-table, then a multi-table transaction), rename.
    cat.create_table("sales", "orders", properties={"format-version": "2"})
    cat.append("sales", "orders", 1001, None)
    cat.append("sales", "orders", 1002, 1001)
    cat.rest(
        "POST",
        "/transactions/commit",
        {
            "table-changes": [
                {
                    "identifier": {"namespace": ["sales"], "name": "orders"},
                    "requirements": [],
                    "updates": [
                        {"action": "set-properties", "updates": {"write.format.default": "orc"}}
                    ],
                }
            ]
        },
    )
    cat.rest(
        "POST",
        "/tables/rename",
        {
            "source": {"namespace": ["sales"], "name": "orders"},
            "destination": {"namespace": ["sales", "eu"], "name": "orders"},
        },
    )

    # Register an existing metadata file as a new table; a hard drop; the name taken again;
    # unregistered (files kept) and registered once more.
    cat.create_table("sales", "returns")
    location = cat.rest("GET", "/namespaces/sales/tables/returns")["metadata-location"]
    cat.rest("DELETE", "/namespaces/sales/tables/returns")
    cat.rest(
        "POST", "/namespaces/sales/register", {"name": "returns", "metadata-location": location}
    )
    location = cat.rest("POST", "/namespaces/sales/tables/returns/unregister")["metadata-location"]
    cat.rest(
        "POST", "/namespaces/sales/register", {"name": "returns", "metadata-location": location}
    )

    # Views: create (protected for a while), replace, rename, drop, register.
    cat.create_view("sales", "revenue")
    revenue_id = cat.view_id("sales", "revenue")
    cat.protect("view", revenue_id, True)
    cat.protect("view", revenue_id, False)
    cat.rest(
        "POST",
        "/namespaces/sales/views/revenue",
        {
            "requirements": [],
            "updates": [
                {
                    "action": "add-view-version",
                    "view-version": view_version(
                        "SELECT sum(amount) AS total FROM sales.eu.orders", version_id=2
                    ),
                },
                {"action": "set-current-view-version", "view-version-id": -1},
            ],
        },
    )
    cat.rest(
        "POST",
        "/views/rename",
        {
            "source": {"namespace": ["sales"], "name": "revenue"},
            "destination": {"namespace": ["sales"], "name": "revenue_eu"},
        },
    )
    view_location = cat.rest("GET", "/namespaces/sales/views/revenue_eu")["metadata-location"]
    cat.rest("DELETE", "/namespaces/sales/views/revenue_eu")
    cat.rest(
        "POST",
        "/namespaces/sales/register-view",
        {"name": "revenue_eu", "metadata-location": view_location},
    )

    # Functions (Iceberg UDFs, management API): create, replace (a new version), drop.
    functions = f"/warehouse/{wh}/namespace/{cat.namespace_id('sales')}/function"
    add_one = {
        "parameters": [{"name": "x", "type": "int"}],
        "return-type": "int",
        "representations": [{"type": "sql", "dialect": "spark", "sql": "x + 1"}],
        "deterministic": True,
    }
    cat.mgmt("POST", functions, {"name": "add_one", "definitions": [add_one], "doc": "x + 1"})
    cat.mgmt("POST", functions, {"name": "scratch_fn", "definitions": [add_one]})
    cat.mgmt(
        "PUT",
        f"{functions}/add_one",
        {"definitions": [{**add_one, "representations": [
            {"type": "sql", "dialect": "spark", "sql": "x + 1"},
            {"type": "sql", "dialect": "trino", "sql": "x + 1"},
        ]}]},
    )  # fmt: skip
    cat.mgmt("DELETE", f"{functions}/scratch_fn")

    # A namespace dropped and created again continues its stream (namespace.recreated).
    cat.rest("POST", "/namespaces", {"namespace": ["scratch"]})
    cat.rest("DELETE", "/namespaces/scratch")
    cat.rest("POST", "/namespaces", {"namespace": ["scratch"], "properties": {"ttl": "1d"}})

    # Protection on and off for each kind.
    orders_id = cat.table_id("sales%1Feu", "orders")
    cat.protect("table", orders_id, True)
    cat.protect("table", orders_id, False)
    cat.protect("namespace", cat.namespace_id("scratch"), True)
    cat.mgmt("POST", f"/warehouse/{wh}/protection", {"protected": True})
    cat.mgmt("POST", f"/warehouse/{wh}/protection", {"protected": False})

    # Idempotency keys: the first outcome is recorded; after the key's lifetime it is
    # recorded again when the key comes back.
    key = str(uuid.uuid4())
    headers = {"Idempotency-Key": key}
    body = {"updates": {"reviewed": "yes"}, "removals": []}
    cat.rest("POST", "/namespaces/sales/properties", body, headers=headers)
    time.sleep(cat.services.settings.idempotency_lifetime_seconds + 0.2)
    cat.rest("POST", "/namespaces/sales/properties", body, headers=headers)
    # A 5xx is not a final outcome: the key is released for the retry, which succeeds.
    retried = {"Idempotency-Key": str(uuid.uuid4())}
    create = {"name": "retried", "schema": SCHEMA}
    with storage_outage(cat.services.catalog.app):
        url = f"/catalog/v1/{cat.warehouse_id}/namespaces/sales/tables"
        cat._check(cat.client.post(url, json=create, headers=retried), 503)
    cat.rest("POST", "/namespaces/sales/tables", create, headers=retried)

    # Soft delete: drops are kept for a while, then expire (a task each).
    cat.mgmt(
        "POST",
        f"/warehouse/{wh}/delete-profile",
        {"delete-profile": {"type": "soft", "expiration-seconds": 1}},
    )
    # (a) Dropped with purge: expires, then its purge runs. The storage is out at first
    #     (as an S3 store answering 503 would be), so the first purge attempt fails and is
    #     retried.
    cat.create_table("sales", "clicks")
    cat.append("sales", "clicks", 2001, None)
    cat.rest("DELETE", "/namespaces/sales/tables/clicks", params={"purgeRequested": "true"})
    # (b) Dropped, then undropped (its expiration task is cancelled).
    cat.create_table("sales", "staging")
    cat.rest("DELETE", "/namespaces/sales/tables/staging")
    cat.mgmt(
        "POST",
        f"/warehouse/{wh}/deleted-tabulars/undrop",
        {"targets": [{"type": "table", "id": cat.deleted_id("staging")}]},
    )
    # (c) A view: soft-dropped and undropped under a new name; another one expires.
    cat.create_view("sales", "daily")
    cat.rest("DELETE", "/namespaces/sales/views/daily")
    cat.mgmt(
        "POST",
        f"/warehouse/{wh}/deleted-tabulars/undrop",
        {"targets": [{"type": "view", "id": cat.deleted_id("daily"), "new-name": "daily_v2"}]},
    )
    cat.create_view("sales", "weekly")
    cat.rest("DELETE", "/namespaces/sales/views/weekly")

    wait_until_due(1)
    with storage_outage(cat.services.catalog.app):
        cat.run_tasks()  # expirations succeed; the purge they schedule fails once
    wait_until_due(cat.services.settings.task_retry_backoff_seconds)
    cat.run_tasks()

    # A worker that dies mid-attempt: its lease runs out and another worker takes over
    # (task.attempt-abandoned), as two `icelog tasks run` processes would.
    cat.create_table("sales", "tmp_load")
    cat.rest("DELETE", "/namespaces/sales/tables/tmp_load")
    wait_until_due(1)
    tasks = cat.services.tasks
    first, second = tasks.worker_name(0), tasks.worker_name(1)
    claimed = tasks.leases.claim(first, now_ms=now_ms(), lease_ms=500, limit=1)
    assert claimed, "the expiration task of sales.tmp_load is due"
    assert cat.services.catalog.tasks.start_task(uuid.UUID(claimed[0]), first) is not None
    time.sleep(0.7)  # ... and `first` is never heard of again
    cat.run_tasks(second)

    # A recursive namespace drop: everything inside goes for good, even in a soft-delete
    # warehouse (a live table is dropped hard, a soft-dropped one expires now), with purge.
    cat.rest("POST", "/namespaces", {"namespace": ["archive"]})
    cat.create_table("archive", "events_2023")
    cat.create_table("archive", "events_2024")
    cat.rest("DELETE", "/namespaces/archive/tables/events_2023")
    cat.rest("DELETE", "/namespaces/archive", params={"recursive": "true", "purge": "true"})
    cat.run_tasks()

    # Management: a project with a warehouse, renamed, then deleted.
    project = cat.mgmt("POST", "/project", {"project-name": "marketing"})["project-id"]
    base = cat.scratch / "marketing-warehouse"
    created = cat.mgmt(
        "POST",
        "/warehouse",
        {
            "warehouse-name": "campaigns",
            "project-id": project,
            "storage-profile": {"type": "file", "base-location": f"file://{base}"},
            "delete-profile": {"type": "hard"},
        },
    )
    other = created["warehouse-id"]
    cat.mgmt("POST", f"/warehouse/{other}/rename", {"new-name": "campaigns_2025"})
    # An S3 warehouse whose credential is rotated: the log records only the new id.
    lake = cat.mgmt(
        "POST",
        "/warehouse",
        {
            "warehouse-name": "lake",
            "project-id": project,
            "storage-profile": {
                "type": "s3",
                "bucket": "example-lake",
                "key-prefix": "marketing",
                "region": "eu-central-1",
                "sts-enabled": True,
                "sts-role-arn": "arn:aws:iam::123456789012:role/icelog-vended",
            },
            "storage-credential": {
                "type": "s3",
                "credential-type": "access-key",
                "access-key-id": "AKIAEXAMPLEKEYID0001",
                "secret-access-key": "example-secret-never-logged",
            },
        },
    )["warehouse-id"]
    cat.mgmt(
        "POST",
        f"/warehouse/{lake}/storage-credential",
        {
            "new-storage-credential": {
                "type": "s3",
                "credential-type": "access-key",
                "access-key-id": "AKIAEXAMPLEKEYID0002",
                "secret-access-key": "rotated-secret-never-logged",
            }
        },
    )
    cat.mgmt("DELETE", f"/warehouse/{lake}")
    cat.mgmt("DELETE", f"/warehouse/{other}")
    cat.mgmt("POST", f"/project/{project}/rename", {"new-name": "marketing-archive"})
    cat.mgmt("DELETE", f"/project/{project}")

    # Users: recorded ahead of their first call, renamed, deleted (with a provider, the
    # first authenticated call provisions the caller the same way).
    user = {"id": "oidc~7f3c2a", "name": "Ana Ruiz", "email": "ana@example.com"}
    cat.mgmt("POST", "/user", {**user, "user-type": "human"})
    cat.mgmt("PUT", "/user/oidc~7f3c2a", {"name": "Ana Ruiz Díaz", "user-type": "human"})
    cat.mgmt("DELETE", "/user/oidc~7f3c2a")

    # Roles and grants: a role with a member, a grant to it, one revoked.
    role = cat.mgmt("POST", "/role", {"name": "analysts", "description": "Read the sales data"})
    role_id = role["id"]
    cat.mgmt(
        "POST", f"/permissions/role/{role_id}/assignments",
        {"writes": [{"type": "assignee", "user": "oidc~7f3c2a"}]},
    )  # fmt: skip
    cat.mgmt(
        "POST", f"/permissions/warehouse/{wh}/assignments",
        {"writes": [
            {"type": "select", "role": role_id}, {"type": "describe", "user": "oidc~7f3c2a"},
        ]},
    )  # fmt: skip
    cat.mgmt(
        "POST", f"/permissions/warehouse/{wh}/assignments",
        {"deletes": [{"type": "describe", "user": "oidc~7f3c2a"}]},
    )  # fmt: skip
    cat.mgmt("POST", f"/role/{role_id}", {"name": "sales-analysts"})
    cat.mgmt("DELETE", f"/role/{role_id}")

    # Back to hard drops; the namespace `scratch` unprotected and dropped.
    cat.mgmt("POST", f"/warehouse/{wh}/delete-profile", {"delete-profile": {"type": "hard"}})
    cat.protect("namespace", cat.namespace_id("scratch"), False)
    cat.rest("DELETE", "/namespaces/scratch")

    # The audit chainer records the hash chain's head (normally every
    # ICELOG_AUDIT_ANCHOR_INTERVAL_SECONDS inside `icelog serve`).
    Chainer(cat.services).round(anchor=True)


def now_ms() -> int:
    return int(time.time() * 1000)


def prepare_workdir(workdir: Path) -> None:
    if workdir.exists():
        if not (workdir / _MARKER).exists():
            raise SystemExit(f"{workdir} exists and was not made by this script; pick --workdir")
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    (workdir / _MARKER).write_text("scratch catalog of scripts/events_doc.py\n")


def collect_events(workdir: Path) -> list[dict[str, Any]]:
    """Run the scenario; every stored event as the CloudEvent JSON `events tail` prints."""
    prepare_workdir(workdir)
    settings = Settings.from_env(
        {
            "ICELOG_DATA_DIR": str(workdir / "data"),
            "ICELOG_DEFAULT_WAREHOUSE_LOCATION": f"file://{workdir / 'warehouse'}",
            "ICELOG_TASK_WORKERS": "0",
            # The S3 warehouse of the scenario is never reached: no storage probe.
            "ICELOG_SKIP_STORAGE_VALIDATION": "true",
            "ICELOG_TASK_RETRY_BACKOFF_SECONDS": "1",
            "ICELOG_IDEMPOTENCY_LIFETIME_SECONDS": "1",
        }
    )
    with warnings.catch_warnings():
        # Starlette nudges TestClient users towards httpx2; httpx is what the project pins.
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient  # noqa: PLC0415
    services = Services.build(settings)
    try:
        with TestClient(create_app(settings, services)) as client:
            config = client.get("/catalog/v1/config", params={"warehouse": "default"})
            prefix = config.json()["overrides"]["prefix"]
            run_scenario(Catalog(client, services, prefix, workdir))
        log = LogAccess(services)
        resolver = ContextResolver(log.load_at)
        found: list[dict[str, Any]] = []
        position = 0
        while batch := log.read(position, 500):
            for item in batch:
                cloud = to_cloud_event(
                    item.event,
                    topic=item.topic,
                    position=item.position,
                    context=resolver.resolve(item.event),
                    source=settings.publish.source,
                )
                found.append(json.loads(to_json(cloud)))
                position = item.position
        return found
    finally:
        services.close()


@contextmanager
def storage_outage(catalog: Any) -> Iterator[None]:
    """Deletes fail while inside, as they do when an S3 store answers 503."""

    class Unavailable:
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.root = inner.root

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def delete(self, location: str) -> bool:
            raise ServiceUnavailableError(
                f"Storage error: could not delete {location}: SlowDown (HTTP 503)"
            )

        def write_new(self, location: str, data: bytes) -> None:
            raise ServiceUnavailableError(
                f"Storage error: could not write {location}: SlowDown (HTTP 503)"
            )

    real = catalog.file_io
    catalog.file_io = lambda profile: Unavailable(real(profile))
    try:
        yield
    finally:
        catalog.file_io = real

r"""Generate docs/events.md — the change-event reference — from REAL events.

It starts an in-process catalog (SQLite event store in a scratch directory, no background
task workers), drives it through the REST and management APIs so that every kind of stored
event happens at least once (tables, views, namespaces, warehouses, projects, soft delete,
undrop, expiry, purge, a failed and an abandoned task attempt, protections, idempotency
keys), then maps the stored events exactly as `icelog events tail --json` does
(`LogAccess` + `ContextResolver` + `to_cloud_event`/`to_json`) and writes one section per
event type with one of those real events as the example.

    .venv/bin/python scripts/events_doc.py                 # writes docs/events.md
    .venv/bin/python scripts/events_doc.py --output -      # prints it instead

Ids and times in the examples are real, so every run changes them; the prose comes from the
tables below (`WHEN`, `FIELDS`). The script refuses to write the document when an event
class has no example, no description or an undescribed data field, so a new event class
must be described here before the document can be regenerated.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import shutil
import sys
import time
import types
import typing
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
from eventsourcing.domain import DomainEvent

from icelog import domain
from icelog.api.app import create_app
from icelog.api.audit import Chainer
from icelog.api.publishing import LogAccess
from icelog.api.services import Services
from icelog.api.settings import PublishSettings, Settings
from icelog.domain.errors import ServiceUnavailableError
from icelog.domain.identifiers import NamespaceName, namespace_id
from icelog.publishers.cloud_events import to_cloud_event, to_json
from icelog.publishers.context import ContextResolver

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = ROOT / "docs" / "events.md"
# A fixed scratch directory keeps the locations in the examples readable and stable.
DEFAULT_WORKDIR = Path("/tmp/icelog-events-doc")  # noqa: S108 - scratch catalog, recreated
_MARKER = ".icelog-events-doc"
MGMT = "/management/v1"
ELLIPSIS = "…"

# -------------------------------------------------------------------------------------------
# The event classes
# -------------------------------------------------------------------------------------------


def stored_event_classes() -> dict[str, type[Any]]:
    """topic → class for every concrete stored event class in domain/*.py (the
    `….event.v1` base classes are abstract: never stored)."""
    found: dict[str, type[Any]] = {}
    for info in pkgutil.iter_modules(domain.__path__, "icelog.domain."):
        module = importlib.import_module(info.name)
        for cls in _classes(module):
            topic = cls.__dict__.get("TOPIC")
            if (
                isinstance(topic, str)
                and issubclass(cls, DomainEvent)
                and not topic.endswith(".event.v1")
            ):
                found[topic] = cls
    return found


def _classes(owner: Any) -> Iterator[type[Any]]:
    for value in vars(owner).values():
        if inspect.isclass(value) and value.__module__ == getattr(owner, "__name__", None):
            yield value
            yield from _nested(value)


def _nested(cls: type[Any]) -> Iterator[type[Any]]:
    for value in vars(cls).values():
        if inspect.isclass(value) and value.__qualname__.startswith(cls.__qualname__ + "."):
            yield value
            yield from _nested(value)


def aggregate_of(topic: str) -> str:
    """`icelog.name-claim.claimed.v1` → `name-claim`."""
    return topic.split(".")[1]


# -------------------------------------------------------------------------------------------
# The scenario: a real catalog, driven through its APIs
# -------------------------------------------------------------------------------------------

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
    with storage_outage(cat.services.catalog):
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
    with storage_outage(cat.services.catalog):
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
    assert cat.services.catalog.start_task(uuid.UUID(claimed[0]), first) is not None
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


# -------------------------------------------------------------------------------------------
# What the events mean (from the class docstrings and the commands that append them)
# -------------------------------------------------------------------------------------------

AGGREGATES: dict[str, tuple[str, str]] = {
    # aggregate → (section title, what its events are about)
    "table": (
        "Tables",
        "One stream per table (`aggregateid` = `tabularid` = the table's id). `subject` is "
        "the table's dotted identifier as of the event (`namespace` + `name`).",
    ),
    "view": (
        "Views",
        "One stream per view; tables and views share one identifier space per warehouse. "
        "`subject` is the view's dotted identifier as of the event.",
    ),
    "function": (
        "Functions",
        "One stream per function (Iceberg UDF; `aggregateid` = `tabularid` = the function's "
        "id). Functions have their own names in a namespace (a table may share a name). "
        "`subject` is the function's dotted identifier.",
    ),
    "namespace": (
        "Namespaces",
        "One stream per namespace path in a warehouse: the id is derived from (warehouse, "
        "path), so a namespace that is dropped and created again continues its stream. "
        "`subject` and `namespace` are the dotted path.",
    ),
    "warehouse": (
        "Warehouses",
        "One stream per warehouse; `subject` and `name` are the warehouse's name as of the "
        "event. `warehouse.namespace-added`/`-removed` are bookkeeping.",
    ),
    "project": (
        "Projects",
        "One stream per project (the embedded `default` project has the nil UUID). "
        "`project.warehouse-added`/`-removed` are bookkeeping.",
    ),
    "task": (
        "Background tasks",
        "One stream per task: expiration of a soft-dropped table or view, or purge of a "
        "dropped table's files. Tasks run in `icelog serve` (ICELOG_TASK_WORKERS) or "
        "`icelog tasks run`. `subject` is the task id, `tabularid` the table or view it works "
        "on, `actor` `system:task-worker` for what workers append.",
    ),
    "user": (
        "Users",
        "One stream per user of an identity provider; the id is derived from the user id "
        "(`oidc~<subject>`), which is also `subject`. They hold the name and e-mail the "
        "provider's tokens gave (personal data: see docs/auth.md).",
    ),
    "grants": (
        "Grants",
        "One stream per object that has grants (id derived from the object's kind and id); "
        "`subject` is `<kind>:<id>`. Ownership of what a user creates is not a separate "
        "event: the creation event's `actor` is the owner (docs/auth.md).",
    ),
    "role": (
        "Roles",
        "One stream per role; membership is the role's `assignee` grant. `subject` is the "
        "role's name.",
    ),
    "audit": (
        "Audit chain heads",
        "The head of the hash chain over the stored events (docs/audit.md), recorded now and "
        "then so that it travels with the change stream: keep the latest `head-recorded` "
        "outside the catalog, and `icelog audit verify --expect <position>:<link>` proves "
        "later that the log up to that position was not altered.",
    ),
    "name-claim": (
        "Name claims (internal)",
        "Bookkeeping that keeps names unique without locks: a claim's id is derived from the "
        "name, so two concurrent creates of one name collide in the event store instead of "
        "both winning. Always appended together with the table, view or warehouse event that "
        "takes or frees the name; consumers can ignore these.",
    ),
    "idempotency-key": (
        "Idempotency keys (internal)",
        "Outcomes of catalog requests that carried an `Idempotency-Key` header, kept so that "
        "a retried request is answered without running again, on any replica. Consumers can "
        "ignore these.",
    ),
    "server": (
        "Server (internal)",
        "The catalog server itself: one stream, one event.",
    ),
    "storage-roots": (
        "Storage roots (internal)",
        "One stream for the whole catalog: the storage root of every live warehouse, in "
        "every project, so that no two warehouses share storage (ADR 0011). Always appended "
        "together with the warehouse event that claims or frees a root; consumers can ignore "
        "these.",
    ),
}

WHEN: dict[str, str] = {
    # Tables
    "icelog.table.created.v1": (
        "A table was created: `createTable` (`POST …/namespaces/{ns}/tables` without "
        "`stage-create`), or a create transaction was committed (stage-create, then a commit "
        "with `assert-create`). `metadata` is the first metadata document, already written to "
        "`metadata-location`."
    ),
    "icelog.table.registered.v1": (
        "`registerTable` (`POST …/namespaces/{ns}/register`) adopted an existing metadata file "
        "as a new table. The table gets a new id (`tabularid`): it is not the `table-uuid` "
        "inside the adopted metadata."
    ),
    "icelog.table.committed.v1": (
        "A commit to the table: `updateTable` (`POST …/namespaces/{ns}/tables/{table}`) or this "
        "table's part of a multi-table transaction (`POST …/transactions/commit`, one event "
        "per table, all in one append). `updates` were applied at `applied-at-ms` to the "
        "metadata at `previous-metadata-location`, producing `metadata-location`."
    ),
    "icelog.table.renamed.v1": (
        "`renameTable` (`POST …/tables/rename`), within a namespace or into another one of the "
        "same warehouse. The envelope (`subject`, `namespace`, `name`) already has the new "
        "name."
    ),
    "icelog.table.dropped.v1": (
        "`dropTable` in a warehouse whose delete profile is `hard` (the default), or a recursive "
        "namespace drop: the table is gone at once. With `purge-requested` (`?purgeRequested="
        "true`) a purge task is scheduled in the same append and `table.purged` follows."
    ),
    "icelog.table.unregistered.v1": (
        "`unregisterTable` (`POST …/namespaces/{ns}/tables/{table}/unregister`, Iceberg's main "
        "spec): the table left the catalog at once, whatever the delete profile, and no file "
        "was touched — `registerTable` with its last metadata location brings it back. "
        "Everything that reads the log treats it as a `table.dropped` without purge."
    ),
    "icelog.table.soft-dropped.v1": (
        "`dropTable` in a warehouse with a `soft` delete profile: the name is free at once, but "
        "the table and its files are kept until `expires-at-ms` (the delay is fixed at drop "
        "time). Until then it can be undropped; then task `expiration-task-id` makes the drop "
        "final (`table.expired`)."
    ),
    "icelog.table.undropped.v1": (
        "`POST /management/v1/warehouse/{id}/deleted-tabulars/undrop` restored a soft-dropped "
        "table with its last metadata, under `name` (its old name unless the request gave "
        "`new-name`). Its expiration task is cancelled in the same append."
    ),
    "icelog.table.expired.v1": (
        'A soft drop became final: `reason` is `"expired"` (the expiration task ran) or '
        '`"dropped"` (a recursive namespace drop removed it). `purge-task-id` is the purge '
        "that follows when the drop or the namespace drop asked for one."
    ),
    "icelog.table.purged.v1": (
        "The purge task of a drop with `purgeRequested=true` deleted the files reachable from "
        "the table's metadata (data and delete files, manifests, manifest lists, statistics, "
        "every metadata file the catalog wrote)."
    ),
    "icelog.table.protection-changed.v1": (
        "Protection switched on or off (`POST /management/v1/warehouse/{id}/table/{table-id}/"
        "protection`). A protected table cannot be dropped."
    ),
    # Views
    "icelog.view.created.v1": (
        "`createView` (`POST …/namespaces/{ns}/views`): `metadata` is the first view metadata "
        "document, already written to `metadata-location`."
    ),
    "icelog.view.registered.v1": (
        "`registerView` (`POST …/namespaces/{ns}/register-view`) adopted an existing view "
        "metadata file. The view gets a new id: it is not the `view-uuid` inside the metadata."
    ),
    "icelog.view.replaced.v1": (
        "`replaceView` (`POST …/namespaces/{ns}/views/{view}`): `updates` were applied at "
        "`applied-at-ms` to the document at `previous-metadata-location`, producing "
        "`metadata-location`."
    ),
    "icelog.view.renamed.v1": (
        "`renameView` (`POST …/views/rename`). The envelope already has the new name."
    ),
    "icelog.view.dropped.v1": (
        "`dropView` in a warehouse with a `hard` delete profile, or a recursive namespace drop."
    ),
    "icelog.view.soft-dropped.v1": (
        "`dropView` in a warehouse with a `soft` delete profile: the name is free, the view is "
        "kept until `expires-at-ms`, when task `expiration-task-id` makes the drop final."
    ),
    "icelog.view.undropped.v1": (
        "A soft-dropped view was restored (`…/deleted-tabulars/undrop`) under `name` (its old "
        "name unless the request gave `new-name`); its expiration task is cancelled."
    ),
    "icelog.view.expired.v1": (
        'A soft drop of a view became final: `reason` `"expired"` or `"dropped"` (recursive '
        "namespace drop). Views have no files to purge, so `purge-task-id` is null."
    ),
    "icelog.view.protection-changed.v1": (
        "Protection switched on or off (`…/view/{view-id}/protection`). A protected view "
        "cannot be dropped."
    ),
    # Functions
    "icelog.function.created.v1": (
        "A function was created (`POST /management/v1/warehouse/{id}/namespace/{ns-id}/"
        "function`): `metadata` is the first function metadata document (Iceberg UDF spec), "
        "already written to `metadata-location`."
    ),
    "icelog.function.replaced.v1": (
        "A function was replaced (`PUT …/function/{name}`): `changes` were applied at "
        "`applied-at-ms` to the document at `previous-metadata-location`, producing "
        "`metadata-location` (ADR 0017)."
    ),
    "icelog.function.dropped.v1": (
        "A function was dropped (`DELETE …/function/{name}`, or a recursive namespace drop). "
        "Its metadata files stay."
    ),
    # Namespaces
    "icelog.namespace.created.v1": (
        "`createNamespace` (`POST …/namespaces`) for a path that never existed in the "
        "warehouse. Appended with `warehouse.namespace-added` (top level); a nested one's "
        "append checks that its parent still exists (ADR 0018)."
    ),
    "icelog.namespace.recreated.v1": (
        "`createNamespace` for a path that existed before and was dropped: the stream of the "
        "old namespace continues (same id), with fresh properties and no children."
    ),
    "icelog.namespace.properties-updated.v1": (
        "`updateProperties` (`POST …/namespaces/{ns}/properties`) changed something (a request "
        "that changes nothing appends nothing)."
    ),
    "icelog.namespace.child-added.v1": (
        "Bookkeeping, written before ADR 0018 (logs that hold it still replay): a table, "
        "view, function or sub-namespace came to live in this namespace (created, registered, "
        "renamed into it, undropped), or a soft-dropped table or view was set aside in it "
        "(`child-kind` `soft-deleted`). What a namespace holds is now checked in the append "
        "of the child's own event and of the namespace's drop."
    ),
    "icelog.namespace.child-removed.v1": (
        "Bookkeeping, written before ADR 0018: the reverse of `child-added` (the child was "
        "dropped, renamed away, soft-dropped, undropped or expired)."
    ),
    "icelog.namespace.dropped.v1": (
        "`dropNamespace` (`DELETE …/namespaces/{ns}`, or the management API by id): an empty "
        "namespace was dropped; with `?recursive=true` after everything inside was."
    ),
    "icelog.namespace.protection-changed.v1": (
        "Protection switched on or off (`…/namespace/{namespace-id}/protection`). A protected "
        "namespace cannot be dropped."
    ),
    # Warehouses
    "icelog.warehouse.created.v1": (
        "`POST /management/v1/warehouse`; at first start also the embedded `default` warehouse "
        "(actor `system`). Appended with the project's `project.warehouse-added`."
    ),
    "icelog.warehouse.renamed.v1": "`POST /management/v1/warehouse/{id}/rename`.",
    "icelog.warehouse.namespace-added.v1": (
        "Bookkeeping: a top-level namespace was created in the warehouse (so deleting the "
        "warehouse conflicts with a concurrent namespace create)."
    ),
    "icelog.warehouse.namespace-removed.v1": ("Bookkeeping: a top-level namespace was dropped."),
    "icelog.warehouse.deleted.v1": (
        "`DELETE /management/v1/warehouse/{id}`: only an unprotected warehouse without "
        "namespaces and open tasks. Appended with `project.warehouse-removed`."
    ),
    "icelog.warehouse.delete-profile-changed.v1": (
        "`POST /management/v1/warehouse/{id}/delete-profile`: what drops do from now on (a "
        "soft drop fixes its own expiry at drop time)."
    ),
    "icelog.warehouse.storage-profile-changed.v1": (
        "`POST /management/v1/warehouse/{id}/storage` or `.../storage-credential`: new "
        "storage settings or a new credential for the same storage location. The credential "
        "itself is never in the log: the profile names it by `credential-id`."
    ),
    "icelog.warehouse.protection-changed.v1": (
        "Protection switched on or off (`POST /management/v1/warehouse/{id}/protection`). A "
        "protected warehouse cannot be deleted."
    ),
    # Projects
    "icelog.project.created.v1": (
        "`POST /management/v1/project`; at first start also the `default` project (nil UUID, "
        "actor `system`)."
    ),
    "icelog.project.renamed.v1": "`POST /management/v1/project/{id}/rename`.",
    "icelog.project.warehouse-added.v1": (
        "Bookkeeping: a warehouse was created in the project (appended with `warehouse.created`)."
    ),
    "icelog.project.warehouse-removed.v1": (
        "Bookkeeping: a warehouse of the project was deleted (with `warehouse.deleted`)."
    ),
    "icelog.project.deleted.v1": (
        "`DELETE /management/v1/project/{id}`: only a project without warehouses."
    ),
    # Tasks
    "icelog.task.scheduled.v1": (
        "A task was scheduled, in the same append as its cause: queue `tabular-expiration` by a "
        "soft drop (due when the drop expires), queue `tabular-purge` by a drop with purge "
        "(due at once)."
    ),
    "icelog.task.attempt-started.v1": (
        "A worker took the task for attempt number `attempt`. Only one worker can: the start "
        "is an append the event store lets only one worker make."
    ),
    "icelog.task.attempt-abandoned.v1": (
        "The attempt's worker stopped without an outcome (killed, or it lost its database) and "
        "its lease ran out; appended by the worker that takes the task over, just before its "
        "own `attempt-started`."
    ),
    "icelog.task.attempt-failed.v1": (
        "The attempt failed with `error`. It is retried at `retry-at-ms` (back-off "
        "ICELOG_TASK_RETRY_BACKOFF_SECONDS, doubled per attempt) or, when `final` "
        "(ICELOG_TASK_MAX_ATTEMPTS used up), the task has failed for good."
    ),
    "icelog.task.succeeded.v1": (
        "The attempt finished the work. Appended together with what the work changed "
        "(`table.expired`/`view.expired`, `table.purged`)."
    ),
    "icelog.task.cancelled.v1": (
        "The task is no longer needed: its table or view was undropped, or a recursive "
        "namespace drop removed it first (`reason`)."
    ),
    # Internal
    "icelog.name-claim.claimed.v1": (
        "A name was claimed for the first time, together with the event that takes it: a table "
        "or view (`ns.name`) or a warehouse (`<project-id>/<warehouse-name>`)."
    ),
    "icelog.name-claim.reclaimed.v1": (
        "A released name was taken again (by a new table or view, an undrop, a rename)."
    ),
    "icelog.name-claim.released.v1": (
        "The holder gave the name up: drop, soft drop, rename (the old name), warehouse "
        "rename or delete."
    ),
    "icelog.idempotency-key.claimed.v1": (
        "A mutating catalog request with an `Idempotency-Key` header claimed the key before "
        "running (ADR 0012). Of two requests claiming one key at once — on any replica — one "
        "wins; the other waits for its outcome."
    ),
    "icelog.idempotency-key.reclaimed.v1": (
        "The key was claimed again: its earlier claim ran out (`lease-until-ms`) without the "
        "command landing, or it was released after a 5xx, or its recorded outcome outlived "
        "ICELOG_IDEMPOTENCY_LIFETIME_SECONDS."
    ),
    "icelog.idempotency-key.landed.v1": (
        "The claimant's command appended its events — in this same append, so a key can land "
        "only once, even when a request took over the claim of one that stalled."
    ),
    "icelog.idempotency-key.completed.v1": (
        "The request's answer was recorded (2xx, or a 4xx that would not change on retry). A "
        "repeat of the key within ICELOG_IDEMPOTENCY_LIFETIME_SECONDS gets it back without "
        "running again. Recorded by the claimant, or — when the claimant's request died after "
        "its command landed — rebuilt from the log by the next request with the key."
    ),
    "icelog.idempotency-key.released.v1": (
        "The claimant answered with a 5xx before its command landed (not a final outcome): "
        "the key is free for a retry at once."
    ),
    "icelog.idempotency-key.recorded.v1": (
        "Written by releases before claims existed: a first final outcome, recorded after the "
        "request ran. Older logs hold it; it is still read."
    ),
    "icelog.idempotency-key.rerecorded.v1": (
        "Written by releases before claims existed: the key used again after its lifetime. "
        "Older logs hold it; it is still read."
    ),
    "icelog.audit.started.v1": (
        "The first chain head is about to be recorded (once per catalog, in the same append)."
    ),
    "icelog.audit.head-recorded.v1": (
        "The audit chainer recorded the hash chain's head: the link at log `position`. "
        "Appended by `icelog serve` every ICELOG_AUDIT_ANCHOR_INTERVAL_SECONDS when the log "
        "grew, or by `icelog audit chain --anchor`."
    ),
    "icelog.server.bootstrapped.v1": (
        "The catalog was bootstrapped: once per database, at the first start of "
        "`icelog serve` (actor `system`), or by `POST /management/v1/bootstrap`."
    ),
    "icelog.user.provisioned.v1": (
        "A user of an identity provider was recorded: by their first authenticated call "
        "(`how`: `config-call-creation`, actor the user) or by `POST /management/v1/user` "
        "(`create-endpoint`)."
    ),
    "icelog.user.updated.v1": (
        "A user's name, e-mail or type changed: a later token said otherwise "
        "(`config-call-creation`), or `PUT /management/v1/user/{id}` (`update-endpoint`). "
        "Also brings back a deleted user."
    ),
    "icelog.user.deleted.v1": (
        "`DELETE /management/v1/user/{id}`; the user's next authenticated call provisions "
        "them again."
    ),
    "icelog.grants.started.v1": (
        "The first grant on an object is about to be written (bookkeeping; one stream per object)."
    ),
    "icelog.grants.granted.v1": (
        "A relation on an object was granted to a user or a role: "
        "`POST /management/v1/permissions/.../assignments` (`writes`), or the first admin at "
        "`POST /management/v1/bootstrap`. A grant already held appends nothing."
    ),
    "icelog.grants.revoked.v1": ("A grant was taken back (`deletes` of an assignments request)."),
    "icelog.role.created.v1": "`POST /management/v1/role`; its creator owns it.",
    "icelog.role.updated.v1": "`POST /management/v1/role/{id}`: a new name or description.",
    "icelog.role.deleted.v1": (
        "`DELETE /management/v1/role/{id}`; its memberships and the grants it held go with it."
    ),
    "icelog.storage-roots.started.v1": (
        "The registry of warehouse roots began, with the first warehouse created after it "
        "existed; it holds the roots of the warehouses that were already there."
    ),
    "icelog.storage-roots.root-claimed.v1": (
        "A warehouse was created: its storage root, which overlaps no other warehouse's. "
        "Appended with `warehouse.created`."
    ),
    "icelog.storage-roots.root-released.v1": (
        "A warehouse was deleted: its root is free again. Appended with `warehouse.deleted`."
    ),
}

# Meaning of data fields: per event type, falling back to the shared meanings below.
COMMON_FIELDS: dict[str, str] = {
    "warehouse-id": "The warehouse's id.",
    "namespace-id": "Id of the namespace it is in.",
    "namespace": 'Namespace levels, e.g. `["sales", "eu"]`.',
    "name": "Name within the namespace.",
    "location": "Base location of the files.",
    "metadata-location": "The metadata file of the new state (the current one from now on).",
    "requirements": "The requirements the client sent (Iceberg REST `requirements`), all met.",
    "updates": "The updates the client sent (Iceberg REST `updates`), in order.",
    "previous-metadata-location": "The metadata file the updates were applied to.",
    "applied-at-ms": (
        "When the updates were applied (epoch ms): the time recorded in the new metadata."
    ),
    "rules": (
        "The metadata rules the updates were applied under (ADR 0012): 2 since issue 15 "
        "(as strict as Iceberg Java), 1 for commits logged before. A replay applies the same."
    ),
    "from-namespace": "Namespace levels before.",
    "from-name": "Name before.",
    "protected": "Whether it is protected now.",
    "deleted-at-ms": "When it was dropped (epoch ms).",
    "expiration-seconds": "The warehouse's soft-delete delay at drop time.",
    "expires-at-ms": "When the drop becomes final unless undropped (epoch ms).",
    "expiration-task-id": "The `task` that makes the drop final (`task.scheduled` in this append).",
    "reason": "Why (see above).",
    "purge-task-id": "The purge `task` scheduled in this append, or null.",
    "attempt": "Attempt number (1, 2, …).",
    "worker": "The worker: `<host>:<pid>:<random>:<thread>`.",
    "aggregate-id": "The aggregate's id (the same as the `aggregateid` attribute).",
    "aggregate-version": (
        "The aggregate's version after this event (the same as the `version` attribute)."
    ),
}

FIELDS: dict[str, dict[str, str]] = {
    "icelog.table.created.v1": {
        "metadata": "The whole first metadata document (Iceberg table metadata JSON).",
        "updates": "What a create transaction submitted (empty for a plain create).",
        "location": "The table's base location.",
    },
    "icelog.table.registered.v1": {
        "metadata": "The adopted metadata document.",
        "metadata-location": "The adopted metadata file.",
        "location": "The table's base location (from the metadata).",
    },
    "icelog.table.committed.v1": {},
    "icelog.table.renamed.v1": {
        "namespace-id": "Id of the namespace it is in now.",
        "namespace": "Namespace levels now.",
        "name": "Name now.",
    },
    "icelog.table.dropped.v1": {
        "purge-requested": "Whether the client asked to purge the files (a purge task follows)."
    },
    "icelog.table.unregistered.v1": {"purge-requested": "Always false: no file is touched."},
    "icelog.table.soft-dropped.v1": {
        "purge-requested": "Whether the drop asked for a purge (it runs when the drop expires)."
    },
    "icelog.table.undropped.v1": {
        "namespace": "Namespace levels it is restored into (the one it was dropped from).",
        "name": "Name it is restored under.",
        "from-namespace": "Namespace levels when it was dropped.",
        "from-name": "Name when it was dropped.",
    },
    "icelog.table.purged.v1": {
        "deleted-files": "Files deleted.",
        "missing-files": "Files referenced by the metadata that were already gone.",
    },
    "icelog.view.created.v1": {
        "metadata": "The whole first view metadata document.",
        "location": "The view's base location.",
    },
    "icelog.view.registered.v1": {
        "metadata": "The adopted view metadata document.",
        "metadata-location": "The adopted metadata file.",
        "location": "The view's base location (from the metadata).",
    },
    "icelog.view.renamed.v1": {
        "namespace-id": "Id of the namespace it is in now.",
        "namespace": "Namespace levels now.",
        "name": "Name now.",
    },
    "icelog.view.undropped.v1": {
        "namespace": "Namespace levels it is restored into.",
        "name": "Name it is restored under.",
        "from-namespace": "Namespace levels when it was dropped.",
        "from-name": "Name when it was dropped.",
    },
    "icelog.view.expired.v1": {"purge-task-id": "Always null for views."},
    "icelog.function.created.v1": {
        "metadata": "The whole first function metadata document.",
        "location": "The function's base location (its metadata files are below it).",
    },
    "icelog.function.replaced.v1": {
        "changes": (
            "What the request changed, as submitted: `definitions` (each the new current "
            "version of its signature), `remove-definitions`, `set-current-versions`, `doc`, "
            "`properties`, `secure`."
        ),
        "applied-at-ms": "When the changes were applied (epoch ms): the new versions' time.",
        "previous-metadata-location": "The metadata file the changes were applied to.",
    },
    "icelog.namespace.created.v1": {
        "levels": 'The namespace path, e.g. `["sales", "eu"]`.',
        "properties": "Its properties.",
    },
    "icelog.namespace.recreated.v1": {
        "levels": "The namespace path.",
        "properties": "Its properties (nothing of the dropped namespace's).",
    },
    "icelog.namespace.properties-updated.v1": {
        "updated": "Properties set: new keys and changed values only.",
        "removed": "Keys that were present and are now gone.",
    },
    "icelog.namespace.child-added.v1": {
        "child-kind": "`namespace`, `table`, `view` or `soft-deleted`.",
        "child-id": "The child's id.",
    },
    "icelog.namespace.child-removed.v1": {
        "child-kind": "`namespace`, `table`, `view` or `soft-deleted`.",
        "child-id": "The child's id.",
    },
    "icelog.warehouse.created.v1": {
        "project-id": "The project it belongs to (for good).",
        "name": "The warehouse's name (unique per project).",
        "storage-profile": ("Where its files live (`type`, `base-location`, …); never secrets."),
        "delete-profile": '`{"type": "hard"}` or `{"type": "soft", "expiration-seconds": N}`.',
    },
    "icelog.warehouse.renamed.v1": {"name": "The new name."},
    "icelog.warehouse.namespace-added.v1": {"namespace-id": "The top-level namespace's id."},
    "icelog.warehouse.namespace-removed.v1": {"namespace-id": "The top-level namespace's id."},
    "icelog.warehouse.delete-profile-changed.v1": {
        "delete-profile": '`{"type": "hard"}` or `{"type": "soft", "expiration-seconds": N}`.'
    },
    "icelog.warehouse.storage-profile-changed.v1": {
        "storage-profile": (
            "The whole new profile (`type`, `base-location`, S3 settings, `credential-id`); "
            "never secrets."
        )
    },
    "icelog.project.created.v1": {"name": "The project's name."},
    "icelog.project.renamed.v1": {"name": "The new name."},
    "icelog.project.warehouse-added.v1": {"warehouse-id": "The new warehouse."},
    "icelog.project.warehouse-removed.v1": {"warehouse-id": "The deleted warehouse."},
    "icelog.task.scheduled.v1": {
        "queue": "`tabular-expiration` or `tabular-purge`.",
        "warehouse-id": "The warehouse of the table or view.",
        "entity-kind": "`table` or `view`.",
        "entity-id": "The table or view it works on.",
        "due-at-ms": "When it is due (epoch ms).",
        "max-attempts": "How many attempts it gets (ICELOG_TASK_MAX_ATTEMPTS).",
        "payload": (
            "What the work needs that the entity may no longer say; for a purge the table's "
            "last `metadata-location` and `location`. Never secrets."
        ),
    },
    "icelog.task.attempt-abandoned.v1": {
        "attempt": "The abandoned attempt's number.",
        "worker": "The worker that went away.",
    },
    "icelog.task.attempt-failed.v1": {
        "error": "`<exception type>: <message>` (at most 2,000 characters).",
        "retry-at-ms": "When it is due again (epoch ms); unchanged when `final`.",
        "final": "True when no attempt is left: the task has failed for good.",
    },
    "icelog.task.succeeded.v1": {
        "result": (
            'Expiration: `{"expired": true}` (`false` when the tabular was undropped '
            'meanwhile); purge: `{"deleted-files": N, "missing-files": N}`.'
        )
    },
    "icelog.task.cancelled.v1": {
        "reason": "`table undropped`, `view undropped`, `table dropped`, `view dropped`."
    },
    "icelog.name-claim.claimed.v1": {
        "kind": "`table`, `view` or `warehouse`.",
        "holder-id": "Id of the table, view or warehouse that holds the name.",
        "name": "The full name: `ns.name`, or `<project-id>/<warehouse-name>`.",
    },
    "icelog.name-claim.reclaimed.v1": {
        "kind": "`table`, `view` or `warehouse`.",
        "holder-id": "Id of the new holder.",
    },
    "icelog.idempotency-key.claimed.v1": {
        "key": "The Idempotency-Key (a UUID).",
        "method": "HTTP method of the request.",
        "path": "Request path.",
        "token": "Names this claim (a request id may repeat: clients reuse them on retries).",
        "claimed-at-ms": "When it was claimed (epoch ms).",
        "lease-until-ms": (
            "Until when the claim holds without an outcome: the request timeout and a little "
            "more; after that another request may take it over."
        ),
    },
    "icelog.idempotency-key.reclaimed.v1": {
        "method": "HTTP method of the request.",
        "path": "Request path.",
        "token": "Names this claim.",
        "claimed-at-ms": "When it was claimed (epoch ms).",
        "lease-until-ms": "Until when the claim holds without an outcome.",
    },
    "icelog.idempotency-key.landed.v1": {
        "metadata-location": "The metadata file the command wrote, when it wrote exactly one.",
    },
    "icelog.idempotency-key.completed.v1": {
        "status": "HTTP status of the answer.",
        "body": (
            "The answer's body (JSON text); without `metadata` and storage configuration when "
            "`metadata-location` is set (both are rebuilt on replay; vended credentials are "
            "never recorded)."
        ),
        "metadata-location": "For table and view answers: their metadata file, else null.",
        "recorded-at-ms": "When it was recorded (epoch ms).",
    },
    "icelog.idempotency-key.recorded.v1": {
        "key": "The Idempotency-Key (a UUID).",
        "method": "HTTP method of the request.",
        "path": "Request path.",
        "status": "HTTP status of the recorded answer.",
        "body": (
            "The answer's body (JSON text); without `metadata` when `metadata-location` is "
            "set (the document is re-read from there on replay)."
        ),
        "metadata-location": "For table and view answers: their metadata file, else null.",
        "recorded-at-ms": "When it was recorded (epoch ms).",
    },
    "icelog.idempotency-key.rerecorded.v1": {
        "key": "The Idempotency-Key (a UUID).",
        "method": "HTTP method of the request.",
        "path": "Request path.",
        "status": "HTTP status of the new answer.",
        "body": "The new answer's body (JSON text), as for `recorded`.",
        "metadata-location": "For table and view answers: their metadata file, else null.",
        "recorded-at-ms": "When it was recorded (epoch ms).",
    },
    "icelog.audit.head-recorded.v1": {
        "position": "Log position of the newest chained event.",
        "link": "The chain's link at that position: hex SHA-256 (see docs/audit.md).",
    },
    "icelog.server.bootstrapped.v1": {
        "is-operator": "Whether the bootstrapping user asked to be the operator.",
    },
    "icelog.user.provisioned.v1": {
        "user-id": "`oidc~<subject>`: the provider's subject (`oid`, `sub`, or "
        "ICELOG_OPENID_SUBJECT_CLAIM).",
        "name": "Display name from the token (`name`, given and family name, ...).",
        "email": "E-mail from the token (`email`, or `upn` / `preferred_username` with an @).",
        "user-type": "`human` or `application`.",
        "how": "Lakekeeper's `last-updated-with`: `config-call-creation` or `create-endpoint`.",
    },
    "icelog.user.updated.v1": {
        "user-id": "`oidc~<subject>`.",
        "name": "The new display name.",
        "email": "The new e-mail (null: none).",
        "user-type": "`human` or `application`.",
        "how": "`config-call-creation` or `update-endpoint`.",
    },
    "icelog.user.deleted.v1": {"user-id": "`oidc~<subject>`."},
    "icelog.grants.started.v1": {
        "object-kind": "server, project, warehouse, namespace, table, view or role.",
        "object-id": "The object's id (the server's: its fixed id).",
    },
    "icelog.grants.granted.v1": {
        "object-kind": "server, project, warehouse, namespace, table, view or role.",
        "object-id": "The object's id.",
        "relation": "Lakekeeper's relation: ownership, select, modify, assignee, ...",
        "principal-kind": "`user` or `role`.",
        "principal-id": "`oidc~<subject>` or the role's id.",
    },
    "icelog.grants.revoked.v1": {
        "object-kind": "As in `granted`.",
        "object-id": "The object's id.",
        "relation": "The relation taken back.",
        "principal-kind": "`user` or `role`.",
        "principal-id": "`oidc~<subject>` or the role's id.",
    },
    "icelog.role.created.v1": {
        "project-id": "The role's project.",
        "name": "Unique in the project.",
        "description": "Free text, or null.",
    },
    "icelog.role.updated.v1": {"name": "The new name.", "description": "Free text, or null."},
    "icelog.storage-roots.started.v1": {
        "roots": "Warehouse id → storage root (`file:///…` resolved, or `s3://bucket/prefix`).",
    },
    "icelog.storage-roots.root-claimed.v1": {
        "location": "The warehouse's storage root (a `file` root as the system resolves it).",
    },
}

# When one example is better than the first one of its type.
PREFER: dict[str, Callable[[dict[str, Any]], bool]] = {
    "io.icelog.name-claim.claimed.v1": lambda e: e["data"]["kind"] == "table",
    "io.icelog.table.expired.v1": lambda e: (
        e["data"]["reason"] == "expired" and e["data"]["purge-task-id"] is not None
    ),
    "io.icelog.task.scheduled.v1": lambda e: e["data"]["queue"] == "tabular-purge",
    "io.icelog.task.succeeded.v1": lambda e: "deleted-files" in e["data"]["result"],
    "io.icelog.project.created.v1": lambda e: e["name"] != "default",
    "io.icelog.warehouse.created.v1": lambda e: e["name"] != "default",
}

# Bookkeeping most consumers ignore (whole aggregates, or single event types).
INTERNAL_AGGREGATES = ("name-claim", "idempotency-key", "server")
BOOKKEEPING_TYPES = (
    "namespace.child-added",
    "namespace.child-removed",
    "warehouse.namespace-added",
    "warehouse.namespace-removed",
    "project.warehouse-added",
    "project.warehouse-removed",
)

# -------------------------------------------------------------------------------------------
# Rendering
# -------------------------------------------------------------------------------------------

OPTIONAL_ATTRIBUTES = (
    "subject",
    "warehouseid",
    "projectid",
    "tabularid",
    "namespace",
    "name",
    "actor",
    "traceid",
)


def choose_examples(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """type → the example: the first event of the type, or the first one PREFER likes."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_type.setdefault(event["type"], []).append(event)
    chosen = {}
    for type_, found in by_type.items():
        prefer = PREFER.get(type_)
        liked = [e for e in found if prefer(e)] if prefer else []
        chosen[type_] = (liked or found)[0]
    return chosen


def json_type(hint: Any) -> str:
    if hint is type(None):
        return "null"
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(json_type(arg) for arg in typing.get_args(hint))
    if origin is list:
        (item,) = typing.get_args(hint)
        return f"array of {json_type(item)}s"
    if origin is dict or hint is dict:
        return "object"
    names = {str: "string", int: "integer", bool: "boolean", uuid.UUID: "UUID string"}
    return names.get(hint, "any")


# Added to every event's data by publishers.cloud_events.event_data (not event fields).
ADDED_DATA_TYPES = {"aggregate-id": "UUID string", "aggregate-version": "integer"}


def field_types(cls: type[Any]) -> dict[str, str]:
    hints = typing.get_type_hints(cls)
    found = {name.replace("_", "-"): json_type(hint) for name, hint in hints.items()}
    return {**found, **ADDED_DATA_TYPES}


def abbreviate_metadata(document: Any) -> Any:
    """Long members of a metadata document become "…" (the only abbreviation allowed)."""
    if not isinstance(document, dict):
        return document
    short: dict[str, Any] = {}
    for key, value in document.items():
        if isinstance(value, (list, dict)) and len(json.dumps(value)) > 240:
            short[key] = [ELLIPSIS] if isinstance(value, list) else {ELLIPSIS: ELLIPSIS}
        else:
            short[key] = value
    return short


def example_json(event: dict[str, Any]) -> str:
    shown = dict(event)
    if "metadata" in event["data"]:
        data = event["data"]
        shown["data"] = {**data, "metadata": abbreviate_metadata(data["metadata"])}
    return pretty(shown)


def pretty(value: Any, indent: int = 0, width: int = 100) -> str:
    """JSON, indented by 2, with containers that fit on their line kept on one line."""
    flat = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, (dict, list)) or not value or indent + len(flat) <= width - 20:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [
            f"{pad}{json.dumps(k, ensure_ascii=False)}: {pretty(v, indent + 2, width)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + pretty(v, indent + 2, width) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def anchor(heading: str) -> str:
    return "".join(c for c in heading.lower() if c.isalnum() or c in "-_ ").replace(" ", "-")


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def presence_table(events: list[dict[str, Any]], aggregates: list[str]) -> list[str]:
    lines = [
        "| aggregate | " + " | ".join(f"`{a}`" for a in OPTIONAL_ATTRIBUTES) + " |",
        "|---|" + "---|" * len(OPTIONAL_ATTRIBUTES),
    ]
    for aggregate in aggregates:
        mine = [e for e in events if aggregate_of(e["type"].removeprefix("io.")) == aggregate]
        row = []
        for attribute in OPTIONAL_ATTRIBUTES:
            have = sum(1 for e in mine if attribute in e)
            row.append("always" if have == len(mine) else "sometimes" if have else "—")
        lines.append(f"| {aggregate} | " + " | ".join(row) + " |")
    return lines


# Event types older releases wrote and this one only reads: no scenario produces them.
LEGACY_TOPICS = (
    "icelog.idempotency-key.recorded.v1",
    "icelog.idempotency-key.rerecorded.v1",
    "icelog.namespace.child-added.v1",
    "icelog.namespace.child-removed.v1",
)


def render(events: list[dict[str, Any]], classes: dict[str, type[Any]]) -> str:
    examples = choose_examples(events)
    problems = []
    for topic, cls in sorted(classes.items()):
        type_ = "io." + topic
        if topic in LEGACY_TOPICS:
            if topic not in WHEN:
                problems.append(f"{topic} ({cls.__qualname__}): no WHEN text")
            continue
        if type_ not in examples:
            problems.append(f"{topic}: the scenario produced no such event")
            continue
        if topic not in WHEN:
            problems.append(f"{topic} ({cls.__qualname__}): no WHEN text")
        for key in examples[type_]["data"]:
            if key not in FIELDS.get(topic, {}) and key not in COMMON_FIELDS:
                problems.append(f"{topic}: data field {key!r} has no description")
        if aggregate_of(topic) not in AGGREGATES:
            problems.append(f"{topic}: aggregate {aggregate_of(topic)!r} not in AGGREGATES")
    if problems:
        raise SystemExit("cannot document every event:\n  " + "\n  ".join(problems))

    order = list(AGGREGATES)
    topics = sorted(
        classes,
        key=lambda t: (order.index(aggregate_of(t)), list(WHEN).index(t)),
    )
    out = [preamble(events, examples, order, topics)]
    for aggregate in order:
        title, about = AGGREGATES[aggregate]
        mine = [t for t in topics if aggregate_of(t) == aggregate]
        out += [f"## {title}", "", about, ""]
        for topic in mine:
            if topic in LEGACY_TOPICS:
                out += legacy_section(topic, classes[topic])
            else:
                out += section(topic, classes[topic], examples["io." + topic])
    return "\n".join(out).rstrip() + "\n"


def legacy_section(topic: str, cls: type[Any]) -> list[str]:
    fields = ", ".join(f"`{key}`" for key in FIELDS.get(topic, {}))
    return [
        f"### io.{topic}",
        "",
        f"class `{cls.__module__}.{cls.__qualname__}` · no longer appended",
        "",
        WHEN[topic],
        "",
        f"Data fields: {fields}." if fields else "No data fields.",
        "",
    ]


def section(topic: str, cls: type[Any], example: dict[str, Any]) -> list[str]:
    type_ = "io." + topic
    types_ = field_types(cls)
    lines = [
        f"### {type_}",
        "",
        f"NATS subject `{PublishSettings().nats_subject_prefix}.{topic.removeprefix('icelog.')}`"
        f" · class `{cls.__module__}.{cls.__qualname__}`",
        "",
        WHEN[topic],
        "",
    ]
    data = example["data"]
    if data:
        lines += ["| data field | type | meaning |", "|---|---|---|"]
        for key in data:
            meaning = FIELDS.get(topic, {}).get(key) or COMMON_FIELDS[key]
            lines.append(f"| `{key}` | {types_.get(key, 'any')} | {cell(meaning)} |")
    else:
        lines.append("No data fields (`data` is `{}`).")
    lines += ["", "```json", example_json(example), "```", ""]
    return lines


ENVELOPE: list[tuple[str, str]] = [
    ("specversion", "CloudEvents version."),
    (
        "id",
        "uuid5 of (aggregate id, aggregate version): the same stored event always gets the same "
        "id — in every re-send, on every sink, in `icelog events tail`. "
        "**De-duplicate by `id`.**",
    ),
    ("source", "The catalog: ICELOG_EVENTS_SOURCE."),
    (
        "type",
        "`io.icelog.<aggregate>.<event>.v<N>`: `io.` + the topic the event is stored under. "
        "The version is part of the type.",
    ),
    ("time", "When the event happened (RFC 3339, UTC)."),
    ("datacontenttype", "`data` is a JSON object."),
    (
        "subject",
        "What it is about: `ns.table` / `ns.view`, the dotted namespace, the warehouse or "
        "project name, the task id (see each group below).",
    ),
    (
        "sequence",
        "The event's position in the log, zero-padded to 20 digits so that it also sorts as "
        "text. Increases in log order; numbers may be skipped.",
    ),
    ("aggregateid", "The aggregate (table, view, namespace, …) whose event it is."),
    (
        "version",
        "The aggregate's version after this event (an integer): 1 for its first event, then "
        "+1 per event of that aggregate.",
    ),
    ("warehouseid", "The warehouse it belongs to (also the REST `prefix`)."),
    ("projectid", "The warehouse's project."),
    ("tabularid", "The table or view (for tasks: the table or view the task works on)."),
    ("namespace", "Dotted namespace, as of the event."),
    ("name", "Table, view, warehouse or project name, as of the event."),
    (
        "actor",
        "Who made the change: `anonymous` for unauthenticated requests, `system` for what the "
        "server does at its first start, `system:task-worker` for background tasks.",
    ),
    (
        "traceid",
        "The request id: the request's `X-Request-Id` header, or one generated per request; "
        "`task:<task id>` for background tasks. Every event one request appends has the same "
        "`traceid`.",
    ),
    (
        "data",
        "Every field of the event, keys in kebab-case, plus `aggregate-id` and "
        "`aggregate-version`: a consumer needs nothing else (a commit carries its "
        "requirements, updates, previous and new metadata location).",
    ),
]

SETTINGS: list[tuple[str, Callable[[PublishSettings], str], str]] = [
    (
        "ICELOG_PUBLISH",
        lambda d: ",".join(d.run_in_serve) or "empty",
        "Relays that `icelog serve` runs: `nats`, `kafka` or `nats,kafka`.",
    ),
    ("ICELOG_EVENTS_SOURCE", lambda d: f"`{d.source}`", "The CloudEvents `source`."),
    (
        "ICELOG_PUBLISH_BATCH_SIZE",
        lambda d: f"`{d.batch_size}`",
        "Events read and sent per batch (≥ 1).",
    ),
    (
        "ICELOG_PUBLISH_LEASE_SECONDS",
        lambda d: f"`{_num(d.lease_seconds)}`",
        "A relay's lease on its sink (≥ 1): another relay takes over this long after the "
        "holder stopped renewing it.",
    ),
    (
        "ICELOG_NATS_URL",
        lambda d: f"`{','.join(d.nats_urls)}`",
        "NATS server(s), comma-separated, `nats://` or `tls://`.",
    ),
    (
        "ICELOG_NATS_STREAM",
        lambda d: f"`{d.nats_stream}`",
        "JetStream stream (letters, digits, `-`, `_`).",
    ),
    (
        "ICELOG_NATS_SUBJECT_PREFIX",
        lambda d: f"`{d.nats_subject_prefix}`",
        "Subject prefix: dot-separated tokens, no wildcards.",
    ),
    (
        "ICELOG_NATS_DUPLICATE_WINDOW_SECONDS",
        lambda d: f"`{_num(d.nats_duplicate_window_seconds)}`",
        "Duplicate window of the stream when the relay creates it (≥ 1).",
    ),
    (
        "ICELOG_KAFKA_BOOTSTRAP_SERVERS",
        lambda d: f"`{d.kafka_bootstrap_servers}`" if d.kafka_bootstrap_servers else "none",
        "Kafka brokers (`host:port,…`); required for the `kafka` sink.",
    ),
    ("ICELOG_KAFKA_TOPIC", lambda d: f"`{d.kafka_topic}`", "Kafka topic."),
    (
        "ICELOG_KAFKA_CONFIG",
        lambda d: f"`{json.dumps(d.kafka_config)}`",
        "More librdkafka producer settings, as a JSON object.",
    ),
]

METRICS: list[tuple[str, str]] = [
    ("icelog_log_head_position", "Position of the newest event in the log."),
    ('icelog_publisher_position{{sink="nats:{stream}"}}', "Last position the sink acknowledged."),
    ("icelog_publisher_lag_events{{sink=…}}", "Events not yet acknowledged by the sink."),
    (
        "icelog_publisher_lag_seconds{{sink=…}}",
        "Age of the oldest event not yet acknowledged (0 when caught up).",
    ),
]


def table_rows(rows: list[tuple[str, ...]]) -> str:
    return "\n".join("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)


def preamble(
    events: list[dict[str, Any]],
    examples: dict[str, dict[str, Any]],
    aggregates: list[str],
    topics: list[str],
) -> str:
    d = PublishSettings()
    commit = examples["io.icelog.table.committed.v1"]
    prefix = d.nats_subject_prefix

    def ex(attribute: str) -> str:
        value = commit.get(attribute)
        return f"`{value}`" if value is not None else "—"

    index = []
    for aggregate in aggregates:
        title = AGGREGATES[aggregate][0]
        links = [
            f"[`{t.removeprefix('icelog.' + aggregate + '.')}`](#{anchor('io.' + t)})"
            for t in topics
            if aggregate_of(t) == aggregate
        ]
        index.append(f"| {title} | {' · '.join(links)} |")
    envelope = table_rows(
        [
            (f"`{attribute}`", ex(attribute) if attribute != "data" else "", meaning)
            for attribute, meaning in ENVELOPE
        ]
    )
    settings = table_rows(
        [(f"`{name}`", default(d), meaning) for name, default, meaning in SETTINGS]
    )
    metrics = table_rows(
        [(f"`{name.format(stream=d.nats_stream)}`", meaning) for name, meaning in METRICS]
    )
    window = _num(d.nats_duplicate_window_seconds)
    internal = ", ".join(f"`{a}.*`" for a in INTERNAL_AGGREGATES)
    bookkeeping = ", ".join(f"`{t}`" for t in BOOKKEEPING_TYPES)
    presence = "\n".join(presence_table(events, aggregates))
    return f"""# Change events

Every change to the catalog is a domain event in icelog's append-only log. A **relay** follows the
log and publishes each stored event, in log order, as one [CloudEvents 1.0](https://github.com/cloudevents/spec/blob/v1.0.2/cloudevents/spec.md)
event in *structured* JSON mode (the whole event is one JSON document) to NATS JetStream and/or
Kafka. `icelog events tail --json` prints exactly the same documents straight from the database.

This page is generated by `scripts/events_doc.py`: it runs a scratch catalog, drives it through
the REST and management APIs until every kind of event has happened, and maps the stored events
as the relay does. All {len(topics)} event types are below, each with a real example (ids and
times are real; requests were anonymous, hence `"actor": "anonymous"`; long metadata documents
are shortened with `…`).

- [Envelope](#envelope) · [Delivery guarantees](#delivery-guarantees) ·
  [NATS JetStream](#nats-jetstream) · [Kafka](#kafka) · [Settings](#settings) ·
  [Running the relays](#running-the-relays) · [Lag metrics](#lag-metrics) ·
  [icelog events tail](#icelog-events-tail) · [Which events to consume](#which-events-to-consume) ·
  [The Iceberg events API](#the-iceberg-events-api)

| events | types |
|---|---|
{chr(10).join(index)}

## Envelope

| attribute | example (a `table.committed`) | meaning |
|---|---|---|
{envelope}

Context attributes (`subject` … `name`) describe the event **as of that event**: after
`table.renamed` they carry the new name, and an event is never re-labelled later.

**Extension names.** CloudEvents allows only lower-case letters and digits (`[a-z0-9]`) in
attribute names, so the extensions are `warehouseid`, `tabularid`, `traceid`, … without hyphens.
Lakekeeper publishes hyphenated names (`warehouse-id`, `tabular-id`, `trace-id`,
`sequence-number`, `tabular-type`, `prefix`, `num-events`) that strict CloudEvents SDKs reject.
Consumers moving from Lakekeeper map `warehouse-id` → `warehouseid` (which is also the REST
`prefix`), `tabular-id` → `tabularid`, `trace-id` → `traceid`, `sequence-number` → `sequence`
(a zero-padded string here); `tabular-type` is in `type` (`io.icelog.table.…` or
`io.icelog.view.…`); `name`, `namespace` and `actor` keep their names. `data` is icelog's own.

Which context attributes each aggregate's events carry (from the example run):

{presence}

(`traceid` is missing on what the server appends at its first start, which has no request. Only
`project.created` and `project.renamed` carry a project's `subject` and `name`; name claims
other than `claimed` have their claim id as `subject`.)

## Delivery guarantees

- **At least once.** The relay advances its durable position (stored per sink in the catalog's
  database) only after the broker acknowledged the whole batch. A failed send is retried from
  the same position; a relay that dies between the broker's acknowledgement and storing the
  position sends the batch again when it (or another relay) takes over. Nothing is lost;
  events can come twice.
- **De-duplicate by `id`.** A re-sent event has the same `id` (and `sequence`). JetStream itself
  drops re-sends whose `Nats-Msg-Id` it saw within the stream's duplicate window
  (ICELOG_NATS_DUPLICATE_WINDOW_SECONDS when the relay creates the stream); consumers should
  still de-duplicate — a re-send after the window, a redelivery of an unacknowledged message,
  or Kafka (which has no such window) can show an event twice. Keeping the ids of the last few
  thousand events is enough, or, per aggregate, the highest `version` seen.
- **Order.** Events are published in log order, so each aggregate's events arrive in `version`
  order: a table's create before its commits, its commits in commit order. On NATS all events
  go to one stream in log order; on Kafka each aggregate's events share a partition (key =
  aggregate id), and there is no order across partitions.
- **`sequence` is the log position.** When the broker fails in the middle of a batch, it may have
  stored some of the batch's messages but not others; the retry then stores the missing ones
  after later ones. So in rare cases, after a broker outage, re-sent events arrive out of order.
  Consumers that need strict order restore it with `sequence` (or, per aggregate, `version`).
- Only committed events are published (the relay reads what the log has stored), a few tens of
  milliseconds after the commit when the relay keeps up.
- Any number of relays may run for a sink (for availability): the one holding the sink's lease
  (ICELOG_PUBLISH_LEASE_SECONDS) publishes, the others wait and take over when it stops
  renewing it.

## NATS JetStream

- **Stream** ICELOG_NATS_STREAM (default `{d.nats_stream}`), capturing `<prefix>.>`. The relay
  creates it when it does not exist (the server's defaults for storage, limits and retention;
  duplicate window ICELOG_NATS_DUPLICATE_WINDOW_SECONDS = {window} s).
  An existing stream is used as it is (its duplicate window and retention are not changed) but
  must capture `<prefix>.>`, or the relay refuses to start. Set retention (`max-age`,
  `max-bytes`) with the `nats` CLI as your consumers need.
- **Subjects**: one per event type, `<prefix>.<aggregate>.<event>.v<N>`, with
  ICELOG_NATS_SUBJECT_PREFIX (default `{prefix}`): `{prefix}.table.committed.v1`,
  `{prefix}.view.replaced.v1`, … Filter with wildcards: `{prefix}.table.>` (every table event),
  `{prefix}.*.dropped.v1`.
- **Header** `Nats-Msg-Id`: the CloudEvent `id` (JetStream de-duplication).
- **Body**: the CloudEvent as JSON (UTF-8).
- The relay's position is stored under the sink name `nats:<stream>`: a new stream name starts
  from the beginning of the log (every event since the catalog was created is published).
- Give every catalog its own stream. Ids are unique per catalog (per `source`) only: the
  server's and the default project's first events, for instance, have the same `id` in every
  catalog, so in a shared stream JetStream would drop one catalog's event as a duplicate of the
  other's.
- A complete consumer (durable pull consumer, explicit acks, de-duplication):
  [`examples/nats_consumer.py`](../examples/nats_consumer.py).

## Kafka

- **Topic** ICELOG_KAFKA_TOPIC (default `{d.kafka_topic}`): every event type in one topic. The
  relay does not create it; create it (or let the broker auto-create it) with the partitions and
  retention you need.
- **Key**: the aggregate id (`aggregateid`, UTF-8), so each aggregate's events stay in one
  partition, in order.
- **Value**: the CloudEvent as JSON. **Headers**: `ce_id` = the CloudEvent `id`,
  `content-type` = `application/cloudevents+json`.
- The producer is idempotent with `acks=all` (not overridable). ICELOG_KAFKA_CONFIG adds any other
  librdkafka setting as a JSON object, e.g. `{{"security.protocol": "SSL", "compression.type":
  "zstd"}}`; keep credentials out of files you commit.
- The position is stored under `kafka:<topic>`.

## Settings

| setting | default | meaning |
|---|---|---|
{settings}

Malformed values stop the server at start-up with a message naming the setting; a broker that is
unreachable when a relay starts inside `icelog serve` is retried with back-off (the catalog keeps
serving), while `icelog publish` exits with status 2.

## Running the relays

```sh
# inside the catalog server
ICELOG_PUBLISH=nats ICELOG_NATS_URL=nats://127.0.0.1:4222 icelog serve

# or as a process of its own (one sink each; stops on SIGTERM/SIGINT)
icelog publish nats
icelog publish kafka
```

Both read the same database as the catalog (ICELOG_DATA_DIR / ICELOG_DATABASE_URL). Relays in
several processes or replicas are safe: one publishes per sink at a time.

## Lag metrics

`GET /metrics` (Prometheus text) reports, computed from the database at scrape time — so any
replica reports every relay, wherever it runs:

| metric | meaning |
|---|---|
{metrics}

A relay that is down shows as a growing `icelog_publisher_lag_seconds`; alert on it (e.g. above
60 s for 5 minutes).

## icelog events tail

```sh
icelog events tail                   # the last 20 events, one line each
icelog events tail -f                # ... and keep following
icelog events tail -n 100 --type table.committed
icelog events tail --after 12345     # everything after log position 12345
icelog events tail --json            # the CloudEvents themselves, one JSON document per line
```

It reads the log from the database (the same settings as `icelog serve`), not from a broker, so
it works without any relay. A line shows the position, `time`, the type without `io.icelog.`,
the warehouse's name (`-` for events outside any warehouse: name claims, projects, users),
`subject` and `actor`; `--type` keeps types containing the text. The warehouse's name is the
one the log last showed on the way, else the one it has now; `--json` carries its id
(`warehouseid`), as every sink receives it.

## Which events to consume

Consumers that follow **tables and views** (lineage, cache invalidation, audit, replication)
need `table.*` and `view.*`, perhaps `namespace.*` and `warehouse.*`. The rest is internal
bookkeeping most consumers ignore:

- {internal}: uniqueness of names, idempotency-key replays, the server's bootstrap;
- {bookkeeping}: counters that make concurrent drops safe (the interesting event —
  `warehouse.created`, … — is in the same append; the two `namespace.child-*` types are
  found only in logs written before ADR 0018);
- `task.*`: the background work behind soft delete and purge; the outcomes that matter to
  consumers are also `table.expired`, `table.purged`, `view.expired`. Useful for operations.

On NATS, subscribe to `{prefix}.table.>` and `{prefix}.view.>` and nothing else arrives.

## The Iceberg events API

The same changes are also served by the catalog itself, as the Iceberg REST events API of
[apache/iceberg PR #12584](https://github.com/apache/iceberg/pull/12584) (not yet in a released
spec): `POST /catalog/v1/{{prefix}}/events`, advertised in `GET /v1/config` `endpoints`.

| | CloudEvents relays (above) | Iceberg events API |
|---|---|---|
| delivery | pushed to NATS / Kafka, at least once | pulled, page by page |
| what | every stored event, internal ones too | each catalog change, as an operation |
| resume | the broker's consumer position | the last page's `continuation-token` |
| when | many consumers, low latency, a broker | syncs, federation, workflows, no broker |

Ids relate one to one: an event's `event-id` is the CloudEvents `id` of the same change
(uuid5 of the aggregate and its version, ADR 0015), so a consumer of both de-duplicates across
them. Standard operations: `create-table`, `register-table`, `update-table` (one per table a
commit or transaction changed, with all its `updates` and `requirements`), `rename-table`,
`drop-table`, the same for views, `create-namespace`, `update-namespace-properties`,
`drop-namespace`; create, register and update also carry `metadata-location`. icelog's own
changes are `x-icelog.*` operations (soft drop, undrop, expiry, purge, protection, register
view, the warehouse's and its project's changes, grants and revokes on what the warehouse
holds); clients that do not know them skip them,
as the proposal says. Events of one request share `request-id`; `request-event-count` says
how many there are.

Filters (combined with AND): `operation-types`, `catalog-objects-by-name` (level by level:
`["acc"]` matches `acc`, `acc.tax` and `acc.tax.paid`, not `accounting`; a rename matches by
either name), `catalog-objects-by-uuid`, `object-types`, `since-timestamp-ms` (first request
only), and the custom filter `x-icelog.actor`. The token carries the position and the filters:
later requests may repeat the same filters or send none. A page looks at no more than 10,000
events of the warehouse, so it may come back short, even empty, while more follow; an empty
page means caught up, and its token picks up what comes next.

Retention: `ICELOG_EVENTS_RETENTION_DAYS` (default `0`, everything) is a window on this
endpoint — the log itself keeps every event. A token or `since-timestamp-ms` that would skip an
event older than the window answers **410 Gone**: start again without it (a request without
either starts at the window).

The example needs `httpx` (`pip install httpx`, or `pip install 'icelog[clients]'`):

```python
import httpx  # follow a warehouse's changes; save the token to resume after a restart

base = "http://127.0.0.1:8181/catalog/v1"
config = httpx.get(f"{{base}}/config", params={{"warehouse": "default"}}).json()
prefix = config["overrides"]["prefix"]
ask = {{"page-size": 100, "object-types": ["table"]}}
while True:
    page = httpx.post(f"{{base}}/{{prefix}}/events", json=ask).json()
    for event in page["events"]:
        op = event["operation"]
        print(event["event-id"], op["operation-type"], op.get("metadata-location"))
    ask = {{"continuation-token": page["continuation-token"]}}
    if not page["events"]:
        break  # caught up: ask again later with the same token
```

With authentication on, the endpoint needs `describe` on the warehouse; grants and
revokes are left out for callers who may not read its assignments (`pass_grants`).

# Event reference
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="file, or - for stdout")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help=f"scratch directory for the catalog (default {DEFAULT_WORKDIR}; replaced)",
    )
    parser.add_argument("--dump", action="store_true", help="print every event as JSON lines")
    args = parser.parse_args(argv)
    classes = stored_event_classes()
    events = collect_events(args.workdir)
    if args.dump:
        for event in events:
            print(json.dumps(event, ensure_ascii=False))
        return 0
    document = render(events, classes)
    if args.output == "-":
        sys.stdout.write(document)
    else:
        Path(args.output).write_text(document, encoding="utf-8")
        print(f"wrote {args.output}: {len(classes)} event types from {len(events)} events")
    return 0


if __name__ == "__main__":
    sys.exit(main())

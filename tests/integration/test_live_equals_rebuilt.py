"""The log is the truth, for every kind of event: the catalog driven through every event
type, then its read model rebuilt from the log, equals the live one row by row.

The live read model is written in the append's transaction (the statement-at-a-time
writer on SQLite, the one-round-trip function on PostgreSQL where it applies); the
rebuild folds the log with no rendered documents. Both run the one fold
(projections/fold.py): this proves its two executions agree. The events the test
appended are checked against every event class of the domain, so an event type added
without a step here fails it.
"""

from __future__ import annotations

import importlib
import pkgutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.domain import Aggregate

from icelog import domain
from icelog.api.audit import Chainer
from icelog.domain.context import RequestContext
from icelog.domain.idempotency import IdempotencyRecord, idempotency_id
from icelog.domain.namespace import Namespace
from icelog.domain.warehouse import Warehouse
from icelog.projections.rebuild import differences, rebuild
from icelog.projections.schema import READ_MODEL_TABLES
from tests.integration.conftest import SCHEMA, Authed
from tests.integration.test_functions_api import definition
from tests.integration.test_views_api import VIEW_SCHEMA, version
from tests.support.callers import Caller

MGMT = "/management/v1"


def _subclasses(cls: Any) -> Iterator[Any]:
    sub: Any
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def every_event_topic() -> set[str]:
    """The topic of every event class the domain's aggregates declare."""
    for module in pkgutil.iter_modules(domain.__path__):
        importlib.import_module(f"{domain.__name__}.{module.name}")
    return {
        event.__dict__["TOPIC"]
        for aggregate in _subclasses(Aggregate)
        for event in _subclasses(aggregate.Event)
        if "TOPIC" in event.__dict__
    }


class Driver:
    """Alice (the admin) drives the catalog; `ok` asserts each call succeeded."""

    def __init__(self, authed: Authed, alice: Caller) -> None:
        self.authed = authed
        self.alice = alice
        config = alice.ok("GET", "/catalog/v1/config", params={"warehouse": "default"})
        self.prefix = str(config["overrides"]["prefix"])
        self.cat = f"/catalog/v1/{self.prefix}"
        self.wh = f"{MGMT}/warehouse/{self.prefix}"

    def ok(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        return self.alice.ok(method, path, body, **kwargs)

    def namespace_id(self, name: str) -> str:
        found = self.ok("GET", f"{self.wh}/namespace-id", params={"namespace": name})
        return str(found["namespace-id"])

    def table(self, ns: str, name: str) -> str:
        made = self.ok(
            "POST", f"{self.cat}/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA}
        )
        return str(made["metadata"]["table-uuid"])

    def commit(self, ns: str, name: str, **properties: str) -> Any:
        updates = [{"action": "set-properties", "updates": properties or {"k": "v"}}]
        return self.ok(
            "POST",
            f"{self.cat}/namespaces/{ns}/tables/{name}",
            {"requirements": [], "updates": updates},
        )

    def view(self, ns: str, name: str) -> str:
        body = {
            "name": name,
            "schema": VIEW_SCHEMA,
            "view-version": version("SELECT 1"),
            "properties": {},
        }
        made = self.ok("POST", f"{self.cat}/namespaces/{ns}/views", body)
        return str(made["metadata"]["view-uuid"])

    def profile(self, profile: dict[str, Any]) -> None:
        self.ok("POST", f"{self.wh}/delete-profile", {"delete-profile": profile})

    def protect(self, kind: str, object_id: str, protected: bool) -> None:
        path = self.wh if kind == "warehouse" else f"{self.wh}/{kind}/{object_id}"
        self.ok("POST", f"{path}/protection", {"protected": protected})

    def undrop(self, kind: str, object_id: str) -> None:
        targets = {"targets": [{"type": kind, "id": object_id}]}
        self.ok("POST", f"{self.wh}/deleted-tabulars/undrop", targets)

    def run_tasks(self) -> int:
        return self.authed.services.tasks.run_until_idle()


def _management(d: Driver, tmp_path: Path) -> None:
    """Projects, warehouses (with their storage roots), protection of a warehouse."""
    project = d.ok("POST", f"{MGMT}/project", {"project-name": "p2"})["project-id"]
    d.ok("POST", f"{MGMT}/project/{project}/rename", {"new-name": "p3"})
    admin = {"writes": [{"type": "project_admin", "user": d.alice.id}]}
    d.ok("POST", f"{MGMT}/permissions/project/{project}/assignments", admin)
    storage = {"type": "file", "base-location": f"file://{tmp_path / 'w2'}"}
    made = d.ok(
        "POST",
        f"{MGMT}/warehouse",
        {"warehouse-name": "w2", "storage-profile": storage},
        headers={"x-project-id": project},
    )
    w2 = f"{MGMT}/warehouse/{made['warehouse-id']}"
    d.ok("POST", f"{w2}/rename", {"new-name": "w3"})
    d.ok("POST", f"{w2}/storage", {"storage-profile": storage})
    d.ok("POST", f"{w2}/protection", {"protected": True})
    d.ok("POST", f"{w2}/protection", {"protected": False})
    d.ok("DELETE", w2)
    d.ok("DELETE", f"{MGMT}/project/{project}")


def _namespaces(d: Driver) -> None:
    """Created, nested, properties, protection, dropped and made again under its name."""
    d.ok("POST", f"{d.cat}/namespaces", {"namespace": ["db"]})
    d.ok("POST", f"{d.cat}/namespaces", {"namespace": ["db", "sub"]})
    d.ok("POST", f"{d.cat}/namespaces/db/properties", {"updates": {"a": "b"}, "removals": []})
    sub = d.namespace_id("db\x1fsub")
    d.protect("namespace", sub, True)
    d.protect("namespace", sub, False)
    d.ok("DELETE", f"{d.cat}/namespaces/db%1Fsub")
    d.ok("POST", f"{d.cat}/namespaces", {"namespace": ["db", "sub"]})


def _tables(d: Driver) -> None:
    """Hard drops (plain, purged, unregistered), register, rename, protection, a name
    claimed again; then soft drops, undrop, expiry and a purge after it."""
    tid = d.table("db", "t")
    d.commit("db", "t")
    d.protect("table", tid, True)
    d.protect("table", tid, False)
    rename = {
        "source": {"namespace": ["db"], "name": "t"},
        "destination": {"namespace": ["db", "sub"], "name": "t2"},
    }
    d.ok("POST", f"{d.cat}/tables/rename", rename)
    location = d.ok("GET", f"{d.cat}/namespaces/db%1Fsub/tables/t2")["metadata-location"]
    d.ok("DELETE", f"{d.cat}/namespaces/db%1Fsub/tables/t2")
    d.ok("POST", f"{d.cat}/namespaces/db/register", {"name": "r", "metadata-location": location})
    d.ok("POST", f"{d.cat}/namespaces/db/tables/r/unregister")
    d.table("db", "t")  # the name claimed again
    d.ok("DELETE", f"{d.cat}/namespaces/db/tables/t", params={"purgeRequested": "true"})
    assert d.run_tasks() >= 1  # the purge
    d.profile({"type": "soft", "expiration-seconds": 3600})
    soft = d.table("db", "soft")
    d.ok("DELETE", f"{d.cat}/namespaces/db/tables/soft")
    d.undrop("table", soft)  # cancels the expiration
    d.profile({"type": "soft", "expiration-seconds": 0})
    d.ok("DELETE", f"{d.cat}/namespaces/db/tables/soft", params={"purgeRequested": "true"})
    assert d.run_tasks() >= 1  # the expiry, then the purge


def _views(d: Driver) -> None:
    d.profile({"type": "hard"})
    vid = d.view("db", "v")
    d.ok(
        "POST",
        f"{d.cat}/namespaces/db/views/v",
        {"updates": [{"action": "set-properties", "updates": {"a": "b"}}]},
    )
    d.protect("view", vid, True)
    d.protect("view", vid, False)
    rename = {
        "source": {"namespace": ["db"], "name": "v"},
        "destination": {"namespace": ["db"], "name": "v2"},
    }
    d.ok("POST", f"{d.cat}/views/rename", rename)
    location = d.ok("GET", f"{d.cat}/namespaces/db/views/v2")["metadata-location"]
    d.ok("DELETE", f"{d.cat}/namespaces/db/views/v2")
    d.ok(
        "POST",
        f"{d.cat}/namespaces/db/register-view",
        {"name": "v3", "metadata-location": location},
    )
    d.profile({"type": "soft", "expiration-seconds": 3600})
    d.ok("DELETE", f"{d.cat}/namespaces/db/views/v3")
    [deleted] = d.ok("GET", f"{d.wh}/deleted-tabulars")["tabulars"]
    d.undrop("view", deleted["id"])
    d.profile({"type": "soft", "expiration-seconds": 0})
    d.ok("DELETE", f"{d.cat}/namespaces/db/views/v3")
    assert d.run_tasks() >= 1  # the expiry
    d.profile({"type": "hard"})


def _functions(d: Driver) -> None:
    base = f"{d.wh}/namespace/{d.namespace_id('db')}/function"
    d.ok("POST", base, {"name": "f", "definitions": [definition()]})
    d.ok("PUT", f"{base}/f", {"definitions": [definition("x + 2")]})
    d.ok("DELETE", f"{base}/f")


def _access(d: Driver, bob: Caller) -> None:
    """Users, roles and grants: given, revoked, ended with their role or user."""
    bob.ok("GET", f"{MGMT}/whoami")  # provisions bob
    d.ok("PUT", f"{MGMT}/user/{bob.id}", {"name": "Robert", "user-type": "human"})
    role = d.ok("POST", f"{MGMT}/role", {"name": "analysts"})["id"]
    d.ok("POST", f"{MGMT}/role/{role}", {"name": "readers", "description": "they read"})
    nid = d.namespace_id("db")
    grants = f"{MGMT}/permissions/namespace/{nid}/assignments"
    d.ok(
        "POST",
        f"{MGMT}/permissions/role/{role}/assignments",
        {"writes": [{"type": "assignee", "user": bob.id}]},
    )
    d.ok(
        "POST",
        grants,
        {"writes": [{"type": "select", "role": role}, {"type": "modify", "user": bob.id}]},
    )
    d.ok("POST", grants, {"deletes": [{"type": "modify", "user": bob.id}]})
    d.ok("DELETE", f"{MGMT}/role/{role}")
    d.ok("DELETE", f"{MGMT}/user/{bob.id}")


def _tasks_and_keys(d: Driver) -> None:
    """Task outcomes the routes reach only through time or failure (a lease taken over,
    a failed attempt), and idempotency keys: claimed, landed, completed, released,
    reclaimed, and the outcome records of an older release."""
    services = d.authed.services
    catalog: Any = services.catalog
    leases = services.tasks.leases
    d.table("db", "doomed")
    d.ok("DELETE", f"{d.cat}/namespaces/db/tables/doomed", params={"purgeRequested": "true"})
    now = int(time.time() * 1000)
    [task_id] = leases.claim("w1", now_ms=now, lease_ms=60_000, limit=10)
    assert catalog.tasks.start_task(UUID(task_id), "w1") is not None
    later = now + 61_000
    assert leases.claim("w2", now_ms=later, lease_ms=60_000, limit=10) == [task_id]
    assert catalog.tasks.start_task(UUID(task_id), "w2") is not None  # w1's attempt abandoned
    catalog.tasks._record_failure(UUID(task_id), "w2", RuntimeError("storage unreachable"))
    # Keys: a commit under a key (claimed, landed, completed), replayed.
    key = {"Idempotency-Key": str(uuid.uuid4())}
    d.ok("POST", f"{d.cat}/namespaces", {"namespace": ["keyed"]}, headers=key)
    d.ok("POST", f"{d.cat}/namespaces", {"namespace": ["keyed"]}, headers=key)
    ctx = RequestContext(actor=d.alice.id, request_id="test")
    claim = {"method": "POST", "path": "/x", "lease_ms": 60_000, "lifetime_ms": 60_000}
    other = str(uuid.uuid4())
    assert catalog.idempotency.claim_idempotency(ctx, key=other, token="a", **claim).claimed
    catalog.idempotency.release_idempotency(ctx, key=other, token="a")
    assert catalog.idempotency.claim_idempotency(
        ctx, key=other, token="b", **claim
    ).claimed  # reclaimed
    # What an older release wrote: an outcome recorded after the request, and again.
    old_key = str(uuid.uuid4())
    outcome = {
        "key": old_key,
        "method": "POST",
        "path": "/x",
        "status": 200,
        "body": "{}",
        "metadata_location": None,
    }
    record = IdempotencyRecord._create(
        IdempotencyRecord.Recorded,
        id=idempotency_id(old_key),
        recorded_at_ms=now,
        actor=d.alice.id,
        request_id="test",
        **outcome,
    )
    record.trigger_event(
        IdempotencyRecord.Rerecorded,
        recorded_at_ms=now + 1,
        actor=d.alice.id,
        request_id="test",
        **outcome,
    )
    catalog.app.save(record)


def _no_longer_appended(d: Driver) -> None:
    """Events the routes no longer append but logs of older releases hold (children of
    namespaces and warehouses), and a storage profile changed by the domain (the route
    needs storage whose settings can change): appended as those releases did."""
    catalog: Any = d.authed.services.catalog
    actor = {"actor": d.alice.id, "request_id": "test"}
    namespace = catalog.app.repository.get(UUID(d.namespace_id("db")))
    child = uuid.uuid4()
    namespace.trigger_event(Namespace.ChildAdded, child_kind="table", child_id=child, **actor)
    namespace.trigger_event(Namespace.ChildRemoved, child_kind="table", child_id=child, **actor)
    warehouse = catalog.app.repository.get(namespace.warehouse_id)
    warehouse.trigger_event(Warehouse.NamespaceAdded, namespace_id=child, **actor)
    warehouse.trigger_event(Warehouse.NamespaceRemoved, namespace_id=child, **actor)
    warehouse.change_storage_profile(dict(warehouse.storage_profile), **actor)
    catalog.app.save_all(namespace, warehouse)


def _leave_some(d: Driver) -> None:
    """A row in every table of the read model, so that no comparison is of empty tables."""
    d.table("db", "kept")
    d.commit("db", "kept", kept="yes")
    d.view("db", "kept_view")
    base = f"{d.wh}/namespace/{d.namespace_id('db')}/function"
    d.ok("POST", base, {"name": "kept_f", "definitions": [definition()]})
    d.ok("POST", f"{MGMT}/role", {"name": "kept"})
    d.profile({"type": "soft", "expiration-seconds": 3600})
    d.table("db", "kept_soft")
    d.ok("DELETE", f"{d.cat}/namespaces/db/tables/kept_soft")


@pytest.fixture
def people(authed: Authed) -> tuple[Caller, Caller]:
    alice, bob = Caller(authed, "alice", "Alice"), Caller(authed, "bob", "Bob")
    alice.ok("POST", f"{MGMT}/bootstrap", {"accept-terms-of-use": True})
    return alice, bob


def test_every_event_type_rebuilds_to_the_live_read_model(
    authed: Authed, people: tuple[Caller, Caller], tmp_path: Path
) -> None:
    alice, bob = people
    d = Driver(authed, alice)
    _management(d, tmp_path)
    _namespaces(d)
    _tables(d)
    _views(d)
    _functions(d)
    _access(d, bob)
    _tasks_and_keys(d)
    _no_longer_appended(d)
    _leave_some(d)
    Chainer(authed.services).round(anchor=True)  # the audit anchor and its head

    covered = {n.topic for n in authed.events()}
    missing = every_event_topic() - covered
    assert not missing, f"event types no step here appends: {sorted(missing)}"

    app = authed.services.catalog.app
    rebuild(app.recorder, app.mapper, "rebuilt_")
    assert differences(app.recorder, "rebuilt_") == []
    # Not vacuous: every table of the read model has rows to compare.
    for table in READ_MODEL_TABLES:
        rows = authed.services.primary.row(f"SELECT count(*) FROM {table}", ())
        assert rows is not None and int(rows[0]) > 0, f"{table} is empty"

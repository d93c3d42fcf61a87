"""Metadata no client could read, 5xx answers and unbounded work.

1. A few metadata updates no client could load (duplicate field names, decimal(99,2), a
   negative field id, a snapshot without a summary operation, bucket[0]): 400, and no
   metadata file is written. (The domain rules themselves are tested in tests/unit.)
2. Deep nesting (schemas and bodies), control characters in query parameters, a directory
   registered, internal errors (typed `CommitStateUnknownException` on commit routes only,
   never leaking the exception), and requests past ICELOG_REQUEST_TIMEOUT_SECONDS (503/504
   typed by route; a commit retried on conflicts stops at the next attempt and never
   appends after its timeout).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from icelog.api.services import Services
from icelog.commands.group_commit import ConcurrentChange
from icelog.domain.json_limits import json_depth
from tests.integration.conftest import SCHEMA, Api
from tests.integration.test_limits import serving
from tests.support import hostile
from tests.support.hostile import (
    BACKENDS,
    ROOT,
    Scene,
    assert_error,
    local_path,
    view_body,
)
from tests.support.in_process import default_prefix, with_table_t

SECRET_DETAIL = "/etc/shadow token=hunter2"  # in an internal error: never in an answer


@pytest.fixture(scope="module", params=BACKENDS)
def scene(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scene]:
    base = tmp_path_factory.mktemp(f"limits-{request.param}")
    yield from hostile.open_scene(request.param, base)


@pytest.fixture
def table(scene: Scene) -> tuple[str, str]:
    """A fresh namespace with a table `t`: (namespace, its metadata-location)."""
    ns = f"ns_{uuid4().hex[:8]}"
    assert scene.api.post("/namespaces", {"namespace": [ns]}).status_code == 200
    created = scene.api.post(f"/namespaces/{ns}/tables", {"name": "t", "schema": SCHEMA})
    assert created.status_code == 200, created.text
    scene.arm()
    return ns, str(created.json()["metadata-location"])


def _armed_namespace(scene: Scene) -> tuple[Api, str]:
    """The scene armed (changes outside the warehouse count from here), then a namespace of
    its own: the scene's catalog and the namespace."""
    scene.arm()
    ns = f"ns_{uuid4().hex[:8]}"
    scene.api.post("/namespaces", {"namespace": [ns]})
    return scene.api, ns


# -- 1. metadata no client could read ------------------------------------------------------------
def _schema(*fields: dict[str, Any], schema_id: int = 1) -> dict[str, Any]:
    return {"type": "struct", "schema-id": schema_id, "fields": list(fields)}


def _field(field_id: int, name: str, type_: Any = "long") -> dict[str, Any]:
    return {"id": field_id, "name": name, "type": type_, "required": False}


UNREADABLE: list[tuple[str, list[dict[str, Any]]]] = [
    (
        "duplicate-field-names",
        [{"action": "add-schema", "schema": _schema(_field(10, "a"), _field(11, "a", "string"))}],
    ),
    (
        "decimal-99-2",
        [{"action": "add-schema", "schema": _schema(_field(10, "d", "decimal(99,2)"))}],
    ),
    ("negative-field-id", [{"action": "add-schema", "schema": _schema(_field(-5, "n"))}]),
    (
        "snapshot-without-operation",
        [
            {
                "action": "add-snapshot",
                "snapshot": {
                    "snapshot-id": 1,
                    "sequence-number": 1,
                    "timestamp-ms": 1_700_000_000_000,
                    "manifest-list": "file:///nowhere/snap-1.avro",
                    "summary": {"added-files": "1"},
                    "schema-id": 0,
                },
            }
        ],
    ),
    (
        "bucket-0",
        [
            {
                "action": "add-spec",
                "spec": {
                    "spec-id": 1,
                    "fields": [
                        {"source-id": 3, "field-id": 1000, "name": "b", "transform": "bucket[0]"}
                    ],
                },
            }
        ],
    ),
]


@pytest.mark.parametrize("updates", [c[1] for c in UNREADABLE], ids=[c[0] for c in UNREADABLE])
def test_metadata_no_client_could_read_is_refused_unwritten(
    scene: Scene, table: tuple[str, str], updates: list[dict[str, Any]]
) -> None:
    ns, location = table
    api = scene.api
    directory = local_path(location).parent
    files = sorted(directory.iterdir())
    response = api.post(f"/namespaces/{ns}/tables/t", {"updates": updates})
    assert_error(response, 400)
    assert sorted(directory.iterdir()) == files, "no metadata file was written"
    assert api.get(f"/namespaces/{ns}/tables/t").json()["metadata-location"] == location
    scene.finish()


# -- 2. nesting -----------------------------------------------------------------------------------
def nested_schema(levels: int) -> dict[str, Any]:
    """A schema of `levels` structs, one inside the other."""
    next_id = iter(range(1, 10 * levels + 10))
    inner: dict[str, Any] = {"type": "struct", "fields": [_field(next(next_id), "leaf")]}
    for n in range(levels - 1):
        inner = {"type": "struct", "fields": [_field(next(next_id), f"s{n}", inner)]}
    return {**inner, "schema-id": 0}


def deepest_accepted_schema() -> dict[str, Any]:
    """The deepest struct nesting whose create-table body is within the 200-level limit."""
    levels = 1
    while json_depth({"name": "x", "schema": nested_schema(levels + 1)}) <= 200:
        levels += 1
    return nested_schema(levels)


@pytest.mark.parametrize("levels", [150, 400])
def test_deep_schemas_are_refused(scene: Scene, levels: int) -> None:
    _, ns = _armed_namespace(scene)
    body = _dumps({"name": "deep", "schema": nested_schema(levels)})
    response = scene.api.client.post(
        scene.api.url(f"/namespaces/{ns}/tables"),
        content=body,
        headers={"content-type": "application/json"},
    )
    assert_error(response, 400)
    assert scene.api.get(f"/namespaces/{ns}/tables/deep").status_code == 404
    scene.finish()


def test_the_deepest_accepted_schema_works_end_to_end(scene: Scene) -> None:
    """A body just within the limit is stored in events, written, served, purged, audited."""
    api, ns = _armed_namespace(scene)
    created = api.post(
        f"/namespaces/{ns}/tables", {"name": "deep", "schema": deepest_accepted_schema()}
    )
    assert created.status_code in (200, 400), created.text
    if created.status_code == 400:
        assert_error(created, 400)
    else:
        assert api.get(f"/namespaces/{ns}/tables/deep").status_code == 200
        commit = api.post(
            f"/namespaces/{ns}/tables/deep",
            {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
        )
        assert commit.status_code == 200, commit.text
        dropped = api.delete(f"/namespaces/{ns}/tables/deep", params={"purgeRequested": "true"})
        assert dropped.status_code == 204
        api.run_tasks()
    scene.finish(verify_log=True)


def _nested_list(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth - 1):
        value = [value]
    return value


def _nested_object(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize("depth", [201, 1000, 5000])
def test_bodies_nested_too_deep_are_refused_on_every_kind_of_route(
    scene: Scene, depth: int
) -> None:
    api, ns = _armed_namespace(scene)
    api.post(f"/namespaces/{ns}/tables", {"name": "t", "schema": SCHEMA})
    before = api.position()
    deep_list, deep_object = _nested_list(depth), _nested_object(depth)
    requests = [
        ("/catalog/v1/namespaces", {"namespace": [ns + "x"], "properties": deep_object}),
        (api.url("/namespaces"), {"namespace": deep_list}),
        (api.url(f"/namespaces/{ns}/tables"), {"name": "u", "schema": deep_object}),
        (api.url(f"/namespaces/{ns}/tables/t"), {"updates": deep_list}),
        (api.url("/transactions/commit"), {"table-changes": deep_list}),
        (api.url(f"/namespaces/{ns}/views"), view_body("v", [ns], properties=deep_object)),
        (api.url(f"/namespaces/{ns}/register"), {"name": "r", "metadata-location": deep_list}),
        (f"{ROOT}/warehouse", {"warehouse-name": "w", "storage-profile": deep_object}),
        (f"{ROOT}/project", {"project-name": deep_list}),
    ]
    for url, body in requests:
        # orjson refuses to write what it reads beyond 254 levels: send the text ourselves.
        content = _dumps(body)
        response = api.client.post(
            url, content=content, headers={"content-type": "application/json"}
        )
        assert response.status_code == 400, f"{url}: {response.status_code} {response.text[:300]}"
        assert_error(response, 400)
    assert api.position() == before, "nothing was appended"
    scene.finish()


def _dumps(value: Any) -> bytes:
    """JSON text of any depth (json.dumps recurses; this does not)."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            out.append(item.text)
        elif isinstance(item, dict):
            out.append("{")
            stack.append(_Raw("}"))
            entries = list(item.items())
            for n, (key, child) in enumerate(reversed(entries)):
                stack.append(child)
                stack.append(_Raw(f'"{key}":'))
                if n < len(entries) - 1:
                    stack.append(_Raw(","))
        elif isinstance(item, list):
            out.append("[")
            stack.append(_Raw("]"))
            for n, child in enumerate(reversed(item)):
                stack.append(child)
                if n < len(item) - 1:
                    stack.append(_Raw(","))
        elif isinstance(item, str):
            out.append('"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"')
        elif item is None:
            out.append("null")
        elif isinstance(item, bool):
            out.append("true" if item else "false")
        else:
            out.append(str(item))
    return "".join(out).encode()


@dataclasses.dataclass(frozen=True)
class _Raw:
    text: str


# -- 2. control characters in query parameters ----------------------------------------------------
CONTROL = ["\x00", "a\x00b", "\x01", "\x1f", "\x7f", "\x85", "2026-01-01T00:00:00\x00"]
EVENT_PARAMETERS = [
    "after", "limit", "warehouse-id", "namespace", "tabular-id", "aggregate-id", "type",
    "actor", "since", "until",
]  # fmt: skip


@pytest.mark.parametrize("parameter", EVENT_PARAMETERS)
def test_control_characters_in_event_log_filters_are_400(scene: Scene, parameter: str) -> None:
    scene.arm()
    failures = []
    for value in CONTROL:
        response = scene.api.client.get(f"{ROOT}/events", params={parameter: value})
        if response.status_code != 400:
            failures.append(f"{value!r}: {response.status_code} {response.text[:200]}")
        else:
            assert_error(response, 400)
    assert failures == [], "\n".join(failures)
    scene.finish()


def test_control_characters_in_other_query_parameters_are_never_5xx(scene: Scene) -> None:
    api, ns = _armed_namespace(scene)
    created = api.post(f"/namespaces/{ns}/tables", {"name": "t", "schema": SCHEMA})
    table_id = created.json()["metadata"]["table-uuid"]
    requests: list[tuple[str, str, str]] = [
        ("GET", "/catalog/v1/config", "warehouse"),
        ("GET", api.url("/namespaces"), "parent"),
        ("GET", api.url("/namespaces"), "pageToken"),
        ("GET", api.url("/namespaces"), "pageSize"),
        ("GET", api.url(f"/namespaces/{ns}/tables"), "pageToken"),
        ("GET", api.url(f"/namespaces/{ns}/tables/t"), "snapshots"),
        ("DELETE", api.url(f"/namespaces/{ns}/tables/nope"), "purgeRequested"),
        ("DELETE", api.url(f"/namespaces/{ns}"), "recursive"),
        ("GET", f"{ROOT}/as-of", "time"),
        ("GET", f"{ROOT}/as-of", "position"),
        ("GET", f"{ROOT}/warehouse/{api.prefix}/deleted-tabulars", "pageToken"),
        ("GET", f"{ROOT}/warehouse/{api.prefix}/deleted-tabulars", "namespaceId"),
        ("GET", f"{ROOT}/warehouse/{api.prefix}/table/{table_id}/history", "after"),
        ("GET", f"{ROOT}/warehouse", "project-id"),
    ]
    failures = []
    for method, url, parameter in requests:
        for value in ("\x00", "a\x00b", "\x1f", "\x85"):
            response = api.client.request(method, url, params={parameter: value})
            if response.status_code >= 500:
                failures.append(f"{method} {url}?{parameter}={value!r}: {response.text[:200]}")
            elif response.status_code >= 400:
                assert_error(response, response.status_code)
    assert failures == [], "\n".join(failures)
    assert api.get(f"/namespaces/{ns}/tables/t").status_code == 200
    scene.finish()


# -- 2. a directory registered ------------------------------------------------------------------
def test_registering_a_directory_is_404_not_500(scene: Scene) -> None:
    """As every other unusable file (test_containment_reads.py)."""
    api, ns = _armed_namespace(scene)
    directory = api.warehouse_dir / ns / "00000-dir.metadata.json"
    directory.mkdir(parents=True)
    for route in ("register", "register-view"):
        response = api.post(
            f"/namespaces/{ns}/{route}", {"name": "d", "metadata-location": f"file://{directory}"}
        )
        assert_error(response, 404, "NotFoundException")
    scene.finish()


# -- 2. internal errors ---------------------------------------------------------------------------
def _boom(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError(f"something broke near {SECRET_DETAIL}")


@dataclasses.dataclass(frozen=True)
class Broken:
    """A route whose handler hits an internal error: `owner.attribute` of Services raises."""

    owner: str  # a dotted path below Services: "catalog.tables", "queries"
    attribute: str
    method: str
    path: str  # below /catalog/v1/{prefix}, or absolute; "{ns}" is the test's namespace
    body: Any
    error_type: str


INTERNAL = "InternalServerError"
UNKNOWN = "CommitStateUnknownException"
TABLE_CHANGE = {"identifier": {"namespace": ["{ns}"], "name": "t"}, "updates": []}
BROKEN: dict[str, Broken] = {
    "list namespaces": Broken("queries", "list_namespaces", "GET", "/namespaces", None, INTERNAL),
    "create namespace": Broken(
        "catalog.namespaces",
        "create_namespace",
        "POST",
        "/namespaces",
        {"namespace": ["z"]},
        INTERNAL,
    ),
    "create table": Broken(
        "catalog.tables",
        "create_table",
        "POST",
        "/namespaces/{ns}/tables",
        {"name": "u", "schema": SCHEMA},
        INTERNAL,
    ),
    "drop table": Broken(
        "catalog.lifecycle", "drop_table", "DELETE", "/namespaces/{ns}/tables/t", None, INTERNAL
    ),
    "register": Broken(
        "catalog.tables",
        "register_table",
        "POST",
        "/namespaces/{ns}/register",
        {"name": "r", "metadata-location": "file:///x/y.metadata.json"},
        INTERNAL,
    ),
    "rename": Broken(
        "catalog.tabulars",
        "rename",
        "POST",
        "/tables/rename",
        {
            "source": {"namespace": ["{ns}"], "name": "t"},
            "destination": {"namespace": ["{ns}"], "name": "t2"},
        },
        INTERNAL,
    ),
    "list warehouses": Broken("queries", "warehouses", "GET", f"{ROOT}/warehouse", None, INTERNAL),
    "table commit": Broken(
        "catalog.tables",
        "commit_table",
        "POST",
        "/namespaces/{ns}/tables/t",
        {"updates": []},
        UNKNOWN,
    ),
    "table commit, no prefix": Broken(
        "catalog.tables",
        "commit_table",
        "POST",
        "/catalog/v1/namespaces/{ns}/tables/t",
        {"updates": []},
        UNKNOWN,
    ),
    "transaction": Broken(
        "catalog.tables",
        "commit_transaction",
        "POST",
        "/transactions/commit",
        {"table-changes": [TABLE_CHANGE]},
        UNKNOWN,
    ),
    "view replace": Broken(
        "catalog.views",
        "replace_view",
        "POST",
        "/namespaces/{ns}/views/v",
        {"updates": []},
        UNKNOWN,
    ),
}


def _owner(services: Services, path: str) -> Any:
    return functools.reduce(getattr, path.split("."), services)


@pytest.mark.parametrize("broken", list(BROKEN.values()), ids=list(BROKEN))
def test_internal_errors_are_typed_by_route_and_leak_nothing(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, broken: Broken
) -> None:
    api = scene.api
    ns = f"ns_{uuid4().hex[:8]}"
    api.post("/namespaces", {"namespace": [ns]})
    api.post(f"/namespaces/{ns}/tables", {"name": "t", "schema": SCHEMA})
    api.post(f"/namespaces/{ns}/views", view_body("v", [ns]))
    scene.arm()
    monkeypatch.setattr(_owner(api.services, broken.owner), broken.attribute, _boom)
    path = broken.path.replace("{ns}", ns)
    absolute = path.split("/")[1] in ("catalog", "management")
    url = path if absolute else api.url(path)
    payload = None if broken.body is None else _fill(broken.body, ns)
    response = api.client.request(broken.method, url, json=payload)
    assert_error(response, 500, broken.error_type)
    assert "hunter2" not in response.text and "shadow" not in response.text
    assert "RuntimeError" not in response.text and "Traceback" not in response.text
    monkeypatch.undo()
    scene.finish()


def _fill(value: Any, ns: str) -> Any:
    if isinstance(value, str):
        return value.replace("{ns}", ns)
    if isinstance(value, list):
        return [_fill(v, ns) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, ns) for k, v in value.items()}
    return value


# -- 2. request timeout and cancellation ----------------------------------------------------------
@pytest.fixture(params=BACKENDS)
def timed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Services]:
    """Services whose app answers within 1 s (ICELOG_REQUEST_TIMEOUT_SECONDS=1)."""
    for services in hostile.services_on(request.param, tmp_path, request_timeout_seconds=1.0):
        yield services
        hostile.assert_log_verifies(services)


_prefix = default_prefix


def _slow(original: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)
        return original(*args, **kwargs)

    return slow


def test_slow_requests_are_answered_at_the_timeout_typed_by_route(
    timed: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(timed) as client:
        base = f"/catalog/v1/{_prefix(client)}/namespaces"
        client.post(base, json={"namespace": ["slow"]}).raise_for_status()
        client.post(f"{base}/slow/tables", json={"name": "t", "schema": SCHEMA}).raise_for_status()
        unavailable, unknown = "ServiceUnavailableException", "CommitStateUnknownException"
        commit = f"{base}/slow/tables/t"
        cases: list[tuple[str, str, str, str, dict[str, Any] | None, int, str]] = [
            ("queries", "list_namespaces", "GET", base, None, 503, unavailable),
            (
                "catalog.namespaces",
                "create_namespace",
                "POST",
                base,
                {"namespace": ["n2"]},
                504,
                unavailable,
            ),
            ("catalog.tables", "commit_table", "POST", commit, {"updates": []}, 504, unknown),
        ]
        for owner, attribute, method, url, body, status, error_type in cases:
            target = _owner(timed, owner)
            monkeypatch.setattr(target, attribute, _slow(getattr(target, attribute), 2.0))
            started = time.monotonic()
            response = client.request(method, url, json=body)
            elapsed = time.monotonic() - started
            assert_error(response, status, error_type)
            assert elapsed < 1.9, f"{attribute}: answered after {elapsed:.2f} s, not at the timeout"
            monkeypatch.undo()
        time.sleep(1.5)  # the slow handlers finish in their threads before the log is checked


def test_a_commit_retried_on_conflicts_stops_at_its_timeout_and_never_appends(
    timed: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = timed.catalog
    with serving(timed) as client:
        catalog_path, created = with_table_t(client, "busy")
        base = f"{catalog_path}/namespaces"
        directory = local_path(created.json()["metadata-location"]).parent
        files = sorted(directory.iterdir())
        head = catalog.app.recorder.max_notification_id()
        save_all = catalog.app.save_all
        conflicts_until = time.monotonic() + 3.0
        attempts: list[float] = []

        def contended(*aggregates: Any, **kwargs: Any) -> int:
            attempts.append(time.monotonic())
            if time.monotonic() < conflicts_until:
                time.sleep(0.1)
                raise ConcurrentChange  # another writer keeps winning
            return save_all(*aggregates, **kwargs)

        monkeypatch.setattr(catalog.app, "save_all", contended)
        commit = {"updates": [{"action": "set-properties", "updates": {"late": "yes"}}]}
        started = time.monotonic()
        response = client.post(f"{base}/busy/tables/t", json=commit)
        assert_error(response, 504, "CommitStateUnknownException")
        answered = time.monotonic()
        assert answered - started < 1.9
        # Past the contention: a handler that had not stopped would append now.
        time.sleep(max(0.0, conflicts_until - time.monotonic()) + 1.0)
        monkeypatch.undo()
        late = [t for t in attempts if t > answered + 0.5]
        assert late == [], f"{len(late)} attempt(s) more than 0.5 s after the timeout answer"
        assert catalog.app.recorder.max_notification_id() == head, (
            "the commit appended after its timeout"
        )
        loaded = client.get(f"{base}/busy/tables/t").json()
        assert "late" not in loaded["metadata"]["properties"]
        assert sorted(directory.iterdir()) == files, "the attempts' metadata files were removed"


def test_the_timeout_leaves_the_server_serving(timed: Services) -> None:
    """After abandoned handlers, the server still answers and commits (no held turn)."""
    with serving(timed) as client:
        base = f"/catalog/v1/{_prefix(client)}/namespaces"
        client.post(base, json={"namespace": ["after"]}).raise_for_status()
        client.post(f"{base}/after/tables", json={"name": "t", "schema": SCHEMA}).raise_for_status()
        done = threading.Event()

        def commit() -> None:
            response = client.post(
                f"{base}/after/tables/t",
                json={"updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
            )
            assert response.status_code == 200, response.text
            done.set()

        thread = threading.Thread(target=commit)
        thread.start()
        thread.join(10)
        assert done.is_set()

"""The libraries' internals icelog relies on are still there, as its adapters expect.

Each adapter (api/adapters/, projections/adapters/, projections/pg_binary.py) was written
for a range of its library's versions and leans on a few things that library does not
promise. A failure here means an upgrade changed one of them: read the adapter's module
docstring, check the new version's code, then widen `WRITTEN_FOR` or change the adapter.
"""

from __future__ import annotations

import asyncio
import inspect
from importlib.metadata import version
from types import ModuleType
from typing import Any

import pytest
from eventsourcing.domain import Aggregate
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteApplicationRecorder
from psycopg.adapt import AdaptersMap, Dumper, PyFormat
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route, Router
from starlette.types import Message

from icelog.api.adapters import starlette as starlette_adapter
from icelog.projections import pg_binary
from icelog.projections.adapters import eventsourcing as eventsourcing_adapter


def _release(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


@pytest.mark.parametrize(
    ("distribution", "adapter"),
    [
        ("starlette", starlette_adapter),
        ("eventsourcing", eventsourcing_adapter),
        ("psycopg", pg_binary),
    ],
)
def test_each_library_is_within_the_versions_its_adapter_was_written_for(
    distribution: str, adapter: ModuleType
) -> None:
    low, high = adapter.WRITTEN_FOR
    installed = _release(version(distribution))
    assert low <= installed < high, (
        f"{distribution} {version(distribution)} is outside {low}..{high} "
        f"({adapter.__name__}): check what the adapter relies on, then widen WRITTEN_FOR"
    )


# -- starlette ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "root_path", "expected"),
    [
        ("/catalog/v1/config", "", "/catalog/v1/config"),
        ("/api/catalog/v1/config", "/api", "/catalog/v1/config"),
        ("/api", "/api", ""),
        ("/apix/catalog", "/api", "/apix/catalog"),  # not below the root path
        ("/other", "/api", "/other"),
    ],
)
def test_route_path_is_the_path_the_router_matches(
    path: str, root_path: str, expected: str
) -> None:
    scope = {"type": "http", "path": path, "root_path": root_path}
    assert starlette_adapter.route_path(scope) == expected


def test_enter_route_sets_the_scope_as_the_router_does() -> None:
    """What the loadTable lane puts on a scope equals what Starlette's router put on it
    before calling the route (the route, its endpoint, the merged path parameters)."""
    seen: dict[str, Any] = {}

    async def endpoint(request: Request) -> PlainTextResponse:
        seen.update(request.scope)
        return PlainTextResponse("")

    route = Route("/t/{prefix}/tables/{table}", endpoint, methods=["GET"])
    scope: dict[str, Any] = {
        "type": "http", "method": "GET", "path": "/t/p/tables/x", "root_path": "",
        "headers": [], "query_string": b"", "path_params": {"mounted": "m"},
    }  # fmt: skip

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(_message: Message) -> None:
        return None

    asyncio.run(Router([route])(dict(scope), receive, send))
    ours = dict(scope)
    found = route.path_regex.match(starlette_adapter.route_path(ours))
    assert found is not None
    starlette_adapter.enter_route(ours, route, found.groupdict())
    for key in ("route", "endpoint", "path_params"):
        assert ours[key] == seen[key], key


# -- eventsourcing --------------------------------------------------------------------------


def _calls(function: Any, call: str) -> bool:
    return call in inspect.getsource(function)


def test_the_postgres_datastore_checks_connections_out_through_its_get_connection() -> None:
    signature = inspect.signature(PostgresDatastore.get_connection)
    assert list(signature.parameters) == ["self"]
    assert _calls(PostgresDatastore.transaction, "self.get_connection()")
    assert hasattr(PostgresDatastore, "close") and "pool" in inspect.getsource(
        PostgresDatastore.__init__
    )


def test_the_recorders_append_hooks_run_inside_the_append() -> None:
    """The inline read model overrides these (projections/recorders.py)."""
    assert _calls(PostgresApplicationRecorder._insert_stored_events, "self._notify_channel(curs)")
    assert _calls(
        PostgresApplicationRecorder.insert_events,
        "self._insert_stored_events(curs, stored_events, **kwargs)",
    )
    assert _calls(SQLiteApplicationRecorder.insert_events, "self._insert_events(")
    for hook in (
        PostgresApplicationRecorder._insert_stored_events,
        SQLiteApplicationRecorder._insert_events,
    ):
        parameters = list(inspect.signature(hook).parameters.values())
        assert [p.kind for p in parameters][-1] is inspect.Parameter.VAR_KEYWORD


def test_aggregates_are_created_by_the_librarys_create_with_an_event_class() -> None:
    """Aggregates with an explicit creation event (NameClaim, IdempotencyRecord, Server)
    call `Aggregate._create(event_class, id=..., **attributes)`, the library's way to
    create an aggregate from a chosen event class."""
    parameters = inspect.signature(Aggregate._create).parameters
    assert list(parameters)[:2] == ["event_class", "id"]
    assert parameters["id"].kind is inspect.Parameter.KEYWORD_ONLY


# -- psycopg --------------------------------------------------------------------------------


def test_psycopg_dumpers_are_chosen_by_key_and_upgraded_per_object() -> None:
    """pg_binary's EncodedDumper tells psycopg each parameter's type oid through the
    dumper protocol's `get_key` and `upgrade`."""
    for method in ("get_key", "upgrade", "dump"):
        assert list(inspect.signature(getattr(Dumper, method)).parameters)[:2] == ["self", "obj"]
    adapters = AdaptersMap()
    pg_binary.register(adapters)
    encoded = pg_binary.text_array(["a"])
    dumper = adapters.get_dumper(pg_binary.Encoded, PyFormat.BINARY)
    assert dumper is pg_binary.EncodedDumper
    upgraded = dumper(pg_binary.Encoded).upgrade(encoded, PyFormat.BINARY)
    assert upgraded.oid == pg_binary.TEXT_ARRAY and upgraded.dump(encoded) == encoded.data
    # The round trip through PostgreSQL itself: tests/integration/test_pg_binary.py.

"""Creates are appended by one server-side function (`icelog_append_rows`,
projections/append_rows.py): the rows it writes are the ones the read model's own fold
gives, and its location guard refuses what the statement-at-a-time path refuses — a new
location equal to, holding or below another table's or view's, live or soft-dropped,
also between two creates of the same batch — leaving nothing of the refused batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError

from icelog.domain.table import Table
from icelog.projections import append_rows, maintenance
from icelog.projections.recorders import InlinePostgresRecorder
from tests.integration.conftest import Api, create_table
from tests.integration.test_soft_delete import set_profile

pytestmark = pytest.mark.postgres


def _recorder(api: Api) -> InlinePostgresRecorder:
    recorder = api.services.catalog.app.recorder
    assert isinstance(recorder, InlinePostgresRecorder)
    return recorder


def _spy(api: Api, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many events each call of the append function carried."""
    recorder = _recorder(api)
    calls: list[int] = []
    real: Callable[..., list[int]] = recorder._insert_rows

    def counted(stored: Any, rows: Any) -> list[int]:
        calls.append(len(stored))
        return real(stored, rows)

    monkeypatch.setattr(recorder, "_insert_rows", counted)
    return calls


def _warehouse(api: Api) -> UUID:
    return UUID(api.services.default_warehouse_id())


def _created(api: Api, location: str, *, actor: str = "anonymous", name: str = "") -> Table:
    table_id = uuid4()
    return Table.create(
        table_id=table_id,
        warehouse_id=_warehouse(api),
        namespace_id=uuid4(),
        namespace=["db"],
        name=name or f"t{table_id.hex[:8]}",
        location=location,
        metadata_location=f"{location}/metadata/00000-{table_id}.metadata.json",
        metadata={"format-version": 2, "table-uuid": str(table_id), "location": location},
        updates=[],
        actor=actor,
        request_id="test",
    )


def _append(api: Api, *tables: Table) -> list[int]:
    app = api.services.catalog.app
    events = [event for table in tables for event in table.collect_events()]
    stored = [app.mapper.to_stored_event(event) for event in events]
    ids = app.recorder.insert_events(stored, inline_events=events, inline_hints={})
    return list(ids or [])


def _rows(api: Api, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with api.services.catalog.app.recorder.datastore.get_connection() as conn:  # type: ignore[attr-defined]
        return [tuple(r.values()) for r in conn.execute(sql, params).fetchall()]


def _events(api: Api) -> list[tuple[Any, ...]]:
    return _rows(api, f"SELECT count(*) FROM {_recorder(api).events_table_name}")


def _root(api: Api) -> str:
    found = _rows(api, "SELECT location FROM icelog_tabulars WHERE name = 'base'")
    return str(found[0][0]).rsplit("/", 1)[0]


def test_creates_through_the_api_land_by_the_function_with_the_rows_a_rebuild_folds(
    pg_api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = pg_api
    calls = _spy(api, monkeypatch)
    api.post("/namespaces", {"namespace": ["db"]})
    for name in ("a", "b", "c"):
        create_table(api, "db", name)
    view = {
        "name": "v",
        "schema": {"type": "struct", "schema-id": 0, "fields": []},
        "view-version": {
            "version-id": 1,
            "schema-id": 0,
            "timestamp-ms": 1,
            "summary": {},
            "representations": [{"type": "sql", "sql": "select 1", "dialect": "spark"}],
            "default-namespace": ["db"],
        },
        "properties": {},
    }
    assert api.post("/namespaces/db/views", view).status_code == 200
    # Each create: the name's claim and the table's creation, nothing on its namespace.
    assert calls == [2, 2, 2, 2]
    assert api.get("/namespaces/db/tables/b").status_code == 200
    assert api.get("/namespaces/db/views/v").status_code == 200
    app = api.services.catalog.app
    assert maintenance.verify(app.recorder, app.mapper).differences == []


@pytest.mark.parametrize(
    ("existing", "new"),
    [
        ("x", "x"),  # equal
        ("x", "x/inner"),  # below an existing one
        ("x/inner", "x"),  # holding an existing one
    ],
)
def test_a_location_overlapping_a_live_or_dropped_one_fails_the_append(
    pg_api: Api, existing: str, new: str
) -> None:
    api = pg_api
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "base")
    root = _root(api)
    create_table(api, "db", "live", location=f"{root}/{existing}")
    before = _events(api)
    with pytest.raises(IntegrityError):
        _append(api, _created(api, f"{root}/{new}"))
    assert _events(api) == before

    # Soft-dropped: the row moves to the deleted tabulars, its location stays taken.
    set_profile(api, {"type": "soft", "expiration-seconds": 3600})
    assert api.delete("/namespaces/db/tables/live").status_code == 204
    assert _rows(api, "SELECT count(*) FROM icelog_deleted_tabulars") == [(1,)]
    with pytest.raises(IntegrityError):
        _append(api, _created(api, f"{root}/{new}"))
    # A sibling whose name only starts the same is no overlap.
    assert len(_append(api, _created(api, f"{root}/{existing}-sibling"))) == 1


def test_two_creates_of_one_batch_that_overlap_each_other_leave_nothing(pg_api: Api) -> None:
    api = pg_api
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "base")
    root = _root(api)
    tables = _rows(api, "SELECT count(*) FROM icelog_tabulars")
    events = _events(api)
    with pytest.raises(IntegrityError):
        _append(api, _created(api, f"{root}/p"), _created(api, f"{root}/p/q"))
    assert _rows(api, "SELECT count(*) FROM icelog_tabulars") == tables
    assert _events(api) == events
    # Apart, both land (and a location deeper than any prefix bound is still checked).
    assert len(_append(api, _created(api, f"{root}/p"), _created(api, f"{root}/r"))) == 2


def test_a_creating_user_owns_what_the_function_created(pg_api: Api) -> None:
    api = pg_api
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "base")
    table = _created(api, f"{_root(api)}/owned", actor="oidc~alice")
    _append(api, table)
    grants = _rows(
        api,
        "SELECT object_kind, relation, principal_kind, principal_id FROM icelog_grants "
        "WHERE object_id = %s",
        str(table.id),
    )
    assert grants == [("table", "ownership", "user", "oidc~alice")]
    app = api.services.catalog.app
    assert maintenance.verify(app.recorder, app.mapper).differences == []


def test_the_append_functions_reach_rows_by_index_whatever_the_catalog_size(pg_api: Api) -> None:
    """PL/pgSQL keeps a function's plans for the session: made on a small catalog, a kept
    plan read every tabular at every append (a sequential scan). The append function,
    called for commits and for creates on one connection while the catalog is small and
    again after it grew, scans no table sequentially (checked in the transaction's own
    statistics, then rolled back)."""
    api = pg_api
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "base")
    recorder = _recorder(api)
    event_type = recorder.stored_event_type_name
    row = _rows(
        api, "SELECT id, metadata_location, metadata, version, warehouse_id FROM icelog_tabulars"
    )[0]
    table_id, location, document, version, warehouse = row
    count = append_rows.parameter_count() - 1
    call = f"SELECT * FROM icelog_append_rows(ARRAY[]::{event_type}[], {', '.join(['%s'] * count)})"
    empty_grants: list[list[Any]] = [[] for _ in append_rows.NEW_GRANTS.columns]
    empty_creates: list[list[Any]] = [[] for _ in append_rows.NEW_TABULARS.columns]
    commit_args = [
        *empty_creates, *empty_grants,
        [table_id], [location], [bytes(document)], [version], ["2026-01-01"], [], [],
    ]  # fmt: skip

    def create_args(n: int) -> list[Any]:
        new_id, at = f"new-{n}", f"file:///nowhere/new-{n}"
        return [
            [new_id], [warehouse], ["db"], [f"new{n}"], ["table"], [at], [f"{at}/m.json"],
            [b"{}"], [1], ["2026-01-01"], ["2026-01-01"], *empty_grants,
            [], [], [], [], [], [1, 1], ["file:///nowhere", at],
        ]  # fmt: skip

    url = api.services.settings.database_url
    assert url is not None
    with psycopg.connect(url) as conn:  # one session: the plans it keeps
        for n in range(6):  # past PostgreSQL's first custom plans: a generic plan is kept
            conn.execute(call, commit_args)
            conn.execute(call, create_args(n))
        conn.execute(
            "INSERT INTO icelog_tabulars SELECT 'grown-' || n, %s, 'db', 'grown' || n, "
            "'table', 'file:///grown/' || n, 'm', '\\x7b7d', 1, 'now', 'now' "
            "FROM generate_series(1, 3000) n",
            (warehouse,),
        )
        conn.execute(call, commit_args)
        conn.execute(call, create_args(6))
        scans = conn.execute(
            "SELECT relname, seq_scan FROM pg_stat_xact_user_tables WHERE relname IN "
            "('icelog_tabulars', 'icelog_deleted_tabulars', 'icelog_namespaces')"
        ).fetchall()
        conn.rollback()
    assert scans and all(seq == 0 for _, seq in scans), scans

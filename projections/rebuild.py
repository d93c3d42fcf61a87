"""Rebuild the catalog read model from the event log, and compare it with the live one.

The inline projection and the rebuild run the same `CatalogView` code; the only
difference is that a rebuild has no hints and folds every commit from the previous
document. Equality of the two proves the log alone reproduces the read model,
metadata documents included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from eventsourcing.persistence import ApplicationRecorder, Mapper
from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg.rows import tuple_row

from projections.catalog_view import CatalogView
from projections.schema import READ_MODEL_TABLES, create_statements

BATCH = 500


@contextmanager
def _write_cursor(datastore: SQLiteDatastore | PostgresDatastore) -> Iterator[Any]:
    if isinstance(datastore, PostgresDatastore):
        with (
            datastore.get_connection() as conn,
            conn.transaction(),
            conn.cursor(row_factory=tuple_row) as cur,
        ):
            yield cur
    else:
        with datastore.transaction(commit=True) as cur:
            yield cur


def rebuild(
    recorder: ApplicationRecorder,
    mapper: Mapper[Any],
    prefix: str,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Fold the whole log into fresh `<prefix>icelog_*` tables; returns events applied."""
    datastore = recorder.datastore  # type: ignore[attr-defined]
    dialect = "postgres" if isinstance(datastore, PostgresDatastore) else "sqlite"
    view = CatalogView(dialect, prefix)
    with _write_cursor(datastore) as cur:
        for table in READ_MODEL_TABLES:
            cur.execute(f"DROP TABLE IF EXISTS {prefix}{table}")
        for statement in create_statements(dialect, prefix):
            cur.execute(statement)
    position, applied = 0, 0
    while True:
        batch = recorder.select_notifications(start=position, limit=BATCH, inclusive_of_start=False)
        if not batch:
            return applied
        with _write_cursor(datastore) as cur:
            for notification in batch:
                view.apply_one(cur, mapper.to_domain_event(notification), {})
        position = batch[-1].id
        applied += len(batch)
        if progress is not None:
            progress(applied)


def _rows(datastore: SQLiteDatastore | PostgresDatastore, table: str) -> list[tuple[Any, ...]]:
    with _write_cursor(datastore) as cur:
        cur.execute(f"SELECT * FROM {table} ORDER BY id")
        return [
            tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in cur.fetchall()
        ]


def differences(recorder: ApplicationRecorder, prefix: str) -> list[str]:
    """Rows that differ between the live read model and the `<prefix>` rebuild."""
    datastore = recorder.datastore  # type: ignore[attr-defined]
    found: list[str] = []
    for table in READ_MODEL_TABLES:
        live = {r[0]: r for r in _rows(datastore, table)}
        rebuilt = {r[0]: r for r in _rows(datastore, prefix + table)}
        for key in sorted(set(live) | set(rebuilt)):
            if live.get(key) != rebuilt.get(key):
                found.append(f"{table} {key}: live={live.get(key)!r} rebuilt={rebuilt.get(key)!r}")
    return found

"""Application recorders that update the read model in the event-append transaction.

`Catalog.save_all()` passes the domain events and rendered hints as keyword
arguments; eventsourcing hands them to `_insert_events` / `_insert_stored_events`,
which run inside the same database transaction as the event insert. A version
conflict therefore rolls the read-model writes back with the events: the read
model can never be ahead of, or behind, the log (an "inline projection").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore
from psycopg import Cursor
from psycopg.rows import DictRow, tuple_row
from psycopg.sql import SQL

from projections.catalog_view import CatalogView
from projections.schema import create_statements


class InlineSQLiteRecorder(SQLiteApplicationRecorder):
    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"):
        self.view = CatalogView("sqlite")
        super().__init__(datastore, events_table_name)

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *create_statements("sqlite")]

    def _insert_events(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        ids = super()._insert_events(c, stored_events, **kwargs)
        events = kwargs.get("inline_events")
        if events:
            self.view.apply(c, events, kwargs.get("inline_hints") or {})
        return ids


class InlinePostgresRecorder(PostgresApplicationRecorder):
    def __init__(
        self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"
    ) -> None:
        self.view = CatalogView("postgres")
        super().__init__(datastore, events_table_name=events_table_name)
        self.sql_create_statements.extend(SQL(s).format() for s in create_statements("postgres"))

    def _insert_stored_events(
        self, curs: Cursor[DictRow], stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        # The table lock is taken by super() first, so read-model rows are written in log
        # order. A separate cursor keeps the RETURNING ids of `curs` for the library.
        super()._insert_stored_events(curs, stored_events, **kwargs)
        events = kwargs.get("inline_events")
        if events:
            with curs.connection.cursor(row_factory=tuple_row) as view_cursor:
                self.view.apply(view_cursor, events, kwargs.get("inline_hints") or {})

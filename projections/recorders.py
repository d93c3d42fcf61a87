"""Application recorders that update the read model in the event-append transaction.

`Catalog.save_all()` passes the domain events and rendered hints as keyword
arguments; eventsourcing hands them to `_insert_events` / `_insert_stored_events`,
which run inside the same database transaction as the event insert. A version
conflict therefore rolls the read-model writes back with the events: the read
model can never be ahead of, or behind, the log (an "inline projection").
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import psycopg
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore
from psycopg import Cursor
from psycopg.rows import DictRow, tuple_row
from psycopg.sql import SQL

from projections.catalog_view import CatalogView
from projections.schema import create_statements
from projections.sql import harden_postgres_datastore


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
        # Dead pooled connections after a PostgreSQL restart, 503 when it is down.
        harden_postgres_datastore(datastore)
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
            try:
                with curs.connection.cursor(row_factory=tuple_row) as view_cursor:
                    self.view.apply(view_cursor, events, kwargs.get("inline_hints") or {})
            except psycopg.Error:
                # A version conflict (the events' primary key) can surface here, from a
                # read-model statement in the middle of the pipeline, instead of at the
                # library's `pipeline.sync()`. The pipeline is then left aborted, the
                # library's COMMIT fails with PipelineAborted (an OperationalError) that
                # replaces the IntegrityError, and `insert_events`' @retry retries it 10
                # times, 0.2 s apart, each attempt conflicting again: a contended commit
                # took seconds and could end in a 500 instead of a conflict the command
                # layer rebases. Syncing here (a nested pipeline syncs on entry) leaves
                # the failed transaction as the library's own sync would, so the original
                # error reaches the caller. Costs nothing when nothing fails.
                with contextlib.suppress(psycopg.Error), curs.connection.pipeline():
                    pass
                raise

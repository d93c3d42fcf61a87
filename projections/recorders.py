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
from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore
from eventsourcing.utils import retry
from psycopg import Cursor
from psycopg.rows import DictRow, tuple_row
from psycopg.sql import SQL, Composed, Identifier

from icelog.projections import pg_binary
from icelog.projections.catalog_view import CatalogView
from icelog.projections.schema import create_statements
from icelog.projections.sql import HeldConnection, harden_postgres_datastore

_ABORT = "DO $$ BEGIN RAISE EXCEPTION 'icelog: the read-model update failed'; END $$"


class InlineSQLiteRecorder(SQLiteApplicationRecorder):
    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"):
        self.view = CatalogView("sqlite", guard_locations=True)
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
        self.view = CatalogView("postgres", guard_locations=True)
        # Dead pooled connections after a PostgreSQL restart, 503 when it is down.
        harden_postgres_datastore(datastore)
        super().__init__(datastore, events_table_name=events_table_name)
        self.sql_create_statements.extend(SQL(s).format() for s in create_statements("postgres"))
        self.sql_create_statements.append(self.append_commits_function())
        # Every parameter arrives in binary form, packed by pg_binary.
        self._append_commits = SQL(
            "SELECT * FROM {schema}.icelog_append_commits(%b, %b, %b, %b, %b, %b)"
        ).format(schema=Identifier(datastore.schema))
        self._event_type_oids: tuple[int, int] | None = None  # the composite, its array
        # The group committer's own connection for plain commits (see HeldConnection); it
        # goes back to the pool before the pool closes.
        self._append_connection = HeldConnection(datastore)
        close_pool = datastore.close

        def close() -> None:
            self._append_connection.release()
            close_pool()

        datastore.close = close  # type: ignore[method-assign]

    def append_commits_function(self) -> Composed:
        """The append of a batch of plain commits as ONE statement (see `insert_events`):
        lock the log, insert the events, move the read-model rows, in the statement's own
        transaction. Created by migration 6; `CREATE OR REPLACE`, so safe to repeat."""
        return SQL(
            "CREATE OR REPLACE FUNCTION {schema}.icelog_append_commits("
            "events {schema}.{event}[], ids text[], locations text[], documents bytea[], "
            "versions bigint[], stamps text[]) RETURNS SETOF bigint LANGUAGE plpgsql AS $body$ "
            "BEGIN "
            "LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE; "
            "RETURN QUERY INSERT INTO {schema}.{table} AS t "
            "(originator_id, originator_version, topic, state) "
            "SELECT originator_id, originator_version, topic, state FROM unnest(events) "
            "RETURNING notification_id; "
            "UPDATE {schema}.icelog_tabulars AS t SET metadata_location = u.ml, "
            "metadata = u.md, version = u.v, updated_at = u.ua "
            "FROM unnest(locations, documents, versions, stamps, ids) AS u(ml, md, v, ua, id) "
            "WHERE t.id = u.id; "
            "END $body$"
        ).format(
            schema=Identifier(self.datastore.schema),
            event=Identifier(self.stored_event_type_name),
            table=Identifier(self.events_table_name),
        )

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """A batch made only of commits whose documents were handed in (the hot path: every
        updateTable, grouped by commands/group_commit.py) is appended by one call of
        `icelog_append_commits`, one round trip. The library's path costs about fourteen
        waits on the connection (BEGIN, lock, insert, each read-model statement, sync,
        COMMIT), each made while the events table is locked and each a point where this
        thread must win the GIL back from the request threads: under 8 concurrent
        writers an append held the lock 18 ms instead of 5. Everything else (creates,
        drops, renames, folds without hints) takes the library's path."""
        rows = self._plain_commits(kwargs.get("inline_events"), kwargs.get("inline_hints"))
        if rows is None or not stored_events:
            ids: Sequence[int] | None = super().insert_events(stored_events, **kwargs)
            return ids
        found: list[int] = self._insert_commits(stored_events, rows)
        return found

    def _plain_commits(
        self, events: Sequence[object] | None, hints: Any
    ) -> dict[str, tuple[str, bytes, int, str]] | None:
        if not events:
            return None
        rows: dict[str, tuple[str, bytes, int, str]] = {}
        for event in events:
            found = CatalogView.plain_commit(event, hints or {})
            if found is None:
                return None
            rows[found[0]] = found[1]  # a later commit of the same tabular supersedes
        return rows

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def _insert_commits(
        self, stored_events: Sequence[StoredEvent], rows: dict[str, tuple[str, bytes, int, str]]
    ) -> list[int]:
        locations, documents, versions, stamps = (
            list(column) for column in zip(*rows.values(), strict=True)
        )
        with self._append_connection.use() as conn, conn.cursor(row_factory=tuple_row) as cur:
            type_oid, array_oid = self._event_types(cur)
            encoding = conn.info.encoding
            events = pg_binary.stored_events_array(
                ((e.originator_id, e.originator_version, e.topic, e.state) for e in stored_events),
                type_oid=type_oid,
                array_oid=array_oid,
                id_is_uuid=self.datastore.originator_id_type == "uuid",
                encoding=encoding,
            )
            pg_binary.register(cur.adapters)
            cur.execute(
                self._append_commits,
                (
                    events,
                    pg_binary.text_array(rows, encoding),
                    pg_binary.text_array(locations, encoding),
                    pg_binary.bytea_array(documents),
                    pg_binary.int8_array(versions),
                    pg_binary.text_array(stamps, encoding),
                ),
                prepare=True,
            )
            return [int(row[0]) for row in cur.fetchall()]

    def _event_types(self, cur: Cursor[Any]) -> tuple[int, int]:
        """The oids of the event store's composite type and of its array type."""
        if self._event_type_oids is None:
            cur.execute(
                "SELECT t.oid, t.typarray FROM pg_type t "
                "JOIN pg_namespace n ON n.oid = t.typnamespace "
                "WHERE n.nspname = %s AND t.typname = %s",
                (self.datastore.schema, self.stored_event_type_name),
            )
            found = cur.fetchone()
            if found is None:
                raise psycopg.ProgrammingError(
                    f"the type {self.stored_event_type_name} is missing from the event store"
                )
            self._event_type_oids = (int(found[0]), int(found[1]))
        return self._event_type_oids

    def _notify_channel(self, curs: Cursor[DictRow]) -> None:
        """No NOTIFY: nothing in icelog LISTENs (relays and indexers follow the log by
        position), and each NOTIFY cost a round trip inside the locked append plus
        PostgreSQL's cluster-wide notification-queue lock at every commit."""

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
            except Exception:
                # An error of the read model's own (a location guard's conflict): the
                # library keeps a Python exception until after its COMMIT, which would land
                # the events without their rows. Fail the transaction in the database first.
                with contextlib.suppress(psycopg.Error), curs.connection.pipeline():
                    curs.connection.execute(_ABORT, prepare=False)
                raise

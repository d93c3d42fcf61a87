"""Application recorders that update the read model in the event-append transaction.

`Catalog.save_all()` passes the domain events and rendered hints as keyword
arguments; eventsourcing hands them to `_insert_events` / `_insert_stored_events`,
which run inside the same database transaction as the event insert. A version
conflict therefore rolls the read-model writes back with the events: the read
model can never be ahead of, or behind, the log (an "inline projection").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore
from eventsourcing.utils import retry
from psycopg import Cursor
from psycopg.rows import DictRow, tuple_row
from psycopg.sql import SQL, Composed, Identifier

from icelog.projections import append_rows, pg_binary
from icelog.projections.adapters.eventsourcing import before_close
from icelog.projections.row_writer import RowWriter
from icelog.projections.schema import create_statements
from icelog.projections.sql import HeldConnection, harden_postgres_datastore

_ABORT = "DO $$ BEGIN RAISE EXCEPTION 'icelog: the read-model update failed'; END $$"
# PL/pgSQL keeps a function's plans for the session, made from the tables as they were when
# the connection first appended: on a small catalog a sequential scan (or a hash join over
# one) is the cheapest way to reach a row, and that plan then read every tabular at every
# append — ~1 ms of PostgreSQL CPU per append at 2,300 tables, growing with the catalog.
# Without sequential scans or hash and merge joins to choose from, the kept plans reach
# rows through their indexes whatever the size (planning at every call instead cost
# ~0.25 ms per append).
_INDEXED_PLANS = "SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off"
# What the append function begins with: lock the log, insert the events, return their
# positions.
_APPEND_EVENTS = (
    "LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE; "
    "RETURN QUERY INSERT INTO {schema}.{table} AS t "
    "(originator_id, originator_version, topic, state) "
    "SELECT originator_id, originator_version, topic, state FROM unnest(events) "
    "RETURNING notification_id; "
)


class InlineSQLiteRecorder(SQLiteApplicationRecorder):
    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"):
        self.view = RowWriter("sqlite", guard=True)
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
        self.view = RowWriter("postgres", guard=True)
        # Dead pooled connections after a PostgreSQL restart, 503 when it is down.
        harden_postgres_datastore(datastore)
        super().__init__(datastore, events_table_name=events_table_name)
        self.sql_create_statements.extend(SQL(s).format() for s in create_statements("postgres"))
        self.sql_create_statements.append(self.append_rows_function())
        # Every parameter arrives in binary form, packed by pg_binary.
        self._append_rows = SQL("SELECT * FROM {schema}.{function}({params})").format(
            schema=Identifier(datastore.schema),
            function=Identifier(append_rows.FUNCTION),
            params=SQL(", ".join(["%b"] * append_rows.parameter_count())),
        )
        self._event_type_oids: tuple[int, int] | None = None  # the composite, its array
        # The group committer's own connection for plain commits (see HeldConnection); it
        # goes back to the pool before the pool closes.
        self._append_connection = HeldConnection(datastore)
        before_close(datastore, self._append_connection.release)

    def _function_names(self) -> dict[str, Identifier]:
        return {
            "schema": Identifier(self.datastore.schema),
            "event": Identifier(self.stored_event_type_name),
            "table": Identifier(self.events_table_name),
        }

    def append_rows_function(self) -> Composed:
        """The append of a batch whose rows the fold gave as arrays (append_rows.py) as
        ONE statement: lock the log, insert the events, write the rows with the fold's
        guards, in the statement's own transaction. Generated from append_rows.py's
        `ARRAY_WRITES`; created by migration 18; `CREATE OR REPLACE`, so safe to repeat."""
        return SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{function}("
            + append_rows.parameters()
            + ") RETURNS SETOF bigint LANGUAGE plpgsql "
            f"{_INDEXED_PLANS} AS $body$ "
            "DECLARE held text[]; overlapping boolean; "
            "BEGIN " + _APPEND_EVENTS + append_rows.function_body() + "END $body$"
        ).format(**self._function_names(), function=Identifier(append_rows.FUNCTION))

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """A batch whose read-model rows the fold gives as arrays (append_rows.py: every
        updateTable, grouped by commands/group_commit.py, and creates of tables and
        views) is appended by one call of a server-side function, one round trip. The
        library's path costs about fourteen waits on the connection (BEGIN, lock,
        insert, each read-model statement, sync, COMMIT), each made while the events
        table is locked and each a point where this thread must win the GIL back from
        the request threads: under 8 concurrent writers an append held the lock 18 ms
        instead of 5. Everything else (drops, renames, folds without hints) takes the
        library's path."""
        planned = append_rows.plan(kwargs.get("inline_events"), kwargs.get("inline_hints") or {})
        if planned is None or not stored_events:
            ids: Sequence[int] | None = super().insert_events(stored_events, **kwargs)
            return ids
        found: list[int] = self._insert_rows(stored_events, planned)
        return found

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def _insert_rows(
        self, stored_events: Sequence[StoredEvent], planned: append_rows.Planned
    ) -> list[int]:
        return self._call(self._append_rows, stored_events, planned.params)

    def _call(
        self,
        statement: Composed,
        stored_events: Sequence[StoredEvent],
        params: Callable[[str], list[pg_binary.Encoded]],
    ) -> list[int]:
        """Run one of the append functions: the events first, then `params(encoding)`."""
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
            cur.execute(statement, (events, *params(encoding)), prepare=True)
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

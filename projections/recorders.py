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

from icelog.projections import pg_binary
from icelog.projections.adapters.eventsourcing import before_close
from icelog.projections.append_rows import AppendRows, CommitRow, append_rows
from icelog.projections.catalog_view import CatalogView
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
# What both append functions begin with (lock the log, insert the events, return their
# positions) and the row moves of plain commits they both make.
_APPEND_EVENTS = (
    "LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE; "
    "RETURN QUERY INSERT INTO {schema}.{table} AS t "
    "(originator_id, originator_version, topic, state) "
    "SELECT originator_id, originator_version, topic, state FROM unnest(events) "
    "RETURNING notification_id; "
)
_MOVE_COMMITTED = (
    "UPDATE {schema}.icelog_tabulars AS t SET metadata_location = u.ml, "
    "metadata = u.md, version = u.v, updated_at = u.ua "
    "FROM unnest(locations, documents, versions, stamps, ids) AS u(ml, md, v, ua, id) "
    "WHERE t.id = u.id; "
)


class InlineSQLiteRecorder(SQLiteApplicationRecorder):
    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"):
        self.view = CatalogView("sqlite", guard=True)
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
        self.view = CatalogView("postgres", guard=True)
        # Dead pooled connections after a PostgreSQL restart, 503 when it is down.
        harden_postgres_datastore(datastore)
        super().__init__(datastore, events_table_name=events_table_name)
        self.sql_create_statements.extend(SQL(s).format() for s in create_statements("postgres"))
        self.sql_create_statements.append(self.append_commits_function())
        self.sql_create_statements.append(self.append_creates_function())
        # Every parameter arrives in binary form, packed by pg_binary.
        self._append_commits = SQL(
            "SELECT * FROM {schema}.icelog_append_commits(%b, %b, %b, %b, %b, %b)"
        ).format(schema=Identifier(datastore.schema))
        self._append_creates = SQL("SELECT * FROM {schema}.icelog_append_creates({params})").format(
            schema=Identifier(datastore.schema), params=SQL(", ".join(["%b"] * 23))
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

    def append_commits_function(self) -> Composed:
        """The append of a batch of plain commits as ONE statement (see `insert_events`):
        lock the log, insert the events, move the read-model rows, in the statement's own
        transaction. Created by migration 6; `CREATE OR REPLACE`, so safe to repeat."""
        return SQL(
            "CREATE OR REPLACE FUNCTION {schema}.icelog_append_commits("
            "events {schema}.{event}[], ids text[], locations text[], documents bytea[], "
            "versions bigint[], stamps text[]) RETURNS SETOF bigint LANGUAGE plpgsql "
            f"{_INDEXED_PLANS} AS $body$ "
            "BEGIN " + _APPEND_EVENTS + _MOVE_COMMITTED + "END $body$"
        ).format(**self._function_names())

    def append_creates_function(self) -> Composed:
        """The append of a batch that creates tables or views (and may also carry plain
        commits and name claims) as ONE statement: the rows the inline projection would
        insert one statement at a time (append_rows.py), with its guards (catalog_view.py)
        — a new location that equals, holds or lies below another table's or view's of
        the warehouse, live or soft-dropped, or a namespace that no longer exists, fails
        the append as a conflict (an integrity violation, as a version conflict is; the
        command's retry then answers 409 or 404). The new rows go in first, so two
        creates of one batch see each other. Created by migration 16; `CREATE OR
        REPLACE`, so safe to repeat."""
        # One new row at a time, each test an index lookup planned with the row's values
        # (EXECUTE): a kept plan, made on a small catalog, chose an index by warehouse
        # alone and read every location of the warehouse per create.
        overlaps = " OR ".join(
            f"EXISTS (SELECT 1 FROM {{schema}}.{table} AS t WHERE t.warehouse_id = $1 "
            f"AND {test} AND t.id <> $3)"
            for table in ("icelog_tabulars", "icelog_deleted_tabulars")
            for test in (
                "t.location = ANY($2)",
                "t.location COLLATE \"C\" >= $4 || '/' AND t.location COLLATE \"C\" < $4 || '0'",
            )
        )
        return SQL(
            "CREATE OR REPLACE FUNCTION {schema}.icelog_append_creates("
            "events {schema}.{event}[], new_ids text[], new_warehouses text[], "
            "new_ns_keys text[], new_names text[], new_kinds text[], new_locations text[], "
            "new_metadata_locations text[], new_documents bytea[], new_versions bigint[], "
            "new_stamps text[], probe_rows int[], probe_locations text[], grant_ids text[], "
            "grant_kinds text[], grant_objects text[], grant_owners text[], "
            "grant_stamps text[], ids text[], locations text[], documents bytea[], "
            "versions bigint[], stamps text[]) RETURNS SETOF bigint LANGUAGE plpgsql "
            f"{_INDEXED_PLANS} AS $body$ "
            "DECLARE held text[]; overlapping boolean; "
            "BEGIN "
            + _APPEND_EVENTS
            + "INSERT INTO {schema}.icelog_tabulars (id, warehouse_id, ns_key, name, kind, "
            "location, metadata_location, metadata, version, created_at, updated_at) "
            "SELECT u.*, u.c FROM unnest(new_ids, new_warehouses, new_ns_keys, new_names, "
            "new_kinds, new_locations, new_metadata_locations, new_documents, new_versions, "
            "new_stamps) AS u(i, w, k, n, kd, l, ml, md, v, c); "
            "FOR i IN 1 .. coalesce(array_length(new_ids, 1), 0) LOOP "
            "held := ARRAY(SELECT p.loc FROM unnest(probe_rows, probe_locations) AS p(r, loc) "
            "WHERE p.r = i); "
            "EXECUTE $q$SELECT " + overlaps + "$q$ INTO overlapping "
            "USING new_warehouses[i], held, new_ids[i], new_locations[i]; "
            "IF overlapping THEN "
            "RAISE EXCEPTION 'icelog: a new location overlaps another table''s or view''s' "
            "USING ERRCODE = 'unique_violation'; "
            "END IF; "
            "END LOOP; "
            "IF EXISTS (SELECT 1 FROM unnest(new_warehouses, new_ns_keys) AS n(w, k) "
            "WHERE NOT EXISTS (SELECT 1 FROM {schema}.icelog_namespaces AS s "
            "WHERE s.warehouse_id = n.w AND s.ns_key = n.k)) THEN "
            "RAISE EXCEPTION 'icelog: the namespace of a new table or view does not exist' "
            "USING ERRCODE = 'foreign_key_violation'; "
            "END IF; "
            "INSERT INTO {schema}.icelog_grants (id, object_kind, object_id, relation, "
            "principal_kind, principal_id, created_at) SELECT g.i, g.k, g.o, 'ownership', "
            "'user', g.p, g.s FROM unnest(grant_ids, grant_kinds, grant_objects, "
            "grant_owners, grant_stamps) AS g(i, k, o, p, s) ON CONFLICT (id) DO NOTHING; "
            "IF array_length(ids, 1) > 0 THEN " + _MOVE_COMMITTED + "END IF; "
            "END $body$"
        ).format(**self._function_names())

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """A batch whose read-model rows are known in advance (append_rows.py) is appended
        by one call of a server-side function, one round trip: `icelog_append_commits` for
        plain commits (every updateTable, grouped by commands/group_commit.py),
        `icelog_append_creates` when it creates tables or views. The library's path costs
        about fourteen waits on the connection (BEGIN, lock, insert, each read-model
        statement, sync, COMMIT), each made while the events table is locked and each a
        point where this thread must win the GIL back from the request threads: under 8
        concurrent writers an append held the lock 18 ms instead of 5. Everything else
        (drops, renames, folds without hints) takes the library's path."""
        rows = append_rows(kwargs.get("inline_events"), kwargs.get("inline_hints") or {})
        if rows is None or not stored_events:
            ids: Sequence[int] | None = super().insert_events(stored_events, **kwargs)
            return ids
        found: list[int]
        if rows.commits and not rows.creates:
            found = self._insert_commits(stored_events, rows.commits)
        else:
            found = self._insert_creates(stored_events, rows)
        return found

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def _insert_commits(
        self, stored_events: Sequence[StoredEvent], rows: dict[str, CommitRow]
    ) -> list[int]:
        return self._call(
            self._append_commits, stored_events, lambda encoding: _commit_params(rows, encoding)
        )

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def _insert_creates(self, stored_events: Sequence[StoredEvent], rows: AppendRows) -> list[int]:
        def params(encoding: str) -> list[pg_binary.Encoded]:
            new = rows.creates
            texts = [
                [getattr(c, column) for c in new]
                for column in ("id", "warehouse_id", "ns_key", "name", "kind", "location")
            ]
            grants = [[g[i] for g in rows.grants] for i in range(5)]
            return [
                *(pg_binary.text_array(column, encoding) for column in texts),
                pg_binary.text_array([c.metadata_location for c in new], encoding),
                pg_binary.bytea_array([c.document for c in new]),
                pg_binary.int8_array([c.version for c in new]),
                pg_binary.text_array([c.stamp for c in new], encoding),
                pg_binary.int4_array([n for n, c in enumerate(new, 1) for _ in c.holders]),
                pg_binary.text_array([h for c in new for h in c.holders], encoding),
                *(pg_binary.text_array(column, encoding) for column in grants),
                *_commit_params(rows.commits, encoding),
            ]

        return self._call(self._append_creates, stored_events, params)

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


def _commit_params(rows: dict[str, CommitRow], encoding: str) -> list[pg_binary.Encoded]:
    """The commits' columns: tabular ids, metadata locations, documents, versions, times."""
    columns: list[list[Any]] = [list(c) for c in zip(*rows.values(), strict=True)] or [[]] * 4
    locations, documents, versions, stamps = columns
    return [
        pg_binary.text_array(rows, encoding),
        pg_binary.text_array(locations, encoding),
        pg_binary.bytea_array(documents),
        pg_binary.int8_array(versions),
        pg_binary.text_array(stamps, encoding),
    ]

"""Schema migrations: numbered steps that create and upgrade the catalog's database.

`icelog migrate` applies every step the database has not recorded yet and records each
one in `icelog_schema_version` (version, description, applied_at, icelog_version). The
rules that keep this safe while replicas of the previous release still serve (also in
docs/operations.md, "Replicas and migrations"):

* Steps are only appended. A released step never changes and is never renumbered.
* Additive only: new tables, new columns that are nullable or have a default, new
  indexes. Nothing is dropped, renamed or retyped in the release that stops using it
  (the previous release may still be serving against the same database); removal waits
  for a later release, when no server of the old one can run.
* Every step is idempotent (`IF NOT EXISTS`; for columns PostgreSQL's
  `ADD COLUMN IF NOT EXISTS`, on SQLite a look at `PRAGMA table_info` first). Step 1
  creates the current shape of the tables it owns, so on a fresh database later steps
  find their work done; on a database made before versions were recorded, every step
  re-runs harmlessly and is then recorded.

Concurrency: on PostgreSQL the whole run is one transaction holding a transaction-level
advisory lock, so two `icelog migrate` (or replicas initialising an empty database) run
one after the other and the second finds nothing to do; DDL is transactional, so a
failed run leaves nothing half-applied. Once the advisory lock is held, `lock_timeout`
bounds how long a step may queue for a table lock behind live traffic (it fails rather
than stall every reader behind it). On SQLite the run is one `BEGIN IMMEDIATE`
transaction: the database's write lock serialises it the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteApplicationRecorder
from psycopg.rows import tuple_row

from icelog.domain.identifiers import user_aggregate_id
from icelog.projections import (
    audit_chain,
    catalog_history,
    event_index,
    iceberg_events,
    location_overlap,
    publisher_positions,
    schema,
    secrets,
)
from icelog.projections.sql import Datastore, is_lock_timeout, write_transaction

VERSION_TABLE = "icelog_schema_version"
# One migration at a time per PostgreSQL database ("icelog-m" as a big-endian integer).
LOCK_KEY = int.from_bytes(b"icelog-m", "big")

_VERSION_DDL = (
    f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} ("
    "version INTEGER PRIMARY KEY, description TEXT NOT NULL, "
    "applied_at TEXT NOT NULL, icelog_version TEXT NOT NULL)"
)


@dataclass(frozen=True)
class Target:
    """What a migration works on: the application's recorders (events, snapshots)."""

    recorders: tuple[Any, ...]

    @property
    def datastore(self) -> Datastore:
        store: Datastore = self.recorders[0].datastore
        return store

    @property
    def dialect(self) -> str:
        return "postgres" if isinstance(self.datastore, PostgresDatastore) else "sqlite"

    @property
    def events_table(self) -> str:
        return str(self.recorders[0].events_table_name)


Apply = Callable[[Any, Target], None]


@dataclass(frozen=True)
class Step:
    version: int
    description: str
    apply: Apply
    # Where the step changes anything; elsewhere it is only recorded, to keep one numbering.
    dialects: tuple[str, ...] = ("postgres", "sqlite")

    def does_work_on(self, dialect: str) -> bool:
        return dialect in self.dialects


def _statements(make: Callable[[str], Sequence[str]]) -> Apply:
    def apply(cur: Any, target: Target) -> None:
        for statement in make(target.dialect):
            cur.execute(statement)

    return apply


def _event_store(cur: Any, target: Target) -> None:
    """The library's tables (events, snapshots) and the inline read model with them: the
    recorders carry these statements (projections/recorders.py adds the read model's)."""
    for recorder in target.recorders:
        if target.dialect == "sqlite":
            for statement in recorder.create_table_statements:
                cur.execute(statement)
            continue
        for composed in recorder.sql_create_statements:
            if "CREATE TYPE" in composed.as_string():
                # No IF NOT EXISTS for types: a savepoint keeps the transaction usable.
                with (
                    contextlib.suppress(psycopg.errors.DuplicateObject),
                    cur.connection.transaction(),
                ):
                    cur.execute(composed, prepare=False)
        for composed in recorder.sql_create_statements:
            if "CREATE TYPE" not in composed.as_string():
                cur.execute(composed, prepare=False)


def _superseded_append_function(cur: Any, target: Target) -> None:
    """Steps 6 and 16 made the one-statement appends of commits and of creates, two
    PL/pgSQL functions that repeated the read model's rules; step 18's function, made
    from the fold (projections/append_rows.py), replaced both. Nothing calls them now:
    a database that has them keeps them for replicas of the release before (removal
    waits for a later release), and one made now never needs them."""


def _append_rows_function(cur: Any, target: Target) -> None:
    """PostgreSQL: the one-statement append of the rows the fold gives as arrays."""
    if target.dialect != "postgres":
        return
    for recorder in target.recorders:
        if hasattr(recorder, "append_rows_function"):
            cur.execute(recorder.append_rows_function(), prepare=False)


def _task_results(cur: Any, target: Target) -> None:
    """The outcome of a succeeded task in the task queue (a purge's skipped files)."""
    if target.dialect == "postgres":
        cur.execute("ALTER TABLE icelog_tasks ADD COLUMN IF NOT EXISTS result TEXT")
        return
    cur.execute("PRAGMA table_info(icelog_tasks)")
    if "result" not in {row[1] for row in cur.fetchall()}:
        cur.execute("ALTER TABLE icelog_tasks ADD COLUMN result TEXT")


def _retire_column(cur: Any, target: Target) -> None:
    """A replaced storage credential is deleted after a grace period."""
    if target.dialect == "postgres":
        for statement in secrets.retire_column(target.dialect):
            cur.execute(statement)
        return
    cur.execute("PRAGMA table_info(icelog_secrets)")
    if "retire_at_ms" not in {row[1] for row in cur.fetchall()}:
        cur.execute("ALTER TABLE icelog_secrets ADD COLUMN retire_at_ms BIGINT")


# Grants whose object is gone: the read model now ends them with the object
# (domain/ownership.py `grants_ended_by`); older releases left them behind. A namespace
# made again under a dropped one's name has the same id: grants older than it are the
# dropped one's.
_GRANTS_OF_GONE_OBJECTS = (
    "SELECT g.id FROM icelog_grants AS g WHERE "
    "(g.object_kind = 'namespace' AND NOT EXISTS (SELECT 1 FROM icelog_namespaces AS n "
    "WHERE n.id = g.object_id AND n.created_at <= g.created_at)) OR "
    "(g.object_kind IN ('table', 'view') AND NOT EXISTS (SELECT 1 FROM icelog_tabulars AS t "
    "WHERE t.id = g.object_id) AND NOT EXISTS (SELECT 1 FROM icelog_deleted_tabulars AS d "
    "WHERE d.id = g.object_id)) OR "
    "(g.object_kind = 'warehouse' AND NOT EXISTS (SELECT 1 FROM icelog_warehouses AS w "
    "WHERE w.id = g.object_id)) OR "
    "(g.object_kind = 'project' AND NOT EXISTS (SELECT 1 FROM icelog_projects AS p "
    "WHERE p.id = g.object_id)) OR "
    "(g.object_kind = 'role' AND NOT EXISTS (SELECT 1 FROM icelog_roles AS r "
    "WHERE r.id = g.object_id)) OR "
    "(g.principal_kind = 'role' AND NOT EXISTS (SELECT 1 FROM icelog_roles AS r "
    "WHERE r.id = g.principal_id))"
)
# Users whose grants may be a deleted user's: no user row now, or one made after the grant
# (a user deleted, then provisioned again with the same subject).
_USERS_TO_CHECK = (
    "SELECT DISTINCT g.principal_id FROM icelog_grants AS g WHERE g.principal_kind = 'user' "
    "AND NOT EXISTS (SELECT 1 FROM icelog_users AS u WHERE u.id = g.principal_id "
    "AND u.created_at <= g.created_at)"
)
_USER_DELETED_TOPIC = "icelog.user.deleted.v1"


def _end_grants_of_gone_objects(cur: Any, target: Target) -> None:
    """Delete the grants an older release left behind when their object, or the user or
    role holding them, went (what a rebuild from the log now folds to; docs/operations.md,
    "Grants of objects that are gone")."""
    mark = "%s" if target.dialect == "postgres" else "?"
    cur.execute(f"DELETE FROM icelog_grants WHERE id IN ({_GRANTS_OF_GONE_OBJECTS})")
    cur.execute(_USERS_TO_CHECK)
    for (user_id,) in cur.fetchall():
        stream = user_aggregate_id(str(user_id))
        cur.execute(
            f"SELECT 1 FROM {target.events_table} WHERE originator_id = {mark} AND topic = {mark}",
            (stream if target.dialect == "postgres" else stream.hex, _USER_DELETED_TOPIC),
        )
        if cur.fetchone() is None:
            continue  # never deleted: a grant made before the user's first call stays
        cur.execute(
            "DELETE FROM icelog_grants WHERE principal_kind = 'user' AND principal_id = "
            f"{mark} AND NOT EXISTS (SELECT 1 FROM icelog_users AS u WHERE u.id = {mark} "
            "AND u.created_at <= icelog_grants.created_at)",
            (user_id, user_id),
        )


STEPS: tuple[Step, ...] = (
    Step(1, "event store, snapshots, catalog read model, task queue", _event_store),
    Step(2, "change-event relay positions", _statements(lambda _d: [publisher_positions.SCHEMA])),
    Step(3, "audit hash chain", _statements(lambda _d: [audit_chain.SCHEMA])),
    Step(4, "event index", _statements(event_index.schema)),
    Step(5, "storage credentials (encrypted)", _statements(lambda _d: [secrets.SCHEMA])),
    Step(
        6,
        "one-statement append of commits (PostgreSQL function)",
        _superseded_append_function,
        dialects=("postgres",),
    ),
    Step(7, "task outcomes in the task queue", _task_results),
    Step(8, "grace period for replaced storage credentials", _retire_column),
    Step(9, "catalog history (as-of)", _statements(catalog_history.schema)),
    Step(10, "users", _statements(lambda _d: schema.users_statements())),
    Step(11, "grants and roles", _statements(lambda _d: schema.grants_statements())),
    Step(12, "grant history (as-of)", _statements(catalog_history.grant_schema)),
    Step(13, "Iceberg events (the events API)", _statements(iceberg_events.schema)),
    Step(14, "functions (Iceberg UDFs)", _statements(schema.functions_statements)),
    Step(15, "locations found by index (overlap checks)", _statements(location_overlap.indexes)),
    Step(
        16,
        "one-statement append of creates; append functions keep index plans",
        _superseded_append_function,
        dialects=("postgres",),
    ),
    Step(17, "grants of objects that are gone end with them", _end_grants_of_gone_objects),
    Step(
        18,
        "one-statement append of the read model's rows, made from its fold",
        _append_rows_function,
        dialects=("postgres",),
    ),
)
LATEST = STEPS[-1].version


class SchemaError(Exception):
    """The database schema does not fit this icelog (the server refuses to start)."""


class SchemaTooNewError(SchemaError):
    """A newer icelog migrated the database."""


class SchemaOutdatedError(SchemaError):
    """The database needs `icelog migrate` before this icelog can serve it."""


class MigrationBusyError(Exception):
    """A step could not lock a table within the lock timeout (busy database); nothing
    was changed, and running the migration again is safe."""


@dataclass(frozen=True)
class Status:
    applied: tuple[int, ...]  # versions recorded in icelog_schema_version
    log_exists: bool  # the event table exists (a database from before versions were kept)
    newest_by: str | None  # the icelog version that applied the newest step

    @property
    def version(self) -> int:
        return max(self.applied, default=0)

    @property
    def fresh(self) -> bool:
        return not self.applied and not self.log_exists

    @property
    def pending(self) -> list[Step]:
        return [s for s in STEPS if s.version not in self.applied]

    @property
    def too_new(self) -> bool:
        return self.version > LATEST


def _read_status(cur: Any, target: Target) -> Status:
    if target.dialect == "postgres":
        # A plain read of pg_class, not to_regclass(): that one looks through the cached
        # catalog, which can still miss a table another migration created and committed
        # while this one waited for the advisory lock (seen: both applied step 1).
        cur.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
            "ON n.oid = c.relnamespace WHERE c.relname = %s AND n.nspname = current_schema()), "
            "EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
            "ON n.oid = c.relnamespace WHERE c.relname = %s AND n.nspname = current_schema())",
            (VERSION_TABLE, target.events_table),
        )
        has_versions, has_log = cur.fetchone()
    else:
        cur.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)",
            (VERSION_TABLE, target.events_table),
        )
        names = {row[0] for row in cur.fetchall()}
        has_versions, has_log = VERSION_TABLE in names, target.events_table in names
    if not has_versions:
        return Status((), bool(has_log), None)
    cur.execute(f"SELECT version, icelog_version FROM {VERSION_TABLE} ORDER BY version")
    rows = [tuple(r) for r in cur.fetchall()]
    return Status(tuple(int(r[0]) for r in rows), bool(has_log), str(rows[-1][1]) if rows else None)


def status(target: Target) -> Status:
    """The database's schema version, read without locks."""
    store = target.datastore
    if isinstance(store, PostgresDatastore):
        with store.get_connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
            return _read_status(cur, target)
    with store.transaction(commit=False) as cur:
        return _read_status(cur, target)


def too_new_message(found: Status, icelog_version: str) -> str:
    by = f" by icelog {found.newest_by}" if found.newest_by else ""
    return (
        f"the database schema is at version {found.version} (migrated{by}), newer than "
        f"this icelog {icelog_version} knows (version {LATEST}); run icelog "
        f"{found.newest_by or 'of that release'} or newer against this database"
    )


def outdated_message(found: Status) -> str:
    at = f"version {found.version}" if found.applied else "no recorded version"
    return (
        f"the database schema is at {at}; this icelog needs version {LATEST}: "
        "run `icelog migrate` first"
    )


def migrate(
    target: Target,
    *,
    icelog_version: str,
    lock_timeout_s: float = 5.0,
    only_if_fresh: bool = False,
) -> list[Step]:
    """Apply the pending steps (all in one transaction); returns those applied.

    `only_if_fresh`: initialise an empty database, but refuse to alter an existing one
    (SchemaOutdatedError) — what `icelog serve` does on PostgreSQL.
    Raises SchemaTooNewError when a newer icelog migrated the database.
    """
    store = target.datastore
    if isinstance(store, PostgresDatastore):
        try:
            with store.get_connection() as conn, conn.transaction():
                cur = conn.cursor(row_factory=tuple_row)
                # Wait for another migration (no timeout: it may legitimately take a
                # while), then bound each table lock so live traffic is never stalled.
                cur.execute("SET LOCAL lock_timeout = 0")
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                cur.execute(f"SET LOCAL lock_timeout = '{int(lock_timeout_s * 1000)}ms'")
                applied = _migrate_locked(cur, target, icelog_version, only_if_fresh=only_if_fresh)
        except Exception as exc:  # however the datastore wraps it
            if is_lock_timeout(exc):
                raise MigrationBusyError(
                    f"a table stayed locked by other sessions for over {lock_timeout_s:g} s; "
                    "nothing was changed: run the migration again"
                ) from None
            raise
        # The composite type the recorder inserts through may be new: register it.
        store.register_type_adapters()
        return applied
    with write_transaction(store) as cur:  # BEGIN IMMEDIATE: SQLite's write lock
        return _migrate_locked(cur, target, icelog_version, only_if_fresh=only_if_fresh)


def _migrate_locked(
    cur: Any, target: Target, icelog_version: str, *, only_if_fresh: bool
) -> list[Step]:
    found = _read_status(cur, target)  # again, now that no other migration runs
    if found.too_new:
        raise SchemaTooNewError(too_new_message(found, icelog_version))
    pending = found.pending
    if not pending:
        return []
    if only_if_fresh and not found.fresh:
        raise SchemaOutdatedError(outdated_message(found))
    cur.execute(_VERSION_DDL)
    marker = "%s" if target.dialect == "postgres" else "?"
    for step in pending:
        step.apply(cur, target)
        cur.execute(
            f"INSERT INTO {VERSION_TABLE} (version, description, applied_at, icelog_version) "
            f"VALUES ({marker}, {marker}, {marker}, {marker})",
            (
                step.version,
                step.description,
                datetime.now(UTC).isoformat(timespec="seconds"),
                icelog_version,
            ),
        )
    return pending


def prepare(
    target: Target, *, upgrade: bool, icelog_version: str, lock_timeout_s: float = 5.0
) -> list[Step]:
    """Make the schema fit this icelog before it is used; returns the steps applied.

    `upgrade=True` applies every pending step. `upgrade=False` only initialises an empty
    database and raises SchemaOutdatedError for an existing one that needs steps. Either
    way SchemaTooNewError when a newer icelog migrated the database.
    """
    found = status(target)
    if found.too_new:
        raise SchemaTooNewError(too_new_message(found, icelog_version))
    if not found.pending:
        return []
    if not upgrade and not found.fresh:
        raise SchemaOutdatedError(outdated_message(found))
    return migrate(
        target,
        icelog_version=icelog_version,
        lock_timeout_s=lock_timeout_s,
        only_if_fresh=not upgrade,
    )


def recorders_of(application: Any) -> Target:
    """The recorders of an eventsourcing application (events, and snapshots if kept)."""
    recorders: list[Any] = [application.recorder]
    snapshots = getattr(application, "snapshots", None)
    if snapshots is not None:
        recorders.append(snapshots.recorder)
    first = recorders[0]
    assert isinstance(first, PostgresApplicationRecorder | SQLiteApplicationRecorder)
    return Target(tuple(recorders))

"""The catalog's history: every state each project, warehouse, namespace, table and view
went through, as *versions* valid from one log position to another — the temporal read
model behind `GET /management/v1/as-of` (projections/as_of.py pages it).

An asynchronous projection. The event indexer (api/event_log.py) folds each batch of the
log into it in the same transaction as the batch's event-index rows, after locking its
tracking row: two indexers (replicas) never fold one event twice, and the history and the
index never disagree. Dropping the tables and catching up from position 0 gives the same
rows (tests/integration/test_catalog_history.py).

Tables:

- `icelog_catalog_versions`: one row per state of a project, warehouse, namespace, table or
  view; `to_position` is NULL while current (a partial unique index keeps one current
  version per entity). A version is visible at position P when `from_position <= P` and
  (`to_position` IS NULL or `to_position > P`). Its sort key (`warehouse_id`, `ns_key`,
  `kind`, `name`, `entity_id`, `from_position`) is indexed: as-of pages are range scans of
  it. A warehouse sorts first among its own rows, a namespace before its tables and views.
- `icelog_catalog_locations`: a table's or view's metadata location from each position on
  (creation, then every commit or replace). Commits never add a version above, so the page
  scan does not slow down with a table's commit count; the location at P is one index seek.
- `icelog_catalog_history_position`: the last position folded (one row).

The fold rules are those of the original in-memory fold: created/registered make a table or
view, commits and replaces move its metadata location, renames and undrops rename it and
make it live, a soft drop flags it, a drop or an expiry ends it (kept as a `dropped`
version, which as-of never shows); namespaces are created, recreated, change properties
and are dropped; projects and warehouses are created, renamed and deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from icelog.domain.grants import Grants
from icelog.domain.ownership import grants_ended_by, owned_by_creation
from icelog.projections.event_index import EventIndex, IndexRow
from icelog.projections.history_versions import (
    DROPPED,
    NAMESPACE,
    PROJECT,
    TABLE,
    TABULAR_LOCATED,
    UNCHANGED,
    VERSIONED,
    VIEW,
    WAREHOUSE,
    Version,
    next_version,
    version_from_row,
)
from icelog.projections.schema import grant_row_id
from icelog.projections.sql import SqlStore, write_transaction

VERSIONS = "icelog_catalog_versions"
LOCATIONS = "icelog_catalog_locations"
TRACKING = "icelog_catalog_history_position"
GRANTS = "icelog_grant_versions"
TABLES = (VERSIONS, LOCATIONS, TRACKING, GRANTS)

_COLUMNS = (
    "warehouse_id, ns_key, kind, name, entity_id, from_position, to_position, state, "
    "properties, project_id"
)
# The columns of a version row (`Version.row()`) and of a location row, with their kinds.
_VERSION_KINDS = (
    ("warehouse_id", "text"),
    ("ns_key", "text"),
    ("kind", "int8"),
    ("name", "text"),
    ("entity_id", "text"),
    ("from_position", "int8"),
    ("to_position", "int8"),
    ("state", "text"),
    ("properties", "text"),
    ("project_id", "text"),
)
_LOCATION_KINDS = (("entity_id", "text"), ("from_position", "int8"), ("metadata_location", "text"))
_IN_CHUNK = 500  # ids per IN (...) list: well inside SQLite's bound on parameters


def schema(dialect: str) -> list[str]:
    big = "BIGINT" if dialect == "postgres" else "INTEGER"
    # Byte order on PostgreSQL as on SQLite: pages sort alike on both, and the sort key's
    # index serves the row comparisons that resume a page.
    key = 'TEXT COLLATE "C"' if dialect == "postgres" else "TEXT"
    return [
        f"CREATE TABLE IF NOT EXISTS {VERSIONS} ("
        f"entity_id {key} NOT NULL, from_position {big} NOT NULL, to_position {big}, "
        f"kind INTEGER NOT NULL, warehouse_id {key} NOT NULL, ns_key {key} NOT NULL, "
        f"name {key} NOT NULL, state TEXT NOT NULL, properties TEXT, project_id TEXT, "
        "PRIMARY KEY (entity_id, from_position))",
        f"CREATE INDEX IF NOT EXISTS {VERSIONS}_by_key ON {VERSIONS} "
        "(warehouse_id, ns_key, kind, name, entity_id, from_position)",
        f"CREATE UNIQUE INDEX IF NOT EXISTS {VERSIONS}_current ON {VERSIONS} (entity_id) "
        "WHERE to_position IS NULL",
        f"CREATE TABLE IF NOT EXISTS {LOCATIONS} ("
        f"entity_id {key} NOT NULL, from_position {big} NOT NULL, "
        "metadata_location TEXT NOT NULL, PRIMARY KEY (entity_id, from_position))",
        f"CREATE TABLE IF NOT EXISTS {TRACKING} ("
        f"id INTEGER PRIMARY KEY CHECK (id = 1), position {big} NOT NULL)",
        # `ON CONFLICT` alone waits for an indexer's open transaction that moved the row,
        # while this schema transaction holds the SHARE lock its CREATE INDEX IF NOT EXISTS
        # took, which the indexer's next insert waits for: a deadlock between a starting
        # replica and a writing one. A row that is there is found and left alone; ON
        # CONFLICT is left for two first starts at once.
        f"INSERT INTO {TRACKING} (id, position) SELECT 1, 0 "
        f"WHERE NOT EXISTS (SELECT 1 FROM {TRACKING} WHERE id = 1) ON CONFLICT (id) DO NOTHING",
        *grant_schema(dialect),
    ]


def grant_schema(dialect: str) -> list[str]:
    """`icelog_grant_versions`: every grant with the log positions it held from and to
    (NULL: still held), for who-could-do-what-when (docs/auth.md)."""
    big = "BIGINT" if dialect == "postgres" else "INTEGER"
    return [
        f"CREATE TABLE IF NOT EXISTS {GRANTS} ("
        f"grant_id TEXT NOT NULL, from_position {big} NOT NULL, to_position {big}, "
        "object_kind TEXT NOT NULL, object_id TEXT NOT NULL, relation TEXT NOT NULL, "
        "principal_kind TEXT NOT NULL, principal_id TEXT NOT NULL, "
        "PRIMARY KEY (grant_id, from_position))",
        f"CREATE INDEX IF NOT EXISTS {GRANTS}_by_principal "
        f"ON {GRANTS} (principal_id, from_position)",
        f"CREATE INDEX IF NOT EXISTS {GRANTS}_by_object ON {GRANTS} (object_id, from_position)",
    ]


@dataclass
class BatchFold:
    """One batch of events folded in memory from the current versions of its entities,
    ready to be written: versions to end, versions to add, metadata locations to add."""

    current: dict[str, Version]
    ended: list[tuple[int, str, int]]  # (to_position, entity_id, from_position) of rows
    added: list[Version]
    locations: list[tuple[str, int, str]]

    @classmethod
    def starting_from(cls, current: dict[str, Version]) -> BatchFold:
        return cls(current, [], [], [])

    def apply(self, position: int, event: Any) -> None:
        agg = str(event.originator_id)
        if isinstance(event, TABULAR_LOCATED):
            self.locations.append((agg, position, event.metadata_location))
        if not isinstance(event, VERSIONED):
            return
        previous = self.current.get(agg)
        following = next_version(position, event, previous)
        if following is UNCHANGED:
            return
        if previous is not None:
            previous.to_position = position
            if previous.stored:
                self.ended.append((position, agg, previous.from_position))
        if following is None:
            self.current.pop(agg, None)
        else:
            self.added.append(following)
            self.current[agg] = following


def versioned_ids(events: Sequence[tuple[int, Any]]) -> list[str]:
    """The entities whose current version a batch needs."""
    return sorted({str(e.originator_id) for _, e in events if isinstance(e, VERSIONED)})


class CatalogHistory(SqlStore):
    def ensure_schema(self) -> None:
        with write_transaction(self._datastore) as cur:
            for statement in schema(self.dialect):
                self._execute(cur, statement)

    def drop(self) -> None:
        """Drop the tables (a rebuild: `ensure_schema` and a catch-up refill them).

        The position first: a writer locks it before the other tables, so taking it first
        makes a drop wait for a running writer instead of deadlocking with it."""
        with write_transaction(self._datastore) as cur:
            for table in (TRACKING, *(t for t in TABLES if t != TRACKING)):
                self._execute(cur, f"DROP TABLE IF EXISTS {table}")

    def position(self) -> int:
        found = self._run(f"SELECT position FROM {TRACKING} WHERE id = 1")
        return int(found[0][0]) if found else 0

    # -- the write side ---------------------------------------------------------------------
    def write_batch(
        self,
        index: EventIndex,
        rows: Sequence[IndexRow],
        events: Sequence[tuple[int, Any]],
        also: Callable[[Any], None] | None = None,
    ) -> None:
        """A batch's event-index rows and history versions, in one transaction (with what
        `also` writes on its cursor). Events at or before the history's position were
        folded already (by another indexer, or before the index was rebuilt) and are
        skipped."""
        with write_transaction(self._datastore) as cur:
            folded = self._lock_position(cur)  # first: concurrent indexers queue here
            index.write(rows, cur)
            if also is not None:
                also(cur)
            todo = [(p, e) for p, e in events if p > folded]
            if not todo:
                return
            self._fold(cur, todo)
            self._execute(cur, f"UPDATE {TRACKING} SET position = ? WHERE id = 1", (todo[-1][0],))

    def _lock_position(self, cur: Any) -> int:
        lock = " FOR UPDATE" if self.dialect == "postgres" else ""
        self._execute(cur, f"SELECT position FROM {TRACKING} WHERE id = 1{lock}")
        found = cur.fetchone()
        return int(found[0]) if found else 0

    def _fold_grants(self, cur: Any, position: int, event: Any) -> None:
        """Grants begin and end (in log order, within the batch's transaction)."""
        Grant = tuple[str, str, str, str, str]
        begin: Grant | None = None
        end: Grant | None = None
        if isinstance(event, Grants.Granted | Grants.Revoked):
            grant = (event.object_kind, event.object_id, event.relation,
                     event.principal_kind, event.principal_id)  # fmt: skip
            begin, end = (grant, None) if isinstance(event, Grants.Granted) else (None, grant)
        elif (ended := grants_ended_by(event)) is not None:
            # The object or principal is gone: so are its grants (as in the live read model).
            if ended.on is not None:
                self._execute(
                    cur,
                    f"UPDATE {GRANTS} SET to_position = ? WHERE to_position IS NULL AND "
                    "object_id = ? AND object_kind = ?",
                    (position, ended.on.id, ended.on.kind),
                )
            if ended.held_by is not None:
                self._execute(
                    cur,
                    f"UPDATE {GRANTS} SET to_position = ? WHERE to_position IS NULL AND "
                    "principal_id = ? AND principal_kind = ?",
                    (position, ended.held_by.id, ended.held_by.kind),
                )
            return
        else:
            owned = owned_by_creation(event)
            if owned is not None:
                begin = (owned.kind, owned.id, "ownership", "user", event.actor)
        for found in (end, begin):
            if found is None:
                continue
            grant = found
            grant_id = grant_row_id(grant[1], grant[2], grant[3], grant[4])
            self._execute(
                cur,
                f"UPDATE {GRANTS} SET to_position = ? WHERE grant_id = ? AND to_position IS NULL",
                (position, grant_id),
            )
            if grant is begin:
                self._execute(
                    cur,
                    f"INSERT INTO {GRANTS} (grant_id, from_position, to_position, object_kind, "
                    "object_id, relation, principal_kind, principal_id) "
                    "VALUES (?, ?, NULL, ?, ?, ?, ?, ?)",
                    (grant_id, position, *grant),
                )

    def grants_at(
        self, cur: Any, position: int, *, principal_ids: Sequence[str] = (), object_id: str = ""
    ) -> list[tuple[str, str, str, str, str]]:
        """Grants held at `position`, of these principals or on this object:
        (object kind, object id, relation, principal kind, principal id)."""
        if object_id:
            where, params = "object_id = ?", [object_id]
        else:
            if not principal_ids:
                return []
            where = f"principal_id IN ({', '.join('?' * len(principal_ids))})"
            params = list(principal_ids)
        self._execute(
            cur,
            f"SELECT object_kind, object_id, relation, principal_kind, principal_id FROM {GRANTS} "
            f"WHERE {where} AND from_position <= ? AND (to_position IS NULL OR to_position > ?) "
            "ORDER BY object_id, relation, principal_kind, principal_id",
            [*params, position, position],
        )
        return [(r[0], r[1], r[2], r[3], r[4]) for r in cur.fetchall()]

    def _fold(self, cur: Any, events: Sequence[tuple[int, Any]]) -> None:
        for position, event in events:
            self._fold_grants(cur, position, event)
        fold = BatchFold.starting_from(self._current(cur, versioned_ids(events)))
        for position, event in events:
            fold.apply(position, event)
        if fold.ended:
            cur.executemany(
                self._sql(
                    f"UPDATE {VERSIONS} SET to_position = ? "
                    "WHERE entity_id = ? AND from_position = ?"
                ),
                fold.ended,
            )
        self._insert_rows(cur, VERSIONS, _VERSION_KINDS, [v.row() for v in fold.added])
        self._insert_rows(cur, LOCATIONS, _LOCATION_KINDS, fold.locations)

    def _current(self, cur: Any, ids: Sequence[str]) -> dict[str, Version]:
        found: dict[str, Version] = {}
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            marks = ", ".join("?" * len(chunk))
            self._execute(
                cur,
                f"SELECT {_COLUMNS} FROM {VERSIONS} "
                f"WHERE to_position IS NULL AND entity_id IN ({marks})",
                chunk,
            )
            for row in cur.fetchall():
                version = version_from_row(tuple(row))
                found[version.entity_id] = version
        return found

    def analyze(self) -> None:
        """Fresh planner statistics after a bulk catch-up (see EventIndex.analyze)."""
        if self.dialect == "postgres":
            for table in (VERSIONS, LOCATIONS):
                self._run(f"ANALYZE {table}", fetch=False)

    # -- the read side (`reading()`: versions at or before the history's position never
    # change — a later event only sets `to_position` beyond it — so no snapshot is needed) --
    def projects_at(self, cur: Any, position: int) -> list[Version]:
        return self._visible(
            cur, "warehouse_id = '' AND ns_key = '' AND kind = ?", [PROJECT], position
        )

    def warehouse_at(self, cur: Any, position: int, warehouse_id: str) -> Version | None:
        found = self._visible(
            cur,
            "warehouse_id = ? AND ns_key = '' AND kind = ?",
            [warehouse_id, WAREHOUSE],
            position,
        )
        return found[0] if found else None

    def namespace_at(self, cur: Any, position: int, warehouse_id: str, key: str) -> Version | None:
        found = self._visible(
            cur,
            "warehouse_id = ? AND ns_key = ? AND kind = ?",
            [warehouse_id, key, NAMESPACE],
            position,
        )
        return found[0] if found else None

    def existed_at(self, cur: Any, position: int, entity_id: str) -> bool:
        """Whether the project, warehouse, namespace, table or view `entity_id` existed at
        `position` (a soft-deleted table or view still exists; a dropped one does not)."""
        found = self._visible(cur, "entity_id = ?", [entity_id], position)
        return any(v.state != DROPPED for v in found)

    def _visible(self, cur: Any, where: str, params: list[Any], position: int) -> list[Version]:
        """Few rows: every version of a handful of entities, filtered to those visible."""
        self._execute(
            cur,
            f"SELECT {_COLUMNS} FROM {VERSIONS} WHERE {where} AND from_position <= ? "
            "AND (to_position IS NULL OR to_position > ?) "
            "ORDER BY warehouse_id, ns_key, kind, name, entity_id, from_position",
            [*params, position, position],
        )
        return [version_from_row(tuple(r)) for r in cur.fetchall()]

    def scan(
        self,
        cur: Any,
        position: int,
        after: tuple[str, str, int, str, str, int] | None,
        warehouse_id: str | None,
        limit: int,
    ) -> list[Version]:
        """The next `limit` versions in sort-key order after `after` (visible at `position`
        or not: the caller filters, so the rows read stay bounded), projects excluded;
        tables and views visible then come with their metadata location then."""
        where, params = self._scan_range(after, warehouse_id)
        self._execute(
            cur,
            f"SELECT {_COLUMNS}, CASE WHEN v.kind IN (?, ?) AND v.from_position <= ? "
            "AND (v.to_position IS NULL OR v.to_position > ?) THEN "
            f"(SELECT l.metadata_location FROM {LOCATIONS} l WHERE l.entity_id = v.entity_id "
            "AND l.from_position <= ? ORDER BY l.from_position DESC LIMIT 1) END "
            f"FROM {VERSIONS} v WHERE {where} "
            "ORDER BY warehouse_id, ns_key, kind, name, entity_id, from_position LIMIT ?",
            [TABLE, VIEW, position, position, position, *params, limit],
        )
        return [version_from_row(tuple(r)) for r in cur.fetchall()]

    @staticmethod
    def _scan_range(
        after: tuple[str, str, int, str, str, int] | None, warehouse_id: str | None
    ) -> tuple[str, list[Any]]:
        """The scan's WHERE clause, written so that SQLite, too, seeks the sort key's index
        to `after` (it does for a row value that leads the clause, not behind another
        range on warehouse_id)."""
        if warehouse_id is not None:
            if after is None:
                return "warehouse_id = ?", [warehouse_id]
            return (
                "warehouse_id = ? AND (ns_key, kind, name, entity_id, from_position) "
                "> (?, ?, ?, ?, ?)",
                [warehouse_id, *after[1:]],
            )
        if after is None:
            return "warehouse_id > ''", []  # '' holds the projects
        # A key read before belongs to a warehouse: what follows it is past the projects.
        return (
            "(warehouse_id, ns_key, kind, name, entity_id, from_position) > (?, ?, ?, ?, ?, ?)",
            list(after),
        )

    def rows(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """Every version and location row, in key order (what a rebuild must reproduce)."""
        versions = self._run(f"SELECT {_COLUMNS} FROM {VERSIONS} ORDER BY entity_id, from_position")
        locations = self._run(
            f"SELECT entity_id, from_position, metadata_location FROM {LOCATIONS} "
            "ORDER BY entity_id, from_position"
        )
        return versions, locations

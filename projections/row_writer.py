"""Runs the fold's row operations (row_ops.py) through a DB-API cursor, one statement each.

The statement-at-a-time writer of the catalog read model, on SQLite and PostgreSQL alike:
the inline projection inside the append's transaction (`guard=True`) and the rebuild
(`guard=False`). It decides nothing about rows; it only turns each operation into SQL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache, singledispatch, singledispatchmethod
from typing import Any

from eventsourcing.persistence import IntegrityError

from icelog.projections import location_overlap
from icelog.projections.fold import rows_of
from icelog.projections.row_ops import (
    Check,
    Delete,
    Insert,
    InsertIfAbsent,
    Move,
    NamespaceEmpty,
    NamespaceExists,
    NamespaceOfExists,
    NoOverlap,
    ObjectExists,
    Op,
    ProjectHasNoRoles,
    Require,
    Update,
    Write,
)

# A DB-API cursor of either library (sqlite3 via eventsourcing, or psycopg): their
# execute() signatures differ, so the type stays open.
Cursor = Any

# Where each kind of object lives while it exists (a soft-dropped table or view still
# exists: an undrop brings it back with its grants).
_OBJECT_ROWS: Mapping[str, tuple[str, ...]] = {
    "project": ("SELECT 1 FROM {p}icelog_projects WHERE id = ?",),
    "warehouse": ("SELECT 1 FROM {p}icelog_warehouses WHERE id = ?",),
    "namespace": ("SELECT 1 FROM {p}icelog_namespaces WHERE id = ?",),
    "table": (
        "SELECT 1 FROM {p}icelog_tabulars WHERE id = ? AND kind = 'table'",
        "SELECT 1 FROM {p}icelog_deleted_tabulars WHERE id = ? AND kind = 'table'",
    ),
    "view": (
        "SELECT 1 FROM {p}icelog_tabulars WHERE id = ? AND kind = 'view'",
        "SELECT 1 FROM {p}icelog_deleted_tabulars WHERE id = ? AND kind = 'view'",
    ),
    "role": ("SELECT 1 FROM {p}icelog_roles WHERE id = ?",),
}


@lru_cache(maxsize=512)
def _write_sql(kind: str, table: str, columns: tuple[str, ...]) -> str:
    """The statement of a write; `?` markers, `{p}` for the tables' prefix."""
    names = ", ".join(columns)
    marks = ", ".join("?" * len(columns))
    if kind == "insert":
        return f"INSERT INTO {{p}}{table} ({names}) VALUES ({marks})"
    if kind == "insert_if_absent":
        return f"INSERT INTO {{p}}{table} ({names}) VALUES ({marks}) ON CONFLICT (id) DO NOTHING"
    if kind == "update":
        return f"UPDATE {{p}}{table} SET {', '.join(f'{c} = ?' for c in columns)} WHERE id = ?"
    if kind == "delete":
        return f"DELETE FROM {{p}}{table} WHERE {' AND '.join(f'{c} = ?' for c in columns)}"
    raise ValueError(kind)


@lru_cache(maxsize=64)
def _move_sql(
    source: str,
    target: str,
    columns: tuple[str, ...],
    replaced: tuple[str, ...],
    extra: tuple[str, ...],
) -> str:
    picked = ", ".join("?" if c in replaced else c for c in columns)
    names = ", ".join((*columns, *extra))
    added = "".join(", ?" for _ in extra)
    return (
        f"INSERT INTO {{p}}{target} ({names}) SELECT {picked}{added} "
        f"FROM {{p}}{source} WHERE id = ?"
    )


@singledispatch
def statements(op: Write) -> list[tuple[str, tuple[Any, ...]]]:
    """The SQL of one write and its parameters."""
    raise TypeError(f"not a row operation: {op!r}")


@statements.register
def _(op: Insert) -> list[tuple[str, tuple[Any, ...]]]:
    return [(_write_sql("insert", op.table, tuple(op.row)), tuple(op.row.values()))]


@statements.register
def _(op: InsertIfAbsent) -> list[tuple[str, tuple[Any, ...]]]:
    return [(_write_sql("insert_if_absent", op.table, tuple(op.row)), tuple(op.row.values()))]


@statements.register
def _(op: Update) -> list[tuple[str, tuple[Any, ...]]]:
    return [(_write_sql("update", op.table, tuple(op.values)), (*op.values.values(), op.id))]


@statements.register
def _(op: Delete) -> list[tuple[str, tuple[Any, ...]]]:
    return [(_write_sql("delete", op.table, tuple(op.where)), tuple(op.where.values()))]


@statements.register
def _(op: Move) -> list[tuple[str, tuple[Any, ...]]]:
    replaced = tuple(c for c in op.columns if c in op.values)
    sql = _move_sql(op.source, op.target, op.columns, replaced, tuple(op.extra))
    params = (*(op.values[c] for c in replaced), *op.extra.values(), op.id)
    return [(sql, params), (_write_sql("delete", op.source, ("id",)), (op.id,))]


class RowWriter:
    """Applies events' row operations to the `{prefix}icelog_*` tables."""

    def __init__(self, dialect: str, prefix: str = "", *, guard: bool = False) -> None:
        self.dialect = dialect
        self.prefix = prefix
        # Live appends only (the inline projection), never a rebuild of what the log holds:
        # inside the append's transaction, where appends are serialised, refuse (as a
        # conflict: the command reloads and answers) what two concurrent commands that
        # each passed their own check could otherwise both land — a table or view
        # location that overlaps another's, something created in a namespace that is
        # gone, a namespace dropped while it still holds something (ADR 0018).
        self.guard = guard

    def sql(self, statement: str) -> str:
        statement = statement.replace("{p}", self.prefix)
        return statement.replace("?", "%s") if self.dialect == "postgres" else statement

    def execute(self, cur: Cursor, statement: str, params: Sequence[Any]) -> None:
        if self.dialect == "postgres":
            # Never prepare inside the library's pipeline: when an append loses a version
            # race the pipeline aborts, and psycopg would still believe the statement was
            # prepared ("prepared statement _pg3_N does not exist" on the next use).
            cur.execute(self.sql(statement), params, prepare=False)
        else:
            cur.execute(self.sql(statement), params)

    def apply(self, cur: Cursor, events: Sequence[object], hints: Mapping[str, bytes]) -> None:
        for event in events:
            self.apply_one(cur, event, hints)

    def apply_one(self, cur: Cursor, event: object, hints: Mapping[str, bytes]) -> None:
        self.run(cur, rows_of(event, hints, CursorReads(self, cur)))

    def run(self, cur: Cursor, ops: Sequence[Op]) -> None:
        """Run one event's operations in order; a failed `always` check skips the rest."""
        for op in ops:
            if isinstance(op, Require):
                if not (self.guard or op.always) or self.holds(cur, op.check):
                    continue
                if self.guard:
                    raise IntegrityError(op.message)
                return
            self.write(cur, op)

    def write(self, cur: Cursor, op: Write) -> None:
        for statement, params in statements(op):
            self.execute(cur, statement, params)

    def _found(self, cur: Cursor, statement: str, params: Sequence[Any]) -> bool:
        self.execute(cur, statement, params)
        return cur.fetchone() is not None

    @singledispatchmethod
    def _holds(self, check: Check, cur: Cursor) -> bool:
        raise TypeError(f"not a check: {check!r}")

    def holds(self, cur: Cursor, check: Check) -> bool:
        return self._holds(check, cur)

    @_holds.register
    def _(self, check: ObjectExists, cur: Cursor) -> bool:
        found = _OBJECT_ROWS.get(check.kind)
        if found is None:  # the server
            return True
        return any(self._found(cur, s, (check.id,)) for s in found)

    @_holds.register
    def _(self, check: NamespaceExists, cur: Cursor) -> bool:
        return self._found(
            cur,
            "SELECT 1 FROM {p}icelog_namespaces WHERE warehouse_id = ? AND ns_key = ?",
            (check.warehouse_id, check.ns_key),
        )

    @_holds.register
    def _(self, check: NamespaceOfExists, cur: Cursor) -> bool:
        return self._found(
            cur,
            f"SELECT 1 FROM {{p}}{check.table} AS t JOIN {{p}}icelog_namespaces AS n "
            "ON n.warehouse_id = t.warehouse_id AND n.ns_key = ? WHERE t.id = ?",
            (check.ns_key, check.id),
        )

    @_holds.register
    def _(self, check: NamespaceEmpty, cur: Cursor) -> bool:
        return not self._holds_something(cur, check.id)

    @_holds.register
    def _(self, check: ProjectHasNoRoles, cur: Cursor) -> bool:
        return not self._found(
            cur, "SELECT 1 FROM {p}icelog_roles WHERE project_id = ? LIMIT 1", (check.id,)
        )

    @_holds.register
    def _(self, check: NoOverlap, cur: Cursor) -> bool:
        return not self._overlaps(cur, check)

    def _holds_something(self, cur: Cursor, nid: str) -> bool:
        # One statement: it runs inside the append.
        held = "SELECT 1 FROM {p}%s AS c WHERE c.warehouse_id = n.warehouse_id AND c.%s = n.ns_key"
        inside = " OR ".join(
            f"EXISTS ({held % (table, column)})"
            for table, column in (
                ("icelog_tabulars", "ns_key"),
                ("icelog_deleted_tabulars", "ns_key"),
                ("icelog_functions", "ns_key"),
                ("icelog_namespaces", "parent_key"),
            )
        )
        return self._found(
            cur, f"SELECT 1 FROM {{p}}icelog_namespaces AS n WHERE n.id = ? AND ({inside})", (nid,)
        )

    def _overlaps(self, cur: Cursor, check: NoOverlap) -> bool:
        warehouse_id = check.warehouse_id
        if warehouse_id is None:
            self.execute(
                cur, "SELECT warehouse_id FROM {p}icelog_tabulars WHERE id = ?", (check.id,)
            )
            row = cur.fetchone()
            if row is None:
                return False
            warehouse_id = str(row[0])
        overlaps, params = location_overlap.clause(self.dialect, check.location)
        # Live and soft-dropped rows in one statement: this runs inside the append, where
        # every round trip lengthens the time the event table is locked.
        where = f"WHERE warehouse_id = ? AND id <> ? AND {overlaps}"
        return self._found(
            cur,
            f"SELECT 1 FROM (SELECT 1 FROM {{p}}icelog_tabulars {where} "
            f"UNION ALL SELECT 1 FROM {{p}}icelog_deleted_tabulars {where}) AS found LIMIT 1",
            (warehouse_id, check.id, *params, warehouse_id, check.id, *params),
        )


class CursorReads:
    """The fold's reads (row_ops.Reads) through the writer's cursor."""

    def __init__(self, writer: RowWriter, cur: Cursor) -> None:
        self.writer = writer
        self.cur = cur

    def _one(self, statement: str, key: str) -> Any:
        self.writer.execute(self.cur, statement, (key,))
        return self.cur.fetchone()[0]

    def tabular_document(self, tabular_id: str) -> bytes:
        return bytes(self._one("SELECT metadata FROM {p}icelog_tabulars WHERE id = ?", tabular_id))

    def function_document(self, function_id: str) -> bytes:
        return bytes(
            self._one("SELECT metadata FROM {p}icelog_functions WHERE id = ?", function_id)
        )

    def namespace_properties(self, namespace_id: str) -> bytes:
        found = self._one("SELECT properties FROM {p}icelog_namespaces WHERE id = ?", namespace_id)
        return str(found).encode()

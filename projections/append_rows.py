"""The one-round-trip PostgreSQL append: the fold's rows sent as arrays to one function.

The inline projection (row_writer.py) runs the fold's operations one statement at a
time, each a round trip inside the append's locked transaction. Most appends hold only
operations of a few kinds: tables and views created (with their guards and their
creator's ownership) and commits that move a tabular to a document the command handed
in. `ARRAY_WRITES` names those kinds; `plan` takes a batch's operations from the same
fold (projections/fold.py) and, when every one of them is of those kinds, groups them
into one array per column; `function_sql` generates the server-side function that writes
them, so the rows it writes are the fold's, never a second copy of its rules. Any other
batch (a read needed, another table, another guard) is None and takes the general path.

Changing `ARRAY_WRITES` changes the function's parameters: ship it with a migration step
that creates the new function (projections/migrations.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from icelog.projections import location_overlap, pg_binary
from icelog.projections.catalog_rows import COMMIT_COLUMNS
from icelog.projections.fold import rows_of
from icelog.projections.row_ops import (
    Insert,
    InsertIfAbsent,
    NamespaceExists,
    NeedsReadError,
    NoOverlap,
    NoReads,
    Op,
    Require,
    Update,
)
from icelog.projections.schema import TABULAR_COLUMN_NAMES

FUNCTION = "icelog_append_rows"
_TYPES = {"metadata": "bytea", "version": "bigint"}  # every other column is text


@dataclass(frozen=True)
class ArrayWrite:
    """A kind of write the function takes: one array parameter per column."""

    op: type[Insert | InsertIfAbsent | Update]
    table: str
    columns: tuple[str, ...]  # an update's first column is the row's id

    def types(self) -> tuple[str, ...]:
        return tuple(_TYPES.get(c, "text") for c in self.columns)


NEW_TABULARS = ArrayWrite(Insert, "icelog_tabulars", TABULAR_COLUMN_NAMES)
NEW_GRANTS = ArrayWrite(
    InsertIfAbsent,
    "icelog_grants",
    ("id", "object_kind", "object_id", "relation", "principal_kind", "principal_id", "created_at"),
)
COMMITS = ArrayWrite(Update, "icelog_tabulars", ("id", *COMMIT_COLUMNS))
# In the order the function writes them: new rows first, so two creates of one batch see
# each other in the guards.
ARRAY_WRITES = (NEW_TABULARS, NEW_GRANTS, COMMITS)


@dataclass
class Planned:
    """A batch's rows, one list of rows per entry of ARRAY_WRITES, and the overlap
    probes of the new tabulars (for each, the locations that would hold it)."""

    rows: list[list[tuple[Any, ...]]] = field(default_factory=lambda: [[] for _ in ARRAY_WRITES])
    updates: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def params(self, encoding: str) -> list[pg_binary.Encoded]:
        """The function's parameters after the events."""
        found: list[pg_binary.Encoded] = []
        self.rows[_COMMITS_AT] = list(self.updates.values())
        for write, rows in zip(ARRAY_WRITES, self.rows, strict=True):
            if not rows:  # most batches are of one kind: the other arrays are empty
                found.extend(_empty(write, encoding))
                continue
            columns = zip(_WRITE_TYPES[write], zip(*rows, strict=True), strict=True)
            found.extend(_array(kind, values, encoding) for kind, values in columns)
        new = self.rows[_NEW_TABULARS_AT]
        probes = [
            (n, h) for n, row in enumerate(new, 1) for h in location_overlap.holders(row[_LOCATION])
        ]
        found.append(pg_binary.int4_array([n for n, _ in probes]))
        found.append(pg_binary.text_array([h for _, h in probes], encoding))
        return found


_WRITE_TYPES = {write: write.types() for write in ARRAY_WRITES}
_COMMITS_AT, _NEW_TABULARS_AT = ARRAY_WRITES.index(COMMITS), ARRAY_WRITES.index(NEW_TABULARS)
_LOCATION = NEW_TABULARS.columns.index("location")


@lru_cache(maxsize=16)
def _empty(write: ArrayWrite, encoding: str) -> list[pg_binary.Encoded]:
    """The empty arrays of a kind of write (encoded once: they never change)."""
    return [_array(kind, [], encoding) for kind in _WRITE_TYPES[write]]


def _array(kind: str, values: Sequence[Any], encoding: str) -> pg_binary.Encoded:
    if kind == "bytea":
        return pg_binary.bytea_array(values)
    if kind == "bigint":
        return pg_binary.int8_array(values)
    return pg_binary.text_array(values, encoding)


def _guards_of(row: Mapping[str, Any]) -> set[object]:
    """The checks the function makes for a new tabular (see `function_sql`)."""
    return {
        NamespaceExists(row["warehouse_id"], row["ns_key"]),
        NoOverlap(row["warehouse_id"], row["id"], row["location"]),
    }


def _array_write(op: Op) -> ArrayWrite | None:
    if isinstance(op, Insert | InsertIfAbsent):
        for write in (NEW_TABULARS, NEW_GRANTS):
            if (type(op), op.table, tuple(op.row)) == (write.op, write.table, write.columns):
                return write
    return None


def plan(events: Sequence[object] | None, hints: Mapping[str, bytes]) -> Planned | None:
    """The arrays `events` write, or None when one of their operations needs the
    general path."""
    if not events:
        return None
    ops: list[Op] = []
    try:
        for event in events:
            ops.extend(rows_of(event, hints, NoReads()))
    except NeedsReadError:
        return None
    planned = Planned()
    checks: set[object] = set()
    guarded: set[object] = set()
    for op in ops:
        if isinstance(op, Require):
            checks.add(op.check)
        elif isinstance(op, Update) and (op.table, (*op.values,)) == (
            COMMITS.table,
            COMMITS.columns[1:],
        ):
            # A later commit of the same tabular supersedes (it overwrites every column).
            planned.updates[op.id] = (op.id, *op.values.values())
        else:
            write = _array_write(op)
            if write is None:
                return None
            row = op.row  # type: ignore[union-attr]
            if write is NEW_TABULARS:
                if len(location_overlap.holders(row["location"])) > location_overlap.MAX_PREFIXES:
                    return None  # a hostile depth: the general path's direct test answers it
                guarded |= _guards_of(row)
            planned.rows[ARRAY_WRITES.index(write)].append(tuple(row.values()))
    new_ids = {r[0] for r in planned.rows[ARRAY_WRITES.index(NEW_TABULARS)]}
    if checks != guarded or new_ids & planned.updates.keys():
        # Another guard than the function's, or a tabular created and committed in one
        # batch (the function's order would not be the events' order).
        return None
    return planned


def parameters() -> str:
    """The function's parameter list (`{schema}`, `{event}`: names the recorder fills in)."""
    arrays = [
        f"a{n}_{column} {kind}[]"
        for n, write in enumerate(ARRAY_WRITES)
        for column, kind in zip(write.columns, write.types(), strict=True)
    ]
    return ", ".join(
        ["events {schema}.{event}[]", *arrays, "probe_rows int[]", "probe_locations text[]"]
    )


def parameter_count() -> int:
    return 1 + sum(len(w.columns) for w in ARRAY_WRITES) + 2


def _unnest(n: int, write: ArrayWrite) -> str:
    arrays = ", ".join(f"a{n}_{c}" for c in write.columns)
    return f"unnest({arrays}) AS u({', '.join(write.columns)})"


def _write_sql(n: int, write: ArrayWrite) -> str:
    table = "{schema}." + write.table
    if write.op is Update:
        sets = ", ".join(f"{c} = u.{c}" for c in write.columns[1:])
        return f"UPDATE {table} AS t SET {sets} FROM {_unnest(n, write)} WHERE t.id = u.id; "
    names = ", ".join(write.columns)
    conflict = " ON CONFLICT (id) DO NOTHING" if write.op is InsertIfAbsent else ""
    return f"INSERT INTO {table} ({names}) SELECT * FROM {_unnest(n, write)}{conflict}; "


def _new_tabular_guards() -> str:
    """The checks `_guards_of` names, for every new tabular: its location overlaps no
    other table's or view's of the warehouse, live or soft-dropped (an integrity
    violation, as a version conflict is: the command's retry then answers 409), and its
    namespace exists (404)."""
    n = ARRAY_WRITES.index(NEW_TABULARS)
    # One new row at a time, each test an index lookup planned with the row's values
    # (EXECUTE): a kept plan, made on a small catalog, chose an index by warehouse alone
    # and read every location of the warehouse per create.
    overlaps = " OR ".join(
        "EXISTS (SELECT 1 FROM {schema}." + table + " AS t WHERE t.warehouse_id = $1 "
        f"AND {test} AND t.id <> $3)"
        for table in ("icelog_tabulars", "icelog_deleted_tabulars")
        for test in (
            "t.location = ANY($2)",
            "t.location COLLATE \"C\" >= $4 || '/' AND t.location COLLATE \"C\" < $4 || '0'",
        )
    )
    return (
        f"FOR i IN 1 .. coalesce(array_length(a{n}_id, 1), 0) LOOP "
        "held := ARRAY(SELECT p.loc FROM unnest(probe_rows, probe_locations) AS p(r, loc) "
        "WHERE p.r = i); "
        f"EXECUTE $q$SELECT {overlaps}$q$ INTO overlapping "
        f"USING a{n}_warehouse_id[i], held, a{n}_id[i], a{n}_location[i]; "
        "IF overlapping THEN "
        "RAISE EXCEPTION 'icelog: a new location overlaps another table''s or view''s' "
        "USING ERRCODE = 'unique_violation'; "
        "END IF; "
        "END LOOP; "
        f"IF EXISTS (SELECT 1 FROM unnest(a{n}_warehouse_id, a{n}_ns_key) AS n(w, k) "
        "WHERE NOT EXISTS (SELECT 1 FROM {schema}.icelog_namespaces AS s "
        "WHERE s.warehouse_id = n.w AND s.ns_key = n.k)) THEN "
        "RAISE EXCEPTION 'icelog: the namespace of a new table or view does not exist' "
        "USING ERRCODE = 'foreign_key_violation'; "
        "END IF; "
    )


def function_body() -> str:
    """The writes after the events: each kind only when the batch has rows of it."""
    body = []
    for n, write in enumerate(ARRAY_WRITES):
        guards = _new_tabular_guards() if write is NEW_TABULARS else ""
        body.append(f"IF cardinality(a{n}_id) > 0 THEN {_write_sql(n, write)}{guards}END IF; ")
    return "".join(body)

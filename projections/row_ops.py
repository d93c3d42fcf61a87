"""Row operations: what the catalog read model's fold decides, before anything runs.

The fold (projections/catalog_rows.py) turns each event into a list of these values and
nothing else decides a read-model row: `RowWriter` (projections/row_writer.py) runs them
one statement each on either database, and on PostgreSQL the one-round-trip append
(projections/append_rows.py) sends the same values as arrays to a function generated
from the kinds of operation it can take. A new rule is written once, in the fold.

Writes name a table and a row (column -> value). Checks are the append's guards (live
only: two concurrent commands that each passed their own check must not both land) and,
with `always`, a condition a rebuild also honours by skipping the rest of the event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Insert:
    table: str
    row: Row


@dataclass(frozen=True)
class InsertIfAbsent:
    """Insert unless a row with the same id exists (the id is the primary key)."""

    table: str
    row: Row


@dataclass(frozen=True)
class Update:
    table: str
    id: str
    values: Row


@dataclass(frozen=True)
class Delete:
    """Delete the rows whose columns equal `where` (column -> value, all must match)."""

    table: str
    where: Row


@dataclass(frozen=True)
class Move:
    """Copy row `id` of `source` into `target` with `values` replacing some of its
    `columns` and `extra` filling the target's own columns, then delete it from `source`
    (a soft drop, an undrop)."""

    source: str
    target: str
    id: str
    columns: tuple[str, ...]
    values: Row
    extra: Row = field(default_factory=dict)


Write = Insert | InsertIfAbsent | Update | Delete | Move


# -- checks ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ObjectExists:
    """The object (kind "project", "warehouse", "namespace", "table", "view", "role")
    exists; a soft-dropped table or view still exists. Kinds without rows (the server)
    always exist."""

    kind: str
    id: str


@dataclass(frozen=True)
class NamespaceExists:
    warehouse_id: str
    ns_key: str


@dataclass(frozen=True)
class NamespaceOfExists:
    """Namespace `ns_key` exists in the warehouse of tabular `id`, found in `table`."""

    table: str
    id: str
    ns_key: str


@dataclass(frozen=True)
class NamespaceEmpty:
    """Namespace `id` holds no table, view (live or soft-dropped), function or namespace."""

    id: str


@dataclass(frozen=True)
class ProjectHasNoRoles:
    id: str


@dataclass(frozen=True)
class NoOverlap:
    """`location` (normalised) overlaps no other tabular's of the warehouse (None: the
    warehouse of tabular `id`), live or soft-dropped."""

    warehouse_id: str | None
    id: str
    location: str


Check = (
    ObjectExists
    | NamespaceExists
    | NamespaceOfExists
    | NamespaceEmpty
    | ProjectHasNoRoles
    | NoOverlap
)


@dataclass(frozen=True)
class Require:
    """`check` must hold. Live (a guarded writer): IntegrityError otherwise. With
    `always`, a rebuild checks it too and skips the rest of the event's operations."""

    check: Check
    message: str
    always: bool = False


Op = Write | Require


class NeedsReadError(Exception):
    """The fold needed a row it was not given (`Reads` that read nothing)."""


class Reads(Protocol):
    """What the fold reads when a command handed in no rendered document (a rebuild, or
    an event whose command renders none): the previous state of the row it folds."""

    def tabular_document(self, tabular_id: str) -> bytes: ...

    def function_document(self, function_id: str) -> bytes: ...

    def namespace_properties(self, namespace_id: str) -> bytes: ...


class NoReads:
    """Reads nothing: a fold that needs a row raises NeedsReadError (the one-round-trip
    append then takes the statement-at-a-time path, which can read)."""

    def tabular_document(self, tabular_id: str) -> bytes:
        raise NeedsReadError(tabular_id)

    def function_document(self, function_id: str) -> bytes:
        raise NeedsReadError(function_id)

    def namespace_properties(self, namespace_id: str) -> bytes:
        raise NeedsReadError(namespace_id)

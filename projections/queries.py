"""Read queries over the catalog read model (used by the REST API)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import orjson
from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg.rows import tuple_row

from icelog.domain.errors import BadRequestError
from icelog.domain.identifiers import SEPARATOR, NamespaceName
from icelog.domain.permissions import NAVIGABLE_KINDS, NAVIGATING, ObjectRef
from icelog.domain.task import PURGE_QUEUE
from icelog.projections import location_overlap

Rows = list[tuple[Any, ...]]


@dataclass(frozen=True)
class TabularRow:
    id: str
    metadata_location: str
    metadata: bytes
    version: int


def encode_token(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode()


def decode_token(token: str) -> str:
    try:
        decoded = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        raise BadRequestError(f"Invalid pageToken: {token!r}") from None
    if "\x00" in decoded:  # never in a key we issue; PostgreSQL text cannot hold it
        raise BadRequestError(f"Invalid pageToken: {token!r}")
    return decoded


_RELATIONS = tuple(sorted(NAVIGATING))


def _held(principal_ids: list[str]) -> tuple[str, tuple[str, ...]]:
    """SQL on grant row `g`: one of these principals holds it, and it is of a relation that
    lets its holder see its object (`NAVIGATING`) — what makes the way to it navigable."""
    marks = ", ".join("?" for _ in principal_ids)
    relations = ", ".join("?" for _ in _RELATIONS)
    clause = f"g.principal_id IN ({marks}) AND g.relation IN ({relations})"
    return clause, (*principal_ids, *_RELATIONS)


def _navigable(principal_ids: list[str]) -> tuple[str, tuple[str, ...]]:
    """SQL on namespace row `n`: the principals hold a `NAVIGATING` grant on it, on a
    namespace inside it, or on a table or view inside it. Prefixes compare by `substr`, not
    LIKE, so that `%` and `_` in names mean nothing."""
    held, params = _held(principal_ids)
    inside = "(d.ns_key = n.ns_key OR substr(d.ns_key, 1, length(n.ns_key) + 1) = n.ns_key || ?)"
    clause = (
        "(EXISTS (SELECT 1 FROM icelog_grants g JOIN icelog_namespaces d ON d.id = g.object_id "
        f"WHERE d.warehouse_id = n.warehouse_id AND {inside} AND {held}) "
        "OR EXISTS (SELECT 1 FROM icelog_grants g JOIN icelog_tabulars d ON d.id = g.object_id "
        f"WHERE d.warehouse_id = n.warehouse_id AND {inside} AND {held}))"
    )
    return clause, (SEPARATOR, *params, SEPARATOR, *params)


class CatalogQueries:
    """Queries over the read model. Each call is one short read on a pooled connection."""

    def __init__(self, dialect: str, cursor: Callable[[], AbstractContextManager[Any]]) -> None:
        self.dialect = dialect
        self._cursor = cursor

    @classmethod
    def for_datastore(cls, datastore: SQLiteDatastore | PostgresDatastore) -> CatalogQueries:
        if isinstance(datastore, PostgresDatastore):
            pg = datastore

            @contextmanager
            def pg_cursor() -> Iterator[Any]:
                with pg.get_connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
                    yield cur

            return cls("postgres", pg_cursor)
        lite = datastore

        @contextmanager
        def sqlite_cursor() -> Iterator[Any]:
            with lite.transaction(commit=False) as cur:
                yield cur

        return cls("sqlite", sqlite_cursor)

    def _q(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgres" else sql

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> Rows:
        with self._cursor() as cur:
            cur.execute(self._q(sql), params)
            return [tuple(r) for r in cur.fetchall()]

    def row(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        with self._cursor() as cur:
            cur.execute(self._q(sql), params)
            found = cur.fetchone()
            return tuple(found) if found is not None else None

    # -- projects and warehouses -------------------------------------------------------------
    def projects(self) -> list[dict[str, str]]:
        return [
            {"project-id": r[0], "project-name": r[1]}
            for r in self.rows("SELECT id, name FROM icelog_projects ORDER BY name, id")
        ]

    def project(self, project_id: str) -> dict[str, str] | None:
        r = self.row("SELECT id, name FROM icelog_projects WHERE id = ?", (project_id,))
        return {"project-id": r[0], "project-name": r[1]} if r else None

    _WAREHOUSE = (
        "SELECT id, project_id, name, storage_profile, delete_profile, status "
        "FROM icelog_warehouses"
    )

    # -- users -------------------------------------------------------------------------------
    _USER_COLUMNS = "id, name, email, user_type, last_updated_with, created_at, updated_at"

    @staticmethod
    def _user(r: tuple[Any, ...]) -> dict[str, Any]:
        return {
            "id": r[0], "name": r[1], "email": r[2], "user-type": r[3],
            "last-updated-with": r[4], "created-at": r[5], "updated-at": r[6],
        }  # fmt: skip

    def user(self, user_id: str) -> dict[str, Any] | None:
        r = self.row(f"SELECT {self._USER_COLUMNS} FROM icelog_users WHERE id = ?", (user_id,))
        return None if r is None else self._user(r)

    def users(
        self, *, name: str | None, ids: list[str] | None, after: tuple[str, str] | None, limit: int
    ) -> list[dict[str, Any]]:
        """Users by name, then id; `name`: a case-insensitive substring of name or e-mail."""
        where, params = [], []
        if name:
            where.append("(LOWER(name) LIKE ? OR LOWER(COALESCE(email, '')) LIKE ?)")
            pattern = "%" + name.lower().replace("\\", "").replace("%", "").replace("_", "") + "%"
            params += [pattern, pattern]
        if ids:
            where.append(f"id IN ({', '.join('?' for _ in ids)})")
            params += ids
        if after is not None:
            where.append("(name > ? OR (name = ? AND id > ?))")
            params += [after[0], after[0], after[1]]
        sql = f"SELECT {self._USER_COLUMNS} FROM icelog_users"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY name, id LIMIT ?"
        return [self._user(r) for r in self.rows(sql, (*params, limit))]

    # -- grants and roles ----------------------------------------------------------------------
    def grants_on(self, object_id: str) -> list[tuple[str, str, str]]:
        """An object's assignments: (relation, principal kind, principal id)."""
        return [
            (r[0], r[1], r[2])
            for r in self.rows(
                "SELECT relation, principal_kind, principal_id FROM icelog_grants "
                "WHERE object_id = ? ORDER BY relation, principal_kind, principal_id",
                (object_id,),
            )
        ]

    def grants_held(
        self,
        principal_ids: list[str],
        object_ids: list[str] | None = None,
        object_kind: str | None = None,
    ) -> list[tuple[str, str, str, str]]:
        """The grants the principals hold — on `object_ids` / of `object_kind` when given:
        (object kind, object id, relation, principal id). A check asks only about the
        object's chain, so an owner of 10,000 tables costs an index lookup, not 10,000 rows."""
        if not principal_ids or object_ids == []:
            return []
        marks = ", ".join("?" for _ in principal_ids)
        sql = (
            "SELECT object_kind, object_id, relation, principal_id FROM icelog_grants "
            f"WHERE principal_id IN ({marks})"
        )
        params: tuple[str, ...] = tuple(principal_ids)
        if object_ids is not None:
            sql += f" AND object_id IN ({', '.join('?' for _ in object_ids)})"
            params = (*params, *object_ids)
        if object_kind is not None:
            sql += " AND object_kind = ?"
            params = (*params, object_kind)
        return [(r[0], r[1], r[2], r[3]) for r in self.rows(sql, params)]

    def places_held(self, principal_ids: list[str]) -> tuple[set[str], set[str]]:
        """(project ids, warehouse ids) the principals hold a grant in or below — any grant
        on a project; on a warehouse and below, a `NAVIGATING` one, as `holds_below` —
        in one query whatever the number of grants (no lookup per granted object)."""
        if not principal_ids:
            return set(), set()
        marks = ", ".join("?" for _ in principal_ids)
        held, params = _held(principal_ids)
        rows = self.rows(
            "SELECT g.object_kind, g.object_id FROM icelog_grants g "
            f"WHERE g.principal_id IN ({marks}) AND g.object_kind = 'project' "
            "UNION SELECT g.object_kind, g.object_id FROM icelog_grants g "
            f"WHERE {held} AND g.object_kind = 'warehouse' "
            "UNION SELECT 'warehouse', n.warehouse_id FROM icelog_grants g "
            f"JOIN icelog_namespaces n ON n.id = g.object_id WHERE {held} "
            "AND g.object_kind = 'namespace' "
            "UNION SELECT 'warehouse', t.warehouse_id FROM icelog_grants g "
            f"JOIN icelog_tabulars t ON t.id = g.object_id WHERE {held} "
            "AND g.object_kind IN ('table', 'view')",
            (*principal_ids, *params, *params, *params),
        )
        projects = {r[1] for r in rows if r[0] == "project"}
        warehouses = {r[1] for r in rows if r[0] == "warehouse"}
        if warehouses:
            found = self.rows(
                "SELECT DISTINCT project_id FROM icelog_warehouses "
                f"WHERE id IN ({', '.join('?' for _ in warehouses)})",
                tuple(sorted(warehouses)),
            )
            projects.update(str(r[0]) for r in found)
        return projects, warehouses

    def holds_below(self, principal_ids: list[str], obj: ObjectRef) -> bool:
        """Whether the principals hold a `NAVIGATING` grant inside `obj` (a project,
        warehouse or namespace; a namespace counts itself too): one query, by the grants'
        principal index."""
        if not principal_ids or obj.kind not in NAVIGABLE_KINDS:
            return False
        if obj.kind == "namespace":
            clause, params = _navigable(principal_ids)
            found = self.row(
                f"SELECT 1 FROM icelog_namespaces n WHERE n.id = ? AND {clause}",
                (obj.id, *params),
            )
            return found is not None
        held, params = _held(principal_ids)
        if obj.kind == "warehouse":
            where, place = "d.warehouse_id = ?", (obj.id,)
        else:
            where = (
                "d.warehouse_id IN (SELECT w.id FROM icelog_warehouses w WHERE w.project_id = ?)"
            )
            place = (obj.id,)
        sql = (
            "SELECT 1 FROM icelog_grants g JOIN icelog_namespaces d ON d.id = g.object_id "
            f"WHERE {where} AND {held} "
            "UNION ALL SELECT 1 FROM icelog_grants g JOIN icelog_tabulars d "
            f"ON d.id = g.object_id WHERE {where} AND {held}"
        )
        args: tuple[str, ...] = (*place, *params, *place, *params)
        if obj.kind == "project":  # a grant on one of its warehouses is inside it too
            sql += (
                " UNION ALL SELECT 1 FROM icelog_grants g JOIN icelog_warehouses d "
                f"ON d.id = g.object_id WHERE d.project_id = ? AND {held}"
            )
            args = (*args, obj.id, *params)
        found = self.row(f"SELECT EXISTS ({sql})", args)
        return found is not None and bool(found[0])

    _ROLE_COLUMNS = "id, project_id, name, description, created_at, updated_at"

    @staticmethod
    def _role(r: tuple[Any, ...]) -> dict[str, Any]:
        return {
            "id": r[0], "project-id": r[1], "name": r[2], "description": r[3],
            "created-at": r[4], "updated-at": r[5],
        }  # fmt: skip

    def project_role_count(self, project_id: str) -> int:
        found = self.row("SELECT count(*) FROM icelog_roles WHERE project_id = ?", (project_id,))
        return 0 if found is None else int(found[0])

    def grants_now(self, obj: ObjectRef) -> set[tuple[str, str, str]]:
        """The grants on `obj` now: (relation, principal kind, principal id)."""
        rows = self.rows(
            "SELECT relation, principal_kind, principal_id FROM icelog_grants "
            "WHERE object_id = ? AND object_kind = ?",
            (obj.id, obj.kind),
        )
        return {(r[0], r[1], r[2]) for r in rows}

    def role(self, role_id: str) -> dict[str, Any] | None:
        r = self.row(f"SELECT {self._ROLE_COLUMNS} FROM icelog_roles WHERE id = ?", (role_id,))
        return None if r is None else self._role(r)

    def roles(
        self, project_id: str, *, name: str | None, after: tuple[str, str] | None, limit: int
    ) -> list[dict[str, Any]]:
        where, params = ["project_id = ?"], [project_id]
        if name:
            where.append("LOWER(name) LIKE ?")
            params.append("%" + name.lower().replace("%", "").replace("_", "") + "%")
        if after is not None:
            where.append("(name > ? OR (name = ? AND id > ?))")
            params += [after[0], after[0], after[1]]
        sql = (
            f"SELECT {self._ROLE_COLUMNS} FROM icelog_roles WHERE {' AND '.join(where)} "
            "ORDER BY name, id LIMIT ?"
        )
        return [self._role(r) for r in self.rows(sql, (*params, limit))]

    def namespace_by_id(self, namespace_id: str) -> tuple[str, NamespaceName] | None:
        """(warehouse id, name) of a live namespace."""
        r = self.row(
            "SELECT warehouse_id, ns_key FROM icelog_namespaces WHERE id = ?", (namespace_id,)
        )
        return None if r is None else (str(r[0]), NamespaceName.from_key(r[1]))

    def tabular_id(self, warehouse_id: str, ns: NamespaceName, name: str) -> tuple[str, str] | None:
        """(id, kind) of the live table or view of that name."""
        r = self.row(
            "SELECT id, kind FROM icelog_tabulars WHERE warehouse_id = ? AND ns_key = ? "
            "AND name = ?",
            (warehouse_id, ns.key, name),
        )
        return None if r is None else (str(r[0]), str(r[1]))

    def tabular_by_id(self, tabular_id: str) -> tuple[str, NamespaceName, str, str] | None:
        """(warehouse id, namespace, name, kind) of a live table or view."""
        r = self.row(
            "SELECT warehouse_id, ns_key, name, kind FROM icelog_tabulars WHERE id = ?",
            (tabular_id,),
        )
        return None if r is None else (str(r[0]), NamespaceName.from_key(r[1]), r[2], r[3])

    @staticmethod
    def _warehouse(r: tuple[Any, ...]) -> dict[str, Any]:
        return {
            "id": r[0],
            "warehouse-id": r[0],
            "project-id": r[1],
            "name": r[2],
            "storage-profile": orjson.loads(r[3]),
            "delete-profile": orjson.loads(r[4]),
            "status": r[5],
        }

    def warehouses(self, project_id: str) -> list[dict[str, Any]]:
        rows = self.rows(self._WAREHOUSE + " WHERE project_id = ? ORDER BY name", (project_id,))
        return [self._warehouse(r) for r in rows]

    def live_warehouse_profiles(self) -> dict[str, dict[str, Any]]:
        """Every live warehouse's storage profile by id, in every project."""
        rows = self.rows("SELECT id, storage_profile FROM icelog_warehouses")
        return {str(r[0]): orjson.loads(r[1]) for r in rows}

    def warehouse(self, warehouse_id: str) -> dict[str, Any] | None:
        r = self.row(self._WAREHOUSE + " WHERE id = ?", (warehouse_id,))
        return self._warehouse(r) if r else None

    def warehouse_by_name(self, project_id: str, name: str) -> dict[str, Any] | None:
        r = self.row(self._WAREHOUSE + " WHERE project_id = ? AND name = ?", (project_id, name))
        return self._warehouse(r) if r else None

    # -- namespaces ------------------------------------------------------------------------
    def namespace_properties(self, warehouse_id: str, ns: NamespaceName) -> dict[str, str] | None:
        r = self.row(
            "SELECT properties FROM icelog_namespaces WHERE warehouse_id = ? AND ns_key = ?",
            (warehouse_id, ns.key),
        )
        return orjson.loads(r[0]) if r else None

    def namespace_exists(self, warehouse_id: str, ns: NamespaceName) -> bool:
        return (
            self.row(
                "SELECT 1 FROM icelog_namespaces WHERE warehouse_id = ? AND ns_key = ?",
                (warehouse_id, ns.key),
            )
            is not None
        )

    def list_namespaces(
        self,
        warehouse_id: str,
        parent: NamespaceName | None,
        token: str | None,
        size: int | None,
        visible_to: list[str] | None = None,
    ) -> tuple[list[list[str]], str | None]:
        """`visible_to` (principal ids): only namespaces they hold a grant on, or on something
        inside (bottom-up navigation), decided in this one query."""
        after = decode_token(token) if token else ""
        sql = (
            "SELECT ns_key FROM icelog_namespaces n WHERE warehouse_id = ? AND parent_key = ? "
            "AND ns_key > ?"
        )
        params: tuple[Any, ...] = (warehouse_id, parent.key if parent else "", after)
        if visible_to is not None:
            clause, extra = _navigable(visible_to)
            sql += f" AND {clause}"
            params = (*params, *extra)
        sql += " ORDER BY ns_key"
        if size is not None:
            sql += " LIMIT ?"
            params = (*params, size + 1)
        keys = [r[0] for r in self.rows(sql, params)]
        next_token = None
        if size is not None and len(keys) > size:
            keys = keys[:size]
            next_token = encode_token(keys[-1])
        return [NamespaceName.from_key(k).as_list() for k in keys], next_token

    # -- tables and views ------------------------------------------------------------------
    def list_tabulars(
        self,
        warehouse_id: str,
        ns: NamespaceName,
        kind: str,
        token: str | None,
        size: int | None,
        visible_to: list[str] | None = None,
    ) -> tuple[list[str], str | None]:
        after = decode_token(token) if token else ""
        sql = (
            "SELECT name FROM icelog_tabulars WHERE warehouse_id = ? AND ns_key = ? AND kind = ? "
            "AND name > ?"
        )
        params: tuple[Any, ...] = (warehouse_id, ns.key, kind, after)
        if visible_to is not None:
            # Only what they may see, by a grant on it (the caller may not describe the
            # namespace, only navigate it).
            held, extra = _held(visible_to)
            sql += f" AND id IN (SELECT g.object_id FROM icelog_grants g WHERE {held})"
            params = (*params, *extra)
        return self._names_page(sql + " ORDER BY name", params, size)

    def tabulars_in(self, warehouse_id: str, ns: NamespaceName) -> list[dict[str, str]]:
        """Every live table and view of a namespace, by name (`icelog tables`)."""
        rows = self.rows(
            "SELECT name, kind, id, metadata_location, created_at, updated_at "
            "FROM icelog_tabulars WHERE warehouse_id = ? AND ns_key = ? ORDER BY name",
            (warehouse_id, ns.key),
        )
        keys = ("name", "kind", "id", "metadata-location", "created-at", "updated-at")
        return [dict(zip(keys, map(str, r), strict=True)) for r in rows]

    def load_tabular(
        self, warehouse_id: str, ns: NamespaceName, name: str, kind: str
    ) -> TabularRow | None:
        r = self.row(
            "SELECT id, metadata_location, metadata, version FROM icelog_tabulars "
            "WHERE warehouse_id = ? AND ns_key = ? AND name = ? AND kind = ?",
            (warehouse_id, ns.key, name, kind),
        )
        return TabularRow(r[0], r[1], bytes(r[2]), r[3]) if r else None

    # -- functions -------------------------------------------------------------------------
    def list_functions(
        self, warehouse_id: str, ns: NamespaceName, token: str | None, size: int | None
    ) -> tuple[list[str], str | None]:
        """Names of the functions of a namespace, in name order, paged as listTables."""
        after = decode_token(token) if token else ""
        sql = (
            "SELECT name FROM icelog_functions WHERE warehouse_id = ? AND ns_key = ? "
            "AND name > ? ORDER BY name"
        )
        return self._names_page(sql, (warehouse_id, ns.key, after), size)

    def _names_page(
        self, sql: str, params: tuple[Any, ...], size: int | None
    ) -> tuple[list[str], str | None]:
        """One page of names from `sql` (ordered by name, after the token's name): one row
        more than the page says whether another follows."""
        if size is not None:
            sql += " LIMIT ?"
            params = (*params, size + 1)
        names = [r[0] for r in self.rows(sql, params)]
        if size is not None and len(names) > size:
            return names[:size], encode_token(names[size - 1])
        return names, None

    def load_function(self, warehouse_id: str, ns: NamespaceName, name: str) -> TabularRow | None:
        """The current document of a live function (its id, location, document, version)."""
        r = self.row(
            "SELECT id, metadata_location, metadata, version FROM icelog_functions "
            "WHERE warehouse_id = ? AND ns_key = ? AND name = ?",
            (warehouse_id, ns.key, name),
        )
        return TabularRow(r[0], r[1], bytes(r[2]), r[3]) if r else None

    def function_names(self, warehouse_id: str, ns: NamespaceName) -> list[str]:
        """Every function of a namespace (a recursive namespace drop)."""
        rows = self.rows(
            "SELECT name FROM icelog_functions WHERE warehouse_id = ? AND ns_key = ? ORDER BY name",
            (warehouse_id, ns.key),
        )
        return [str(r[0]) for r in rows]

    def tabular_location(self, tabular_id: str) -> str | None:
        """A live table's or view's location (its data and metadata live below it)."""
        r = self.row("SELECT location FROM icelog_tabulars WHERE id = ?", (tabular_id,))
        return str(r[0]) if r else None

    def table_containing(self, warehouse_id: str, location: str) -> tuple[str, str] | None:
        """The live table whose location is or holds `location`: (id, table location)."""
        holds, params = location_overlap.clause(self.dialect, location, below=False)
        r = self.row(
            "SELECT id, location FROM icelog_tabulars WHERE warehouse_id = ? AND kind = 'table' "
            f"AND {holds} LIMIT 1",
            (warehouse_id, *params),
        )
        return (str(r[0]), str(r[1])) if r else None

    def overlapping_location(self, warehouse_id: str, location: str) -> str | None:
        """A tabular whose location equals, contains or is contained in `location`: live
        ones; soft-dropped ones too, whose files are still there to be undropped; and
        hard-dropped tables whose purge is pending or running, whose files that purge is
        still to delete (a table registered there would lose them; a purge looks for other
        tables in its location only when it starts).

        Read in the order a tabular moves (live, soft-dropped, purging), each statement
        after the one before: a tabular that moves on between two reads is found by the
        next. (An undrop moves back; the append's own location guard catches that one.)
        `location` is looked up as written and percent-decoded (`location_overlap.spellings`)."""
        for at in location_overlap.spellings(location):
            found = self._overlapping_as_written(warehouse_id, at)
            if found is not None:
                return found
        return None

    def _overlapping_as_written(self, warehouse_id: str, location: str) -> str | None:
        """`overlapping_location` for one spelling, compared as written."""
        overlaps, params = location_overlap.clause(self.dialect, location)
        for table, label in (("icelog_tabulars", ""), ("icelog_deleted_tabulars", " (dropped)")):
            r = self.row(
                f"SELECT ns_key, name FROM {table} WHERE warehouse_id = ? AND {overlaps} LIMIT 1",
                (warehouse_id, *params),
            )
            if r is not None:
                return f"{NamespaceName.from_key(r[0]).dotted}.{r[1]}{label}"
        # The purge task's payload pins the table's location (commands/lifecycle.py); the
        # open tasks of a warehouse are few and found by (warehouse_id, status).
        pinned = (
            "(payload::jsonb ->> 'location')"
            if self.dialect == "postgres"
            else "json_extract(payload, '$.location')"
        )
        r = self.row(
            f"SELECT entity_id FROM (SELECT entity_id, {pinned} AS location FROM icelog_tasks "
            "WHERE warehouse_id = ? AND status IN ('pending', 'running') AND queue = ?) "
            f"AS purging WHERE {overlaps} LIMIT 1",
            (warehouse_id, PURGE_QUEUE, *params),
        )
        if r is not None:
            return f"table {r[0]} (purge pending)"
        return None

    def namespace_contents(self, warehouse_id: str, ns_key: str) -> dict[str, int]:
        """What a namespace holds, by kind: table, view, function, namespace (children)
        and soft-deleted (tables and views), from the indexes on (warehouse, namespace)."""
        r = self.row(
            "SELECT "
            "(SELECT count(*) FROM icelog_tabulars WHERE warehouse_id = ? AND ns_key = ? "
            "AND kind = 'table'), "
            "(SELECT count(*) FROM icelog_tabulars WHERE warehouse_id = ? AND ns_key = ? "
            "AND kind = 'view'), "
            "(SELECT count(*) FROM icelog_functions WHERE warehouse_id = ? AND ns_key = ?), "
            "(SELECT count(*) FROM icelog_namespaces WHERE warehouse_id = ? AND parent_key = ?), "
            "(SELECT count(*) FROM icelog_deleted_tabulars WHERE warehouse_id = ? AND ns_key = ?)",
            (warehouse_id, ns_key) * 5,
        )
        kinds = ("table", "view", "function", "namespace", "soft-deleted")
        return {kind: int(n) for kind, n in zip(kinds, r or (0,) * 5, strict=True)}

    def locations_overlapping(self, warehouse_id: str, location: str) -> list[str]:
        """The locations of every tabular (live or soft-dropped) that equals, contains or
        lies inside `location`."""
        found: list[str] = []
        overlaps, params = location_overlap.clause(self.dialect, location)
        for table in ("icelog_tabulars", "icelog_deleted_tabulars"):
            rows = self.rows(
                f"SELECT location FROM {table} WHERE warehouse_id = ? AND {overlaps}",
                (warehouse_id, *params),
            )
            found.extend(str(r[0]) for r in rows)
        return found

    # -- soft-deleted tabulars -------------------------------------------------------------
    def deleted_tabulars(
        self, warehouse_id: str, ns: NamespaceName | None, token: str | None, size: int
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Soft-dropped tables and views, oldest drop first, paged by (deleted-at, id)."""
        sql = (
            "SELECT id, ns_key, name, kind, created_at, deleted_at, expires_at, purge "
            "FROM icelog_deleted_tabulars WHERE warehouse_id = ?"
        )
        params: tuple[Any, ...] = (warehouse_id,)
        if ns is not None:
            sql += " AND ns_key = ?"
            params = (*params, ns.key)
        if token:
            deleted_at, _, after_id = decode_token(token).partition("|")
            sql += " AND (deleted_at > ? OR (deleted_at = ? AND id > ?))"
            params = (*params, deleted_at, deleted_at, after_id)
        sql += " ORDER BY deleted_at, id LIMIT ?"
        rows = self.rows(sql, (*params, size + 1))
        next_token = None
        if len(rows) > size:
            rows = rows[:size]
            next_token = encode_token(f"{rows[-1][5]}|{rows[-1][0]}")
        items = [
            {
                "id": r[0],
                "name": r[2],
                "namespace": NamespaceName.from_key(r[1]).as_list(),
                "typ": r[3],
                "warehouse-id": warehouse_id,
                "created-at": r[4],
                "deleted-at": r[5],
                "expiration-date": r[6],
                "deletion-kind": "purge" if r[7] else "default",
            }
            for r in rows
        ]
        return items, next_token

    def deleted_tabular_ids(self, warehouse_id: str, ns: NamespaceName) -> list[tuple[str, str]]:
        """(id, kind) of every soft-dropped tabular in one namespace."""
        rows = self.rows(
            "SELECT id, kind FROM icelog_deleted_tabulars WHERE warehouse_id = ? AND ns_key = ? "
            "ORDER BY id",
            (warehouse_id, ns.key),
        )
        return [(r[0], r[1]) for r in rows]

    # -- tasks -----------------------------------------------------------------------------
    _TASK = (
        "SELECT id, queue, warehouse_id, entity_kind, entity_id, status, attempt, "
        "max_attempts, due_at_ms, worker, last_error, payload, created_at, updated_at, result "
        "FROM icelog_tasks"
    )

    @staticmethod
    def _task(r: tuple[Any, ...]) -> dict[str, Any]:
        return {
            "task-id": r[0],
            "queue-name": r[1],
            "warehouse-id": r[2],
            "entity-kind": r[3],
            "entity-id": r[4],
            "status": r[5],
            "attempt": r[6],
            "max-attempts": r[7],
            "due-at-ms": r[8],
            "worker": r[9],
            "last-error": r[10],
            "payload": orjson.loads(r[11]),
            "created-at": r[12],
            "updated-at": r[13],
            # What a succeeded attempt reported (a purge: files deleted, missing, skipped).
            "result": orjson.loads(r[14]) if r[14] is not None else None,
        }

    def tasks(
        self, warehouse_id: str, *, entity_id: str | None = None, status: str | None = None
    ) -> list[dict[str, Any]]:
        sql = self._TASK + " WHERE warehouse_id = ?"
        params: tuple[Any, ...] = (warehouse_id,)
        if entity_id is not None:
            sql += " AND entity_id = ?"
            params = (*params, entity_id)
        if status is not None:
            sql += " AND status = ?"
            params = (*params, status)
        return [self._task(r) for r in self.rows(sql + " ORDER BY created_at, id", params)]

    def task(self, task_id: str) -> dict[str, Any] | None:
        r = self.row(self._TASK + " WHERE id = ?", (task_id,))
        return self._task(r) if r else None

    def open_task_count(self, warehouse_id: str) -> int:
        r = self.row(
            "SELECT count(*) FROM icelog_tasks WHERE warehouse_id = ? "
            "AND status IN ('pending', 'running')",
            (warehouse_id,),
        )
        return int(r[0]) if r else 0

"""Read queries of what a warehouse holds: namespaces, tables and views (live and
soft-dropped) and functions — what loads and lists read."""

from __future__ import annotations

from typing import Any

import orjson

from icelog.domain.identifiers import NamespaceName
from icelog.projections import visibility
from icelog.projections.query_base import QueryBase, TabularRow, decode_token, encode_token


class TabularQueries(QueryBase):
    """Namespaces, tables and views, functions."""

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
            clause, extra = visibility.navigable(visible_to)
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
            held, extra = visibility.held(visible_to)
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

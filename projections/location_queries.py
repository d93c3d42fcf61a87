"""Read queries of locations: which stored table or view location holds, equals or lies
below another (the overlap checks of commands/, through an index: location_overlap.py)."""

from __future__ import annotations

from icelog.domain.identifiers import NamespaceName
from icelog.domain.task import PURGE_QUEUE
from icelog.projections import location_overlap
from icelog.projections.query_base import QueryBase


class LocationQueries(QueryBase):
    """Locations of tables and views."""

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

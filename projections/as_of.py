"""The catalog as it was at a past log position, one page at a time.

Projects, warehouses, namespaces (with their properties), and the tables and views that
existed then, each with the metadata location it had then (soft-deleted ones flagged).
Used by `GET /management/v1/as-of` and `icelog catalog at`. Read from the catalog history
(projections/catalog_history.py) by range scans of its sort key: no replay of the log,
and what one page reads and holds is bounded whatever the size of the log or the catalog.

A page holds at most `page_size` namespaces, tables and views in the order (warehouse id,
namespace levels, kind, name, id), nested under their warehouses and namespaces as one
document. A page that starts inside a namespace repeats it (and its warehouse) as a
container, flagged `"continued": true`: reading page after page gives every namespace,
table and view exactly once. Every page lists all projects.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson

from icelog.domain.errors import BadRequestError
from icelog.projections.catalog_history import CatalogHistory
from icelog.projections.history_versions import (
    DROPPED,
    NAMESPACE,
    SOFT_DELETED,
    VIEW,
    WAREHOUSE,
    Version,
    ns_levels,
)

MAX_PAGE_SIZE = 1000
# Rows one page may read. Versions that are not visible at the position asked (earlier
# names, dropped tables) are read and skipped: past this budget a page ends short, with a
# token to continue, instead of reading on.
SCAN_BUDGET = 5 * MAX_PAGE_SIZE
_CHUNK = 256  # rows per read when many are skipped

Key = tuple[str, str, int, str, str, int]


@dataclass(frozen=True)
class PageToken:
    """Where the next page starts: the position of the first page (later pages answer at
    it, even when `time` would now resolve further), its warehouse filter, the last key."""

    position: int
    warehouse_id: str | None
    after: Key

    def encode(self) -> str:
        raw = orjson.dumps([1, self.position, self.warehouse_id, list(self.after)])
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> PageToken:
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            version, position, warehouse_id, after = orjson.loads(raw)
            _v1(version)
            return cls(_position(position), _optional_text(warehouse_id), _key(after))
        except (ValueError, TypeError, binascii.Error):
            raise BadRequestError("page-token is not a token this server gave out") from None


def _v1(version: Any) -> None:
    if version != 1:
        raise ValueError(version)


def _position(value: Any) -> int:
    if type(value) is not int or not 0 <= value < 2**63:
        raise ValueError(value)
    return value


def _optional_text(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(value)
    return value


def _key(value: Any) -> Key:
    warehouse_id, key, kind, name, entity_id, from_position = value
    for text in (warehouse_id, key, name, entity_id):
        if not isinstance(text, str) or "\x00" in text:
            raise ValueError(value)
    return (warehouse_id, key, _position(kind), name, entity_id, _position(from_position))


@dataclass(frozen=True)
class AsOfPage:
    """What to read: the catalog at `position`, optionally one warehouse only, the page
    after `after` (None: the first)."""

    position: int
    time: str | None
    warehouse_id: str | None
    page_size: int
    after: Key | None = None


def read_page(history: CatalogHistory, ask: AsOfPage) -> dict[str, Any]:
    """One page of the catalog at `ask.position` (which the history must have reached)."""
    with history.reading() as cur:
        page = _Page(history, cur, ask.position)
        last, more = _fill(page, history, cur, ask)
        projects = sorted(history.projects_at(cur, ask.position), key=lambda v: v.entity_id)
    token = PageToken(ask.position, ask.warehouse_id, last).encode() if more and last else None
    return {
        "position": ask.position,
        "time": ask.time,
        "projects": [{"project-id": p.entity_id, "name": p.name} for p in projects],
        "warehouses": page.warehouses,
        "next-page-token": token,
    }


def _fill(page: _Page, history: CatalogHistory, cur: Any, ask: AsOfPage) -> tuple[Key | None, bool]:
    """Scan on from `ask.after` until the page is full, the rows run out or the budget is
    spent; returns the last key read and whether rows follow it."""
    after, scanned = ask.after, 0
    while True:
        need = ask.page_size - page.items
        want = min(max(need + 1, _CHUNK) if need else 1, SCAN_BUDGET - scanned)
        if want <= 0:
            return after, True
        rows = history.scan(cur, ask.position, after, ask.warehouse_id, want)
        scanned += len(rows)
        for row in rows:
            if page.items == ask.page_size:
                return after, True
            after = row.key
            page.add(row)
        if len(rows) < want:
            return after, False


class _Page:
    """Nests the versions visible at a position under their warehouses and namespaces;
    a container that started on an earlier page is looked up once."""

    def __init__(self, history: CatalogHistory, cur: Any, position: int) -> None:
        self._history, self._cur, self._position = history, cur, position
        self.warehouses: list[dict[str, Any]] = []
        self.items = 0
        self._warehouse_entries: dict[str, dict[str, Any] | None] = {}
        self._namespace_entries: dict[tuple[str, str], dict[str, Any] | None] = {}

    def add(self, version: Version) -> None:
        if not version.visible_at(self._position) or version.state == DROPPED:
            return
        if version.kind == WAREHOUSE:
            self._open_warehouse(version)
        elif version.kind == NAMESPACE:
            self._add_namespace(version)
        else:
            self._add_tabular(version)

    def _open_warehouse(self, version: Version) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "warehouse-id": version.entity_id,
            "name": version.name,
            "project-id": version.project_id,
            "namespaces": [],
        }
        self.warehouses.append(entry)
        self._warehouse_entries[version.entity_id] = entry
        return entry

    def _warehouse(self, warehouse_id: str) -> dict[str, Any] | None:
        if warehouse_id not in self._warehouse_entries:
            found = self._history.warehouse_at(self._cur, self._position, warehouse_id)
            self._warehouse_entries[warehouse_id] = None
            if found is not None:
                self._open_warehouse(found)
        return self._warehouse_entries[warehouse_id]

    def _add_namespace(self, version: Version, *, continued: bool = False) -> None:
        warehouse = self._warehouse(version.warehouse_id)
        if warehouse is None:  # not in a warehouse that existed then: not shown
            return
        entry: dict[str, Any] = {
            "namespace": ns_levels(version.ns_key),
            "properties": orjson.loads(version.properties or "{}"),
            "tables": [],
            "views": [],
        }
        if continued:
            entry["continued"] = True
        else:
            self.items += 1
        warehouse["namespaces"].append(entry)
        self._namespace_entries[(version.warehouse_id, version.ns_key)] = entry

    def _namespace(self, warehouse_id: str, key: str) -> dict[str, Any] | None:
        if (warehouse_id, key) not in self._namespace_entries:
            found = self._history.namespace_at(self._cur, self._position, warehouse_id, key)
            self._namespace_entries[(warehouse_id, key)] = None
            if found is not None:
                self._add_namespace(found, continued=True)
        return self._namespace_entries[(warehouse_id, key)]

    def _add_tabular(self, version: Version) -> None:
        namespace = self._namespace(version.warehouse_id, version.ns_key)
        if namespace is None:  # not in a namespace that existed then: not shown
            return
        item: dict[str, Any] = {
            "name": version.name,
            "id": version.entity_id,
            "metadata-location": version.metadata_location,
        }
        if version.state == SOFT_DELETED:
            item["soft-deleted"] = True
        namespace["views" if version.kind == VIEW else "tables"].append(item)
        self.items += 1

"""The event index: the log, one row per stored event, with the columns auditors filter on.

An asynchronous projection: an indexer follows the log and appends rows (its tracking is
the highest position indexed). Reads catch it up first, so a caller sees its own writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from icelog.projections.sql import SqlStore, write_transaction

_COLUMNS = (
    ("position", "int8"),
    ("time", "text"),
    ("time_us", "int8"),
    ("type", "text"),
    ("aggregate_id", "text"),
    ("version", "int8"),
    ("actor", "text"),
    ("request_id", "text"),
    ("warehouse_id", "text"),
    ("namespace", "text"),
    ("tabular_id", "text"),
    ("subject", "text"),
    ("data", "text"),
)
_NO_REPEATS = "ON CONFLICT (position) DO NOTHING"


def schema(dialect: str) -> list[str]:
    big = "BIGINT" if dialect == "postgres" else "INTEGER"
    return [
        "CREATE TABLE IF NOT EXISTS icelog_event_index ("
        f"position {big} PRIMARY KEY, time TEXT NOT NULL, time_us {big} NOT NULL, "
        "type TEXT NOT NULL, "
        f"aggregate_id TEXT NOT NULL, version {big} NOT NULL, actor TEXT, request_id TEXT, "
        "warehouse_id TEXT, namespace TEXT, tabular_id TEXT, subject TEXT, data TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS icelog_event_index_by_aggregate "
        "ON icelog_event_index (aggregate_id, position)",
        "CREATE INDEX IF NOT EXISTS icelog_event_index_by_warehouse "
        "ON icelog_event_index (warehouse_id, position)",
        "CREATE INDEX IF NOT EXISTS icelog_event_index_by_time ON icelog_event_index (time_us)",
    ]


@dataclass(frozen=True)
class IndexRow:
    position: int
    time: str
    time_us: int  # microseconds since the epoch: what time ranges compare
    type: str
    aggregate_id: str
    version: int
    actor: str | None
    request_id: str | None
    warehouse_id: str | None
    namespace: str | None
    tabular_id: str | None
    subject: str | None
    data: dict[str, Any]


@dataclass(frozen=True)
class EventFilter:
    after: int = 0
    limit: int = 100
    warehouse_id: str | None = None
    namespace: str | None = None  # dotted; also matches nested namespaces
    tabular_id: str | None = None
    aggregate_id: str | None = None
    type_prefix: str | None = None
    actor: str | None = None
    since_us: int | None = None  # inclusive
    until_us: int | None = None  # exclusive
    before: int | None = None  # a position, exclusive
    newest_first: bool = False


class EventIndex(SqlStore):
    def ensure_schema(self) -> None:
        for statement in schema(self.dialect):
            self._run(statement, fetch=False)

    def position(self) -> int:
        found = self._run("SELECT max(position) FROM icelog_event_index")
        return int(found[0][0]) if found and found[0][0] is not None else 0

    def write(self, rows: Sequence[IndexRow], cur: Any = None) -> None:
        """Index `rows`; with `cur`, inside that (write) transaction."""
        values = [
            (
                r.position,
                r.time,
                r.time_us,
                r.type,
                r.aggregate_id,
                r.version,
                r.actor,
                r.request_id,
                r.warehouse_id,
                r.namespace,
                r.tabular_id,
                r.subject,
                orjson.dumps(r.data).decode(),
            )
            for r in rows
        ]
        if not values:
            return
        if cur is None:
            with write_transaction(self._datastore) as own:
                self._insert(own, values)
        else:
            self._insert(cur, values)

    def _insert(self, cur: Any, values: list[tuple[Any, ...]]) -> None:
        self._insert_rows(cur, "icelog_event_index", _COLUMNS, values, _NO_REPEATS)

    def query(self, f: EventFilter) -> list[dict[str, Any]]:
        sql = (
            "SELECT position, time, type, aggregate_id, version, actor, request_id, "
            "warehouse_id, namespace, tabular_id, subject, data FROM icelog_event_index "
            "WHERE position > ?"
        )
        params: list[Any] = [f.after]
        for column, value in (
            ("warehouse_id", f.warehouse_id),
            ("tabular_id", f.tabular_id),
            ("aggregate_id", f.aggregate_id),
            ("actor", f.actor),
        ):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        if f.namespace is not None:
            # The namespace or one below it. substr, not LIKE: `_` and `%` in a name mean
            # nothing, and SQLite's LIKE would ignore case.
            sql += " AND (namespace = ? OR substr(namespace, 1, length(?) + 1) = ? || '.')"
            params += [f.namespace, f.namespace, f.namespace]
        if f.type_prefix is not None:
            sql += " AND substr(type, 1, length(?)) = ?"
            params += [f.type_prefix, f.type_prefix]
        if f.since_us is not None:
            sql += " AND time_us >= ?"
            params.append(f.since_us)
        if f.until_us is not None:
            sql += " AND time_us < ?"
            params.append(f.until_us)
        if f.before is not None:
            sql += " AND position < ?"
            params.append(f.before)
        sql += " ORDER BY position DESC LIMIT ?" if f.newest_first else " ORDER BY position LIMIT ?"
        params.append(f.limit)
        rows = self._run(sql, params)
        return [
            {
                "position": r[0],
                "time": r[1],
                "type": r[2],
                "aggregate-id": r[3],
                "version": r[4],
                "actor": r[5],
                "request-id": r[6],
                "warehouse-id": r[7],
                "namespace": r[8],
                "tabular-id": r[9],
                "subject": r[10],
                "data": orjson.loads(r[11]),
            }
            for r in rows
        ]

    def position_at(self, time_us: int) -> int:
        """The last position whose event happened at or before `time_us` (0: none)."""
        found = self._run(
            "SELECT max(position) FROM icelog_event_index WHERE time_us <= ?", (time_us,)
        )
        return int(found[0][0]) if found and found[0][0] is not None else 0

    def moment(self, position: int) -> tuple[int, str | None]:
        """The last indexed event at or before `position`: (its position, its time);
        (0, None) when there is none."""
        found = self._run(
            "SELECT position, time FROM icelog_event_index WHERE position <= ? "
            "ORDER BY position DESC LIMIT 1",
            (position,),
        )
        return (int(found[0][0]), str(found[0][1])) if found else (0, None)

    def request_run_before(self, position: int) -> tuple[int, str, int] | None:
        """The indexed event just before `position`: (its position, its request id, the
        first position of the run of neighbouring events with that request id)."""
        found = self._run(
            "SELECT position, request_id FROM icelog_event_index WHERE position < ? "
            "ORDER BY position DESC LIMIT 1",
            (position,),
        )
        if not found:
            return None
        last, request_id = int(found[0][0]), found[0][1] or ""
        if not request_id:
            return last, "", last
        start = self._run(
            "SELECT min(position) FROM icelog_event_index WHERE position <= ? AND position > "
            "COALESCE((SELECT max(position) FROM icelog_event_index WHERE position < ? "
            "AND (request_id IS NULL OR request_id <> ?)), 0)",
            (last, last, request_id),
        )
        return last, request_id, int(start[0][0])

    def analyze(self) -> None:
        """Refresh planner statistics after a bulk catch-up (PostgreSQL would otherwise plan
        with the empty table's statistics until autovacuum gets to it)."""
        if self.dialect == "postgres":
            self._run("ANALYZE icelog_event_index", fetch=False)

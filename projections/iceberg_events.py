"""The Iceberg events read model: the log as the events API of apache/iceberg PR #12584
(`POST /v1/{prefix}/events`) sees it — one row per catalog change, with its operation
ready to serve (ADR 0015).

Written by the event indexer in the same transaction as the event index. A row belongs to
one stream: a warehouse (its namespaces, tables, views, its own changes and the grants on
them) or a project (its changes, which every warehouse of the project shows). A page is
one bounded, indexed read per stream: at most `SCAN_LIMIT` rows are looked at per request,
so a rare filter never makes a request scan the whole log (the continuation token moves
on past what was looked at).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from icelog.projections.sql import SqlStore, write_transaction

TABLE = "icelog_iceberg_events"
TRACKING = "icelog_iceberg_events_position"  # the last log position mapped (one row)
SEPARATOR = "\x1f"  # between name levels in `path`: a level may hold any other character
GRANT_OPERATIONS = ("x-icelog.grant", "x-icelog.revoke")  # shown to who may read assignments
SCAN_LIMIT = 10_000  # rows of one stream looked at per request, whatever the filters
TOKEN_VERSION = 1
_COLUMNS = tuple(
    (name, "int8" if name in ("position", "request_group", "timestamp_ms") else "text")
    for name in (
        "position", "stream", "object_type", "object_uuid", "path", "from_path",
        "operation_type", "event_id", "request_id", "request_group", "timestamp_ms", "actor",
        "operation",
    )
)  # fmt: skip

STANDARD_OPERATIONS = frozenset(
    {
        "create-table", "register-table", "drop-table", "update-table", "rename-table",
        "create-view", "drop-view", "update-view", "rename-view",
        "create-namespace", "update-namespace-properties", "drop-namespace",
    }
)  # fmt: skip


def schema(dialect: str) -> list[str]:
    big = "BIGINT" if dialect == "postgres" else "INTEGER"
    return [
        f"CREATE TABLE IF NOT EXISTS {TABLE} ("
        f"position {big} PRIMARY KEY, stream TEXT NOT NULL, object_type TEXT, "
        "object_uuid TEXT, path TEXT, from_path TEXT, operation_type TEXT NOT NULL, "
        f"event_id TEXT NOT NULL, request_id TEXT NOT NULL, request_group {big} NOT NULL, "
        f"timestamp_ms {big} NOT NULL, actor TEXT, operation TEXT NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS {TABLE}_by_stream ON {TABLE} (stream, position)",
        f"CREATE INDEX IF NOT EXISTS {TABLE}_by_time ON {TABLE} (stream, timestamp_ms)",
        f"CREATE INDEX IF NOT EXISTS {TABLE}_by_request ON {TABLE} (request_group)",
        f"CREATE TABLE IF NOT EXISTS {TRACKING} (id INTEGER PRIMARY KEY, position {big} NOT NULL)",
        # `ON CONFLICT` alone waits for an indexer's open transaction that moved the row,
        # while this schema transaction holds the SHARE lock its CREATE INDEX IF NOT EXISTS
        # took, which the indexer's next insert waits for: a deadlock between a starting
        # replica and a writing one. A row that is there is found and left alone; ON
        # CONFLICT is left for two first starts at once.
        f"INSERT INTO {TRACKING} (id, position) SELECT 1, 0 "
        f"WHERE NOT EXISTS (SELECT 1 FROM {TRACKING} WHERE id = 1) ON CONFLICT (id) DO NOTHING",
    ]


def path_key(levels: Sequence[str]) -> str:
    return SEPARATOR.join(levels)


@dataclass(frozen=True)
class IcebergEventRow:
    position: int
    stream: str  # warehouse id, or project id for a project's own changes
    object_type: str | None  # namespace, table, view; None for the others
    object_uuid: str | None  # a table's or view's id
    path: str | None  # the object's name levels (joined by SEPARATOR) after the change
    from_path: str | None  # before it, for renames and undrops
    operation_type: str
    event_id: str
    request_id: str
    request_group: int  # first position of the request's events: they count together
    timestamp_ms: int
    actor: str | None
    operation: dict[str, Any]


@dataclass(frozen=True)
class EventsFilter:
    """What a consumer asked for; carried in its continuation token."""

    operation_types: tuple[str, ...] = ()
    names: tuple[tuple[str, ...], ...] = ()
    uuids: tuple[str, ...] = ()
    object_types: tuple[str, ...] = ()
    actor: str | None = None  # custom filter `x-icelog.actor`

    def as_json(self) -> dict[str, Any]:
        return {
            "o": list(self.operation_types),
            "n": [list(n) for n in self.names],
            "u": list(self.uuids),
            "t": list(self.object_types),
            "a": self.actor,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> EventsFilter:
        return cls(
            operation_types=tuple(str(x) for x in raw["o"]),
            names=tuple(tuple(str(level) for level in n) for n in raw["n"]),
            uuids=tuple(str(x) for x in raw["u"]),
            object_types=tuple(str(x) for x in raw["t"]),
            actor=None if raw["a"] is None else str(raw["a"]),
        )


class BadToken(ValueError):
    """A continuation token this server did not hand out (or for another warehouse)."""


_MAX_POSITION = 2**63 - 1


@dataclass(frozen=True)
class Cursor:
    """Where a consumer is: after `position` in the streams of one warehouse."""

    warehouse_id: str
    position: int
    filter: EventsFilter = field(default_factory=EventsFilter)

    def encode(self) -> str:
        raw = {"v": TOKEN_VERSION, "w": self.warehouse_id, "p": self.position,
               "f": self.filter.as_json()}  # fmt: skip
        return base64.urlsafe_b64encode(orjson.dumps(raw)).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> Cursor:
        try:
            raw = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            if raw["v"] != TOKEN_VERSION:
                raise BadToken("unknown continuation-token version")
            position = raw["p"]
            # A position is a 64-bit signed integer in both stores: anything else (a bool,
            # a negative, one past 2**63-1, which SQLite cannot bind) is not one we issued.
            if type(position) is not int or not 0 <= position <= _MAX_POSITION:
                raise BadToken("malformed continuation-token")
            return cls(str(raw["w"]), position, EventsFilter.from_json(raw["f"]))
        except (binascii.Error, ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, BadToken):
                raise
            raise BadToken("malformed continuation-token") from None


@dataclass(frozen=True)
class Page:
    rows: list[tuple[IcebergEventRow, int]]  # each with its request's event count
    last_position: int  # where the next page starts after


class IcebergEvents(SqlStore):
    def ensure_schema(self) -> None:
        with write_transaction(self._datastore) as cur:
            for statement in schema(self.dialect):
                self._execute(cur, statement)

    def position(self) -> int:
        found = self._run(f"SELECT position FROM {TRACKING} WHERE id = 1")
        return int(found[0][0]) if found else 0

    def write(self, rows: Sequence[IcebergEventRow], up_to: int, cur: Any) -> None:
        """Inside the indexer's write transaction: the rows of the events up to `up_to`.
        Rows of events at or before the tracked position were written already."""
        self._execute(cur, f"SELECT position FROM {TRACKING} WHERE id = 1")
        found = cur.fetchone()
        done = int(found[0]) if found else 0
        rows = [r for r in rows if r.position > done]
        if up_to > done:
            self._execute(cur, f"UPDATE {TRACKING} SET position = ? WHERE id = 1", (up_to,))
        if not rows:
            return
        values = [
            (r.position, r.stream, r.object_type, r.object_uuid, r.path, r.from_path,
             r.operation_type, r.event_id, r.request_id, r.request_group, r.timestamp_ms,
             r.actor, orjson.dumps(r.operation).decode())
            for r in rows
        ]  # fmt: skip
        self._insert_rows(cur, TABLE, _COLUMNS, values, "ON CONFLICT (position) DO NOTHING")

    def _query(self, cur: Any, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        self._execute(cur, statement, tuple(params))
        return [tuple(r) for r in cur.fetchall()]

    def start_after(self, streams: Sequence[str], since_ms: int) -> int:
        """The position just before the first event at or after `since_ms` (epoch ms): found
        by time (an index seek per stream), then the few events just before it checked,
        since times follow positions only nearly (appends of one moment may interleave)."""
        with self.reading() as cur:
            first: list[int] = []
            for stream in streams:
                found = self._query(
                    cur,
                    f"SELECT position FROM {TABLE} WHERE stream = ? AND timestamp_ms >= ? "
                    "ORDER BY timestamp_ms, position LIMIT 1",
                    [stream, since_ms],
                )
                if found:
                    first.append(int(found[0][0]))
            if not first:
                last = self._query(cur, f"SELECT max(position) FROM {TABLE}", [])
                return int(last[0][0]) if last and last[0][0] is not None else 0
            seek = min(first)
            marks = ", ".join("?" for _ in streams)
            earlier = self._query(
                cur,
                f"SELECT min(position) FROM {TABLE} WHERE stream IN ({marks}) "
                "AND position BETWEEN ? AND ? AND timestamp_ms >= ?",
                [*streams, seek - 1000, seek, since_ms],
            )
        return int(earlier[0][0]) - 1

    def cut_before(self, streams: Sequence[str], after: int, cutoff_ms: int) -> bool:
        """Whether an event after `after` is older than `cutoff_ms`: outside the retention
        window, so a consumer resuming there would miss it."""
        with self.reading() as cur:
            for stream in streams:
                found = self._query(
                    cur,
                    f"SELECT timestamp_ms FROM {TABLE} WHERE stream = ? AND position > ? "
                    "ORDER BY position LIMIT 1",
                    [stream, after],
                )
                if found and int(found[0][0]) < cutoff_ms:
                    return True
        return False

    def page(
        self,
        streams: Sequence[str],
        f: EventsFilter,
        after: int,
        size: int,
        hidden: Mapping[str, Sequence[str]] | None = None,
    ) -> Page:
        """Up to `size` events after `after` matching `f`, in log order, looking at no more
        than `SCAN_LIMIT` rows per stream; `hidden`: per stream, operation types the caller
        may not see (they are passed over like events the filters leave out)."""
        found: list[tuple[IcebergEventRow, int]] = []
        scanned_to: list[int] = []  # per stream that hit the scan limit: how far it looked
        furthest = after
        # One snapshot for every statement: the rows and how far they reached must agree,
        # or the token moves past rows committed between the statements.
        with self.snapshot() as cur:
            for stream in streams:
                left_out = (hidden or {}).get(stream, ())
                rows, last, full = self._scan(cur, stream, f, after, size, left_out)
                found.extend(rows)
                furthest = max(furthest, last)
                if full:
                    scanned_to.append(last)
        found.sort(key=lambda item: item[0].position)
        limit = min(scanned_to) if scanned_to else None
        if limit is not None:  # beyond it another stream was not looked at yet
            found = [item for item in found if item[0].position <= limit]
        if len(found) > size:
            found = found[:size]
        if len(found) == size:
            return Page(found, found[-1][0].position)
        return Page(found, limit if limit is not None else furthest)

    def _scan(
        self, cur: Any, stream: str, f: EventsFilter, after: int, size: int, hidden: Sequence[str]
    ) -> tuple[list[tuple[IcebergEventRow, int]], int, bool]:
        """(matching rows with their request counts, last position looked at, whether the
        scan limit was reached)."""
        window = (
            f"SELECT * FROM {TABLE} WHERE stream = ? AND position > ? ORDER BY position "
            f"LIMIT {SCAN_LIMIT}"
        )
        where, params = _conditions(f)
        if hidden:
            where += f" AND e.operation_type NOT IN ({', '.join('?' for _ in hidden)})"
            params += hidden
        rows = self._query(
            cur,
            "SELECT e.position, e.stream, e.object_type, e.object_uuid, e.path, e.from_path, "
            "e.operation_type, e.event_id, e.request_id, e.request_group, e.timestamp_ms, "
            "e.actor, e.operation, "
            f"(SELECT count(*) FROM {TABLE} c WHERE c.request_group = e.request_group) "
            f"FROM ({window}) e WHERE {where} ORDER BY e.position LIMIT ?",
            [stream, after, *params, size],
        )
        result = [(_row(r), int(r[13])) for r in rows]
        if len(result) == size:  # a full page: the next one starts after its last event
            return result, result[-1][0].position, False
        # Short: how far the window reached, and whether more lies beyond it.
        bounds = self._query(
            cur,
            f"SELECT count(*), max(position) FROM ({window}) w",
            [stream, after],
        )
        looked, last = int(bounds[0][0]), bounds[0][1]
        return result, int(last) if last is not None else after, looked >= SCAN_LIMIT


def _conditions(f: EventsFilter) -> tuple[str, list[Any]]:
    clauses = ["1 = 1"]
    params: list[Any] = []
    if f.operation_types:
        clauses.append(f"e.operation_type IN ({', '.join('?' for _ in f.operation_types)})")
        params += f.operation_types
    if f.object_types:
        clauses.append(f"e.object_type IN ({', '.join('?' for _ in f.object_types)})")
        params += f.object_types
    if f.uuids:
        clauses.append(f"e.object_uuid IN ({', '.join('?' for _ in f.uuids)})")
        params += f.uuids
    if f.actor is not None:
        clauses.append("e.actor = ?")
        params.append(f.actor)
    if f.names:
        # Level-wise: the entry is the object's path or a leading part of it (before or
        # after a rename). substr, not LIKE, so that `%` and `_` in names mean nothing.
        either = []
        for levels in f.names:
            key = path_key(levels)
            for column in ("e.path", "e.from_path"):
                either.append(
                    f"({column} = ? OR substr({column}, 1, length(?) + 1) = ? || '{SEPARATOR}')"
                )
                params += [key, key, key]
        clauses.append("(" + " OR ".join(either) + ")")
    return " AND ".join(clauses), params


def _row(r: Sequence[Any]) -> IcebergEventRow:
    return IcebergEventRow(
        position=int(r[0]), stream=r[1], object_type=r[2], object_uuid=r[3], path=r[4],
        from_path=r[5], operation_type=r[6], event_id=r[7], request_id=r[8],
        request_group=int(r[9]), timestamp_ms=int(r[10]), actor=r[11],
        operation=orjson.loads(r[12]),
    )  # fmt: skip

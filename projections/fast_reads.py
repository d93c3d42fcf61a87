"""The loadTable hot path, read on the event loop without a thread hop.

Every other query runs in the threadpool through `CatalogQueries`. loadTable is the
call every Spark task and every refresh makes, so it gets an async reader: an async
psycopg pool on PostgreSQL, and a private read-only connection on SQLite (a local
indexed read takes tens of microseconds, less than handing it to a thread).

Documents are cached by (tabular id, version): the per-request query returns only
the id, version and location, so loadTable costs the same for 1 or 1,000 snapshots.
A version is immutable, so a cached document can never be stale; every request still
asks the database for the current version, which keeps read-your-writes across replicas.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import sqlite3
from collections import OrderedDict
from pathlib import Path
from typing import Any, Protocol

import psycopg
from psycopg import AsyncConnection

from icelog.domain.errors import ServiceUnavailableError
from icelog.domain.identifiers import NamespaceName
from icelog.projections.pg_binary import TEXT, TEXT_ARRAY
from icelog.projections.queries import TabularRow
from icelog.projections.raw_queries import array_literal, prepare, run_prepared

# Errors of a lost or unreachable connection (psycopg raises OperationalError for a
# terminated backend or a refused connect, InterfaceError for a connection it closed).
_CONNECTION_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError)
# (connection, generation, when it was opened on the loop clock, its share of MAX_AGE_S,
# its client encoding)
_Slot = tuple[AsyncConnection[tuple[Any, ...]], int, float, float, str]

_HEAD = (
    "SELECT id, metadata_location, version FROM icelog_tabulars "
    "WHERE warehouse_id = ? AND ns_key = ? AND name = ? AND kind = ?"
)
_DOC = "SELECT metadata, version, metadata_location FROM icelog_tabulars WHERE id = ?"
# Several lookups in one PostgreSQL query: (warehouse, namespace, name, kind) arrays,
# each answer numbered by its lookup's place.
_GROUP_HEAD = (
    "SELECT k.i, t.id, t.metadata_location, t.version FROM unnest("
    "%s::text[], %s::text[], %s::text[], %s::text[]) WITH ORDINALITY AS k(w, n, nm, kd, i) "
    "JOIN icelog_tabulars t ON t.warehouse_id = k.w AND t.ns_key = k.n AND t.name = k.nm "
    "AND t.kind = k.kd"
)
_GROUP_DOCS = (
    "SELECT id, metadata, version, metadata_location FROM icelog_tabulars WHERE id = ANY(%s)"
)
# (warehouse id, namespace key, name, kind)
_Key = tuple[str, str, str, str]
# The two lookups, prepared on each connection when it opens and run on libpq directly
# (raw_queries.py): psycopg's cursor cost more CPU than the rest of a loadTable's read.
HEAD_STATEMENT = b"icelog_load_head"
_GROUP_STATEMENT = b"icelog_load_group_head"
_PREPARE = (
    (HEAD_STATEMENT, _HEAD.replace("?", "${}").format(1, 2, 3, 4), [TEXT] * 4),
    (_GROUP_STATEMENT, _GROUP_HEAD.replace("%s", "${}").format(1, 2, 3, 4), [TEXT_ARRAY] * 4),
)


class DocumentCache:
    """Rendered metadata documents by (id, version), bounded by total bytes.

    Only the newest version of each tabular is kept: loadTable asks for the current
    version, so an older one is read again only by a request that raced a commit. Keeping
    every version filled the whole budget with dead documents on a table under constant
    commits (8 appenders on one ~200 KB table: peak RSS ~200 MB per process)."""

    def __init__(self, max_bytes: int) -> None:
        self._entries: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._newest: dict[str, int] = {}  # tabular id -> the version cached for it
        self._bytes = 0
        self._max = max_bytes

    def get(self, key: tuple[str, int]) -> bytes | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: tuple[str, int], data: bytes) -> None:
        if len(data) > self._max or key in self._entries:
            return
        tid, version = key
        cached = self._newest.get(tid)
        if cached is not None:
            if cached > version:
                return
            self._bytes -= len(self._entries.pop((tid, cached)))
        self._entries[key] = data
        self._newest[tid] = version
        self._bytes += len(data)
        while self._bytes > self._max:
            (dropped_id, _), dropped = self._entries.popitem(last=False)
            del self._newest[dropped_id]
            self._bytes -= len(dropped)


class TabularReader(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def load_tabular(
        self, warehouse_id: str, ns: NamespaceName, name: str, kind: str
    ) -> TabularRow | None: ...


class SQLiteTabularReader:
    def __init__(self, path: Path, cache_bytes: int) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None
        self._cache = DocumentCache(cache_bytes)

    async def open(self) -> None:
        # Read-only and owned by the event-loop thread; WAL lets it read while the
        # threadpool writes, and every read sees the last committed transaction.
        self._conn = sqlite3.connect(
            f"file:{self._path}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
        )

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    async def load_tabular(
        self, warehouse_id: str, ns: NamespaceName, name: str, kind: str
    ) -> TabularRow | None:
        assert self._conn is not None, "reader not opened"
        head = self._conn.execute(_HEAD, (warehouse_id, ns.key, name, kind)).fetchone()
        if head is None:
            return None
        tid, location, version = head
        data = self._cache.get((tid, version))
        if data is None:
            # A commit may land between the two reads: the document, its version and its
            # location all come from this one row, never one version's location with
            # another's document.
            doc = self._conn.execute(_DOC, (tid,)).fetchone()
            if doc is None:  # dropped between the two reads
                return None
            data, version, location = bytes(doc[0]), doc[1], doc[2]
            self._cache.put((tid, version), data)
        return TabularRow(tid, location, data, version)


class PostgresTabularReader:
    """A fixed set of autocommit connections, and lookups grouped into shared queries.

    Grouped reads: a lookup joins the pending group; when a connection is free, one query
    answers everything pending (identical lookups once). Profiling showed the async
    psycopg round trip (~140 µs of CPU per query on this machine; ~70 µs since the lookups
    run on libpq directly, raw_queries.py) as the largest cost of a loadTable; under
    concurrency the group spreads it over many requests, and a lone request still runs at
    once on its own. Read-your-writes holds: a group is taken when
    its query starts, so every lookup in it arrived before the query began and sees every
    write acknowledged before it arrived — as a query of its own would.

    A general pool (health checks, growth, per-checkout bookkeeping) cost more Python per
    loadTable than the query itself; these connections only ever run short SELECTs. Few
    connections are better than many: measured on 2 cores with 16 clients, 4 connections
    gave p99 7.8 ms where 16 gave 55 ms (more PostgreSQL backends competing with the
    server for the CPUs).

    Connection loss (a PostgreSQL restart or failover, an idle kill): a connection that
    fails is closed, and every other idle one is then suspect too (a restart kills them
    all), so the failure bumps a generation number and connections of an older
    generation are replaced on their next use instead of each failing one request. The
    failed group is retried once on a fresh connection; if that fails as well the
    database is down, which is a 503 (retryable), never a 500. Connecting is bounded by
    `connect_timeout`, so no request waits forever on an unreachable server.

    Connections are also replaced after `MAX_AGE_S`. The lookups are prepared statements,
    and after five runs PostgreSQL may keep one generic plan for each; a plan chosen while the
    table was nearly empty can pick an index that only narrows by warehouse (every index
    looks alike at a few rows) and then reads every table of the warehouse per lookup,
    until something invalidates it (an ANALYZE: never, where autovacuum is off). Measured:
    a connection opened at 1 table gave loadTable 0.7 ms of PostgreSQL CPU after 2,400
    creates, against 0.06 ms on a new one. A new connection plans again from the table as
    it is; planning every lookup instead (`plan_cache_mode`) cost ~45 us of PostgreSQL
    CPU per query, 15 % of the 1-client loadTable rate.
    """

    # Lookups answered by one query at most: a bound on the query's size and on the time
    # the first of them waits for the last row.
    MAX_GROUP = 64
    # How long a connection (and the plans it keeps) is used before it is replaced.
    MAX_AGE_S = 60.0

    def __init__(self, conninfo: dict[str, Any], max_size: int, cache_bytes: int) -> None:
        self._conninfo = {"connect_timeout": 10, **conninfo, "autocommit": True}
        self._size = max(1, max_size)
        # A slot is None (not connected yet, or discarded) or a _Slot.
        self._idle: asyncio.Queue[_Slot | None] = asyncio.Queue()
        self._generation = 0
        self._cache = DocumentCache(cache_bytes)
        self._open = 0
        self._stats = {"requests_num": 0, "connections_errors": 0, "connections_lost": 0}
        self._pending: dict[_Key, list[asyncio.Future[TabularRow | None]]] = {}
        # The groups being answered, by serial number (their task finds itself by it).
        self._running: dict[int, asyncio.Task[None]] = {}
        self._serials = itertools.count()
        self._inline = 0  # lookups running in their request's task (see load_tabular)
        self._inline_done: asyncio.Event | None = None  # close() waits on it for them
        self._group_stats = {"queries": 0, "lookups": 0}

    async def open(self) -> None:
        # Connections are made lazily: a slot holds None until first used.
        for _ in range(self._size):
            self._idle.put_nowait(None)

    async def close(self) -> None:
        if self._inline:  # lookups running in their requests' tasks hold connections too
            self._inline_done = asyncio.Event()
            await self._inline_done.wait()
        if self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)
        while not self._idle.empty():
            slot = self._idle.get_nowait()
            if slot is not None:
                await self._discard(slot[0])

    async def _discard(self, conn: AsyncConnection[tuple[Any, ...]]) -> None:
        self._open -= 1
        await conn.close()

    def pool_stats(self) -> dict[str, int]:
        """For /metrics, in the keys of psycopg_pool's get_stats() (plus connections_lost)."""
        return {"pool_max": self._size, "pool_size": self._open, **self._stats}

    def group_stats(self) -> dict[str, int]:
        """Queries run and lookups they answered (lookups / queries = the mean group)."""
        return dict(self._group_stats)

    async def _checkout(self) -> _Slot:
        """An idle connection (waiting for one if all are busy), replaced first when it is
        of an older generation or past its age, or opened if the slot holds none."""
        slot = await self._idle.get()
        self._stats["requests_num"] += 1
        now = asyncio.get_running_loop().time()
        generation = self._generation
        try:
            if slot is not None:
                conn, born, opened, share, _ = slot
                if (
                    born == generation
                    and not conn.closed
                    and now - opened <= self.MAX_AGE_S * share
                ):
                    return slot
                # Opened before a connection failure, or too long ago: replace it (see the
                # class doc).
                slot = None
                await self._discard(conn)
            try:
                conn = await AsyncConnection.connect(**self._conninfo)
            except psycopg.Error:
                self._stats["connections_errors"] += 1
                raise
            self._open += 1
            try:
                for name, statement, types in _PREPARE:
                    await prepare(conn, name, statement, types)
            except BaseException:
                await self._discard(conn)
                raise
            # Connections opened together would all expire together, each making one lookup
            # wait for a new connection at the same moment: spread them out.
            share = random.uniform(0.9, 1.1)  # noqa: S311 - not security
            # The encoding is read once: `conn.info` builds an object per call.
            return (conn, generation, now, share, conn.info.encoding)
        except BaseException:
            self._idle.put_nowait(None)  # the slot stays, empty: the next use connects
            raise

    async def _give_back(self, slot: _Slot, *, broken: bool) -> None:
        """Return a checked-out connection; one whose query failed or was cancelled half-way
        is in an unknown state, so it is closed and its slot left empty."""
        if broken:
            self._idle.put_nowait(None)
            await self._discard(slot[0])
        else:
            self._idle.put_nowait(slot)

    async def load_tabular(
        self, warehouse_id: str, ns: NamespaceName, name: str, kind: str
    ) -> TabularRow | None:
        ns_key = ns.key
        if "\x00" in name or "\x00" in ns_key:
            # No stored name holds NUL (PostgreSQL text cannot), and libpq would cut the
            # parameter there and find another table.
            return None
        key = (warehouse_id, ns_key, name, kind)
        if not self._pending and len(self._running) + self._inline < self._size:
            # Nothing waits and a connection is free: this lookup is a group of one, run in
            # the request's own task (a task of its own cost a loop turn and a hand-off).
            self._inline += 1
            try:
                return (await self._answer([key])).get(key)
            finally:
                self._inline -= 1
                if not self._inline and self._inline_done is not None:
                    self._inline_done.set()
                # Lookups that arrived meanwhile go next.
                if self._pending and len(self._running) + self._inline < self._size:
                    self._start_group()
        found: asyncio.Future[TabularRow | None] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(key, []).append(found)
        if len(self._running) + self._inline < self._size:
            self._start_group()
        return await found

    def _start_group(self) -> None:
        """Take what is pending now (the lookups that the query will answer) and run it."""
        if not self._pending:
            return
        keys = list(itertools.islice(self._pending, self.MAX_GROUP))
        group = {key: self._pending.pop(key) for key in keys}
        serial = next(self._serials)
        task = asyncio.get_running_loop().create_task(self._run_group(group, serial))
        self._running[serial] = task

    async def _run_group(
        self, group: dict[_Key, list[asyncio.Future[TabularRow | None]]], serial: int
    ) -> None:
        try:
            rows = await self._answer(list(group))
        except Exception as exc:
            for waiters in group.values():
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(exc)
        except BaseException:  # cancelled (shutdown): so are the requests waiting on it
            for waiters in group.values():
                for waiter in waiters:
                    waiter.cancel()
            raise
        else:
            for key, waiters in group.items():
                for waiter in waiters:
                    if not waiter.done():  # a cancelled request (client gone, timeout)
                        waiter.set_result(rows.get(key))
        finally:
            self._running.pop(serial, None)
            # Lookups that arrived while every connection was busy go next.
            if self._pending and len(self._running) + self._inline < self._size:
                self._start_group()

    async def _answer(self, keys: list[_Key]) -> dict[_Key, TabularRow]:
        self._group_stats["queries"] += 1
        self._group_stats["lookups"] += len(keys)
        try:
            return await self._lookup(keys)
        except _CONNECTION_ERRORS:
            # The connection was lost (server restart, idle kill): it was discarded and
            # the other idle ones are now suspect, so the retry runs on a new connection.
            self._lost()
        try:
            return await self._lookup(keys)
        except _CONNECTION_ERRORS as exc:
            # A second failure on a fresh connection: the database is unreachable.
            self._lost()
            raise ServiceUnavailableError(
                "The catalog database is unavailable; retry later"
            ) from exc

    def _lost(self) -> None:
        self._generation += 1
        self._stats["connections_lost"] += 1

    async def _lookup(self, keys: list[_Key]) -> dict[_Key, TabularRow]:
        slot = await self._checkout()
        try:
            found = await self._query(slot[0], keys, slot[4])
        except BaseException:
            await self._give_back(slot, broken=True)
            raise
        await self._give_back(slot, broken=False)
        return found

    async def _query(
        self, conn: AsyncConnection[tuple[Any, ...]], keys: list[_Key], encoding: str
    ) -> dict[_Key, TabularRow]:
        heads: dict[_Key, tuple[str | None, ...]]
        if len(keys) == 1:
            # The plain query: cheaper to plan and to read than the grouped one.
            rows = await run_prepared(conn, HEAD_STATEMENT, keys[0], encoding)
            heads = {keys[0]: rows[0]} if rows else {}
        else:
            columns = [array_literal(column) for column in zip(*keys, strict=True)]
            rows = await run_prepared(conn, _GROUP_STATEMENT, columns, encoding)
            heads = {keys[int(str(row[0])) - 1]: row[1:] for row in rows}
        found: dict[_Key, TabularRow] = {}
        missing: dict[str, list[_Key]] = {}
        for key, (tid, location, text_version) in heads.items():
            # Every column is NOT NULL: text, text and a number.
            assert tid is not None and location is not None and text_version is not None
            version = int(text_version)
            data = self._cache.get((tid, version))
            if data is None:
                missing.setdefault(tid, []).append(key)
            else:
                found[key] = TabularRow(tid, location, data, version)
        if missing:
            # Binary format: bytea in text format is hex, twice the size to decode.
            cur = await conn.execute(_GROUP_DOCS, (list(missing),), binary=True)
            for tid, data, version, location in await cur.fetchall():
                row = TabularRow(tid, location, bytes(data), version)
                self._cache.put((tid, version), row.metadata)
                for key in missing[tid]:
                    found[key] = row
            # An id not returned was dropped between the two reads: not found.
        return found

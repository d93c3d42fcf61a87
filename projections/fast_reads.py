"""The loadTable hot path, read on the event loop without a thread hop.

Every other query runs in the threadpool through `CatalogQueries`. loadTable is the
call every Spark task and every refresh makes, so it gets an async reader: an async
psycopg pool on PostgreSQL, and a private read-only connection on SQLite (a local
indexed read takes tens of microseconds, less than handing it to a thread).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Protocol

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from domain.identifiers import NamespaceName
from projections.queries import TabularRow

_LOAD = (
    "SELECT id, metadata_location, metadata, version FROM icelog_tabulars "
    "WHERE warehouse_id = ? AND ns_key = ? AND name = ? AND kind = ?"
)


class TabularReader(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def load_tabular(
        self, warehouse_id: str, ns: NamespaceName, name: str, kind: str
    ) -> TabularRow | None: ...


class SQLiteTabularReader:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None

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
        r = self._conn.execute(_LOAD, (warehouse_id, ns.key, name, kind)).fetchone()
        return TabularRow(r[0], r[1], bytes(r[2]), r[3]) if r else None


class PostgresTabularReader:
    def __init__(self, conninfo: dict[str, Any], max_size: int) -> None:
        self._pool: AsyncConnectionPool[AsyncConnection[tuple[Any, ...]]] = AsyncConnectionPool(
            kwargs={**conninfo, "autocommit": True},
            min_size=1,
            max_size=max_size,
            open=False,
        )
        self._sql = _LOAD.replace("?", "%s")

    async def open(self) -> None:
        await self._pool.open(wait=True, timeout=30)

    async def close(self) -> None:
        await self._pool.close()

    async def load_tabular(
        self, warehouse_id: str, ns: NamespaceName, name: str, kind: str
    ) -> TabularRow | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(self._sql, (warehouse_id, ns.key, name, kind))
            r = await cur.fetchone()
        return TabularRow(r[0], r[1], bytes(r[2]), r[3]) if r else None

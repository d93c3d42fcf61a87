"""Short transactions on the catalog's own database, for the tables next to the log
(read-model maintenance, task leases, relay positions, the event index, the audit chain)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg.rows import tuple_row

Datastore = SQLiteDatastore | PostgresDatastore


@contextmanager
def write_transaction(datastore: Datastore) -> Iterator[Any]:
    """One read-write transaction. On SQLite it takes the write lock at BEGIN (IMMEDIATE): a
    deferred transaction that reads first could not write if a server appended meanwhile."""
    if isinstance(datastore, PostgresDatastore):
        with (
            datastore.get_connection() as conn,
            conn.transaction(),
            conn.cursor(row_factory=tuple_row) as cur,
        ):
            yield cur
        return
    with datastore.get_connection(commit=True) as lite, lite.cursor() as cur:
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
        except BaseException:
            lite.rollback()
            raise
        lite.commit()


class SqlStore:
    """Statements written once for both dialects: `?` placeholders become `%s` on
    PostgreSQL, where nothing is prepared (the pool's connections are shared)."""

    def __init__(self, datastore: Datastore) -> None:
        self._datastore = datastore
        self.dialect = "postgres" if isinstance(datastore, PostgresDatastore) else "sqlite"

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.dialect == "postgres" else statement

    def _execute(self, cur: Any, statement: str, params: Any = ()) -> None:
        if self.dialect == "postgres":
            cur.execute(self._sql(statement), params, prepare=False)
        else:
            cur.execute(statement, params)

    def _run(self, statement: str, params: Any = (), *, fetch: bool = True) -> list[Any]:
        with write_transaction(self._datastore) as cur:
            self._execute(cur, statement, params)
            return [tuple(r) for r in cur.fetchall()] if fetch else []

    def _run_many(self, statement: str, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            with write_transaction(self._datastore) as cur:
                cur.executemany(self._sql(statement), rows)

"""Short transactions on the catalog's own database, for the tables next to the log
(read-model maintenance, task leases, relay positions, the event index, the audit chain)."""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from eventsourcing.persistence import InterfaceError, OperationalError, PersistenceError
from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg.rows import DictRow, tuple_row
from psycopg_pool import ConnectionPool

from icelog.domain.errors import NothingAppendedError, ServiceUnavailableError
from icelog.projections import pg_binary
from icelog.projections.adapters.eventsourcing import Checkout, wrap_checkout

Datastore = SQLiteDatastore | PostgresDatastore
log = logging.getLogger("icelog.db")


class DatabaseUnavailableError(OperationalError, ServiceUnavailableError):
    """PostgreSQL could not serve a statement: the connection was lost (a restart, a
    failover, a terminated backend), none could be had in time (the pool's timeout while
    the server is down), or a lock or statement timeout ran out.

    Still an eventsourcing `OperationalError`, so the library's own retries (its
    `insert_events`, `select_events`, ... retry 10 times, 0.2 s apart) work as before;
    and a `ServiceUnavailableError`, so a request that fails on it answers 503 (retry
    later; for a commit, the Iceberg clients' CommitStateUnknown) instead of a 500.
    """

    def __init__(self, message: str) -> None:
        NothingAppendedError.__init__(self, message)


class DatabaseBusyError(PersistenceError, NothingAppendedError):
    """A lock wait ran out (ICELOG_PG_LOCK_TIMEOUT_SECONDS): another session held a lock
    on what the statement needed for too long (a stuck writer, DDL, VACUUM FULL).

    Deliberately NOT an eventsourcing `OperationalError` (which a lock timeout would
    otherwise become): the library's @retry would wait for the lock 10 more times, so a
    commit failed only after ~10 lock timeouts and a stuck lock holder still stalled every
    writer. Nothing was appended, so the 503 is safe to retry."""

    def __init__(self, message: str) -> None:
        NothingAppendedError.__init__(self, message)


def is_lock_timeout(exc: BaseException) -> bool:
    """Whether `exc` (or an error it wraps) is PostgreSQL's lock_timeout running out."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, psycopg.errors.LockNotAvailable):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def check_pooled_connection(conn: psycopg.Connection[Any]) -> None:
    """Raise if an idle pooled connection is dead; a round trip only when it may be.

    An idle connection has nothing to read. When PostgreSQL restarts or terminates a
    backend it sends an error and closes the socket, which makes the socket readable:
    only then is a real check (an empty query) run. A poll costs microseconds where a
    ping on every checkout would cost a round trip. Usable as a psycopg_pool `check`
    callback (`ConnectionPool(..., check=check_pooled_connection)`) for other pools."""
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    try:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        readable = bool(poller.poll(0))
    except (OSError, ValueError) as exc:
        raise psycopg.OperationalError(f"the connection's socket is unusable: {exc}") from exc
    if readable:  # something arrived while idle: ask the server
        ConnectionPool.check_connection(conn)


def _looks_alive(conn: psycopg.Connection[Any]) -> bool:
    try:
        check_pooled_connection(conn)
    except psycopg.Error:
        return False
    return True


def harden_postgres_datastore(datastore: PostgresDatastore) -> None:
    """Make the datastore's pool survive a PostgreSQL restart and bound lock waits
    (called once by the application recorder; every user of the datastore goes through
    `get_connection`).

    - The pool (psycopg_pool, no pre-ping) kept the connections a restart had killed and
      handed each out once more: after PostgreSQL came back, every read through a dead
      connection answered 500, one per pooled connection (tests/e2e/test_pg_restart.py).
      Now a connection whose socket shows the server hung up is closed (the pool replaces
      a closed connection) and the next one is taken.
    - A failure to talk to the database is a `DatabaseUnavailableError` (503), not an
      unexpected error (500).
    - The datastore's lock timeout (ICELOG_PG_LOCK_TIMEOUT_SECONDS) only bounded the
      append's LOCK TABLE, and eventsourcing retried a timed-out lock 10 times. It is now
      the session's `lock_timeout` on every pooled connection (so reads a stuck DDL lock
      blocks give up too), and a timed-out lock is a `DatabaseBusyError`: one wait, then
      503 (tests/integration/test_lock_timeout.py). Statements that must wait longer set
      their own `SET LOCAL lock_timeout` (migrations, rebuild swaps do).
    """
    wrap_checkout(datastore, lambda checkout: _hardened(datastore, checkout))


def _hardened(datastore: PostgresDatastore, checkout: Checkout) -> Checkout:
    """`checkout` (the datastore's own) made as `harden_postgres_datastore` says."""
    attempts = datastore.pool.max_size + 1
    lock_timeout_ms = int(datastore.lock_timeout * 1000)
    configured: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()

    @contextmanager
    def get_connection() -> Iterator[psycopg.Connection[DictRow]]:
        try:
            for attempt in range(attempts):
                with checkout() as conn:
                    if attempt == attempts - 1 or _looks_alive(conn):
                        if lock_timeout_ms and conn not in configured:
                            conn.execute(f"SET lock_timeout = {lock_timeout_ms}")
                            configured.add(conn)
                        yield conn
                        return
                    conn.close()  # returned closed: the pool opens a new one
        except (OperationalError, InterfaceError) as exc:
            if isinstance(exc, DatabaseUnavailableError):
                raise
            if is_lock_timeout(exc):
                log.warning("catalog database lock wait timed out: %s", exc)
                raise DatabaseBusyError(
                    "A catalog database lock stayed held by another session for over "
                    f"{datastore.lock_timeout} s; nothing was changed, retry later"
                ) from exc
            log.warning("catalog database unavailable: %s", exc)
            raise DatabaseUnavailableError(
                "The catalog database is unavailable; retry later"
            ) from exc

    return get_connection


class HeldConnection:
    """One pooled connection kept checked out for the group committer's appends.

    Checking a connection out of psycopg_pool and back in (its lock, the liveness poll,
    the return's bookkeeping and wake-ups) cost ~6 % of a commit's server CPU, once per
    append. The appends of plain commits run on one thread, so that thread keeps one
    connection instead: still checked out through the hardened `get_connection` (lock
    timeout, liveness, 503 on failure) and still polled for liveness before each use. It
    goes back to the pool after a failed statement (the pool replaces a broken one), when
    it looks dead, and after `max_age_s` — so that plans PostgreSQL cached on it are made
    again as the tables grow (see fast_reads.py on a plan kept from an empty catalog).
    A second thread that appends at the same moment takes a pooled connection as before.

    The pool must not be starved by it: with fewer than `MIN_POOL` connections nothing is
    held (a pool of one would have no connection left for the aggregate reads a commit
    makes before its append), and after each append the connection goes back at once when
    someone waits for one or none is idle.
    """

    MIN_POOL = 4

    def __init__(self, datastore: PostgresDatastore, max_age_s: float = 60.0) -> None:
        self._datastore = datastore
        self._max_age_s = max_age_s
        self._lock = threading.Lock()
        # (the hardened checkout, still open; its connection; when it was taken)
        self._held: tuple[Any, psycopg.Connection[Any], float] | None = None

    @contextmanager
    def use(self) -> Iterator[psycopg.Connection[Any]]:
        pool = self._datastore.pool
        if pool.max_size < self.MIN_POOL or not self._lock.acquire(blocking=False):
            with self._datastore.get_connection() as conn:
                yield conn
            return
        try:
            held = self._held
            if held is not None and (
                time.monotonic() - held[2] > self._max_age_s or not _looks_alive(held[1])
            ):
                self._give_back()
                held = None
            if held is None:
                checkout = self._datastore.get_connection()
                held = self._held = (checkout, checkout.__enter__(), time.monotonic())
            try:
                yield held[1]
            except BaseException as exc:
                # The statement failed: the connection goes back, as a `with` would return
                # it (the checkout may turn the error into a 503 on the way).
                self._held = None
                if not held[0].__exit__(type(exc), exc, exc.__traceback__):
                    raise
                return
            stats = pool.get_stats()
            if stats["requests_waiting"] or not stats["pool_available"]:
                self._give_back()  # others need it more
        finally:
            self._lock.release()

    def _give_back(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held[0].__exit__(None, None, None)

    def release(self) -> None:
        """Give the connection back (before the pool closes: it would stay open)."""
        with self._lock, contextlib.suppress(Exception):
            self._give_back()


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

    @contextmanager
    def reading(self) -> Iterator[Any]:
        """A cursor for plain reads: no write lock (SQLite) and no transaction held open
        (PostgreSQL); rows come back as tuples."""
        store = self._datastore
        if isinstance(store, PostgresDatastore):
            with store.get_connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
                yield cur
            return
        with store.transaction(commit=False) as cur:
            yield cur

    @contextmanager
    def snapshot(self) -> Iterator[Any]:
        """A cursor whose statements all read one snapshot: what one answer and the
        position it hands out (a continuation token) must agree on. Two statements on an
        autocommit connection each see what was committed when they ran: a row committed
        between them was counted by the second (the token moved past it) but not returned
        by the first, and a consumer following the token never saw it.
        On PostgreSQL a REPEATABLE READ, READ ONLY transaction (it waits for no lock and
        takes none that writers wait for); on SQLite one read transaction (WAL: the
        snapshot of its first read)."""
        store = self._datastore
        if isinstance(store, PostgresDatastore):
            with (
                store.get_connection() as conn,
                conn.transaction(),
                conn.cursor(row_factory=tuple_row) as cur,
            ):
                cur.execute(
                    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", prepare=False
                )
                yield cur
            return
        with store.transaction(commit=False) as cur:
            yield cur

    def _run(self, statement: str, params: Any = (), *, fetch: bool = True) -> list[Any]:
        with write_transaction(self._datastore) as cur:
            self._execute(cur, statement, params)
            return [tuple(r) for r in cur.fetchall()] if fetch else []

    def _insert_rows(
        self,
        cur: Any,
        table: str,
        columns: Sequence[tuple[str, str]],
        rows: Sequence[Sequence[Any]],
        suffix: str = "",
    ) -> None:
        """INSERT many rows: `columns` as (name, "text" | "int8"). On PostgreSQL one
        statement over unnest()ed arrays packed in binary (pg_binary): psycopg's
        executemany dumps every parameter of every row in Python and reads one result per
        row, about a quarter of the followers' CPU (docs/benchmarks.md, session 11)."""
        if not rows:
            return
        names = ", ".join(name for name, _ in columns)
        if self.dialect != "postgres":
            marks = ", ".join("?" * len(columns))
            cur.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks}) {suffix}", rows)
            return
        encoding = cur.connection.info.encoding
        arrays = [
            pg_binary.column_array(kind, [row[i] for row in rows], encoding)
            for i, (_, kind) in enumerate(columns)
        ]
        pg_binary.register(cur.adapters)
        marks = ", ".join(["%b"] * len(columns))
        cur.execute(
            f"INSERT INTO {table} ({names}) SELECT * FROM unnest({marks}) {suffix}",
            arrays,
            prepare=False,
        )

"""Verify the live read model against the log, and rebuild it from the log in place.

verify: one snapshot transaction (REPEATABLE READ on PostgreSQL, a WAL read transaction
on SQLite) folds the log up to the head it sees into temporary tables and compares them
with the live tables as of that same snapshot. The inline projection commits the events
and their rows together, so the two sides are at the same position even while a server
writes; the temporary tables vanish with the transaction, and writers are never blocked.

rebuild: the log is folded, in batches that each commit, into fresh `rebuild_icelog_*`
tables while the catalog keeps running. Then ONE transaction takes the log's write lock
(PostgreSQL: the same EXCLUSIVE lock on the events table that every append takes;
SQLite: the database write lock, BEGIN IMMEDIATE), folds the events appended since
(the catch-up), renames live -> `old_`, new -> live, drops the old tables, and gives the
indexes their live names. Appends wait for that transaction and land in the new tables;
reads of the swapped tables wait on PostgreSQL (ACCESS EXCLUSIVE), and on SQLite go on
reading the old tables until the commit. Either everything is swapped or nothing is.
`icelog_task_leases` and `icelog_publisher_positions` are coordination state, not
projections: never touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from eventsourcing.persistence import ApplicationRecorder, Mapper
from eventsourcing.postgres import PostgresDatastore
from psycopg import sql
from psycopg.rows import tuple_row

from icelog.projections.rebuild import (
    Datastore,
    Fold,
    drop_tables,
    index_statements,
    snapshot_transaction,
)
from icelog.projections.rebuild import compare as compare_tables
from icelog.projections.schema import READ_MODEL_TABLES, create_statements
from icelog.projections.sql import is_lock_timeout, write_transaction

NEW_PREFIX = "rebuild_"
OLD_PREFIX = "old_"
# How long the swap waits for a lock (the log's write lock, then the live tables) before
# it gives up and tries again; appends and reads queue behind it for at most that long.
SWAP_LOCK_TIMEOUT_S = 5.0
SWAP_ATTEMPTS = 3
_ADVISORY_KEY = 0x1CE1_0600_0006  # one rebuild at a time per PostgreSQL database

# stage ("fold" | "swap"), events applied, events to apply (0 when unknown)
Progress = Callable[[str, int, int], None]


class MaintenanceError(RuntimeError):
    """The operation could not run or complete; the live tables are as they were."""


@dataclass(frozen=True)
class VerifyResult:
    head: int
    applied: int
    differences: list[str]
    seconds: float


@dataclass(frozen=True)
class RebuildResult:
    tables: tuple[str, ...]
    applied: int  # folded before the swap
    caught_up: int  # folded inside the swap transaction
    seconds: float
    swap_seconds: float

    @property
    def events(self) -> int:
        return self.applied + self.caught_up


def _datastore(recorder: ApplicationRecorder) -> Datastore:
    datastore: Datastore = recorder.datastore  # type: ignore[attr-defined]
    return datastore


def scratch_prefix(datastore: Datastore) -> str:
    """Tables private to one connection, dropped with the transaction."""
    return "pg_temp.verify_" if isinstance(datastore, PostgresDatastore) else "temp.verify_"


def verify(
    recorder: ApplicationRecorder,
    mapper: Mapper[Any],
    progress: Progress | None = None,
    tables: Sequence[str] = READ_MODEL_TABLES,
) -> VerifyResult:
    """Fold the log into scratch tables and compare them with the live read model."""
    started = time.perf_counter()
    datastore = _datastore(recorder)
    fold = Fold(recorder, mapper, scratch_prefix(datastore))
    with snapshot_transaction(datastore) as cur:
        head = fold.head(cur)  # the first query fixes the snapshot
        fold.create_tables(cur, tuning=False)
        total = fold.remaining(cur, head)
        report = None if progress is None else _stage(progress, "fold", total)
        fold.run(cur, stop=head, progress=report)
        found = compare_tables(cur, fold.dialect, fold.prefix, tables)
    return VerifyResult(head, fold.applied, found, time.perf_counter() - started)


def rebuild_and_swap(
    recorder: ApplicationRecorder,
    mapper: Mapper[Any],
    only: Sequence[str] | None = None,
    progress: Progress | None = None,
    *,
    lock_timeout_s: float = SWAP_LOCK_TIMEOUT_S,
    attempts: int = SWAP_ATTEMPTS,
) -> RebuildResult:
    """Rebuild the read model (or the tables in `only`) from the log and swap it in."""
    tables = tuple(only) if only else READ_MODEL_TABLES
    unknown = sorted(set(tables) - set(READ_MODEL_TABLES))
    if unknown:
        raise MaintenanceError(
            f"not read-model tables: {', '.join(unknown)} "
            f"(choose from {', '.join(READ_MODEL_TABLES)})"
        )
    started = time.perf_counter()
    datastore = _datastore(recorder)
    fold = Fold(recorder, mapper, NEW_PREFIX)
    with _one_rebuild_at_a_time(datastore):
        try:
            with write_transaction(datastore) as cur:
                drop_tables(cur, NEW_PREFIX)
                drop_tables(cur, OLD_PREFIX)
                fold.create_tables(cur)
                total = fold.remaining(cur)
            report = None if progress is None else _stage(progress, "fold", total)
            while True:
                with write_transaction(datastore) as cur:
                    if not fold.run(cur, progress=report):
                        break
            if fold.dialect == "postgres":
                # Built after the fold (faster than maintained during it), under the new
                # tables' names; the swap renames them.
                with write_transaction(datastore) as cur:
                    for statement in index_statements("postgres", NEW_PREFIX):
                        cur.execute(statement)
            if progress is not None:
                progress("swap", fold.applied, fold.applied)
            applied = fold.applied
            swap_started = time.perf_counter()
            _swap(fold, tables, lock_timeout_s, attempts)
            finished = time.perf_counter()
        except BaseException:
            with contextlib.suppress(Exception), write_transaction(datastore) as cur:
                drop_tables(cur, NEW_PREFIX)
            raise
    return RebuildResult(
        tables, applied, fold.applied - applied, finished - started, finished - swap_started
    )


def _stage(progress: Progress, stage: str, total: int) -> Callable[[int], None]:
    progress(stage, 0, total)
    return lambda applied: progress(stage, applied, total)


def _swap(fold: Fold, tables: Sequence[str], lock_timeout_s: float, attempts: int) -> None:
    for attempt in range(1, attempts + 1):
        checkpoint = fold.checkpoint()
        try:
            with _log_write_lock(fold, lock_timeout_s) as cur:
                fold.run(cur)  # catch up: appends that committed since the fold's last batch
                _rename(cur, fold.dialect, tables)
            return
        except Exception as exc:
            fold.rewind(checkpoint)  # the catch-up was rolled back with the rest
            if not is_lock_timeout(exc):
                raise
            if attempt == attempts:
                raise MaintenanceError(
                    f"the swap did not get its locks within {lock_timeout_s:g} s "
                    f"({attempts} attempts); the live tables are unchanged"
                ) from exc
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _log_write_lock(fold: Fold, lock_timeout_s: float) -> Iterator[Any]:
    """A transaction holding the lock every append takes: no event commits meanwhile."""
    if fold.dialect == "postgres":
        with write_transaction(fold.datastore) as cur:
            cur.execute(f"SET LOCAL lock_timeout = '{int(lock_timeout_s * 1000)}ms'")
            fold.lock_log(cur)
            yield cur
        return
    with write_transaction(fold.datastore) as cur:  # BEGIN IMMEDIATE takes the write lock
        yield cur


def _rename(cur: Any, dialect: str, tables: Sequence[str]) -> None:
    """live -> old, new -> live, drop old; indexes named as the schema names them."""
    if dialect == "postgres":
        # Take the live tables now, so that no rename waits halfway (readers queue here).
        cur.execute(f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE")
    for table in tables:
        cur.execute(f"ALTER TABLE {table} RENAME TO {OLD_PREFIX}{table}")
        cur.execute(f"ALTER TABLE {NEW_PREFIX}{table} RENAME TO {table}")
    for table in tables:
        cur.execute(f"DROP TABLE {OLD_PREFIX}{table}")
    for table in [t for t in READ_MODEL_TABLES if t not in tables]:
        cur.execute(f"DROP TABLE {NEW_PREFIX}{table}")
    if dialect == "postgres":
        # ALTER TABLE ... RENAME keeps index names: the new tables' indexes (primary keys
        # included) still carry the prefix. The old tables' went with them, so the live
        # names are free.
        cur.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename = ANY(%s) AND indexname LIKE %s",
            (list(tables), NEW_PREFIX.replace("_", r"\_") + "%"),
        )
        for (name,) in cur.fetchall():
            cur.execute(
                sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                    sql.Identifier(name), sql.Identifier(name.removeprefix(NEW_PREFIX))
                )
            )
    # SQLite cannot rename an index: the new tables were made without their secondary
    # indexes, and this creates them under the live names (on PostgreSQL it finds them all
    # and only re-applies the column settings). The same statements run at every start-up.
    for statement in create_statements(dialect):
        cur.execute(statement)


@contextlib.contextmanager
def _one_rebuild_at_a_time(datastore: Datastore) -> Iterator[None]:
    """Two rebuilds would share the `rebuild_` tables: the second one is refused."""
    if isinstance(datastore, PostgresDatastore):
        with datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
            cur.execute("SELECT pg_try_advisory_lock(%s)", (_ADVISORY_KEY,))
            locked = cur.fetchone()
            if not (locked and locked[0]):
                raise MaintenanceError("another rebuild is running on this database")
            try:
                yield
            finally:
                cur.execute("SELECT pg_advisory_unlock(%s)", (_ADVISORY_KEY,))
        return
    db_name = str(datastore.pool.db_name)
    if ":memory:" in db_name or "mode=memory" in db_name:
        yield
        return
    with Path(db_name.removeprefix("file:").split("?")[0] + ".rebuild-lock").open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise MaintenanceError("another rebuild is running on this database") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class ProgressLine:
    """`stage: applied / total events (percent), events/s` on one line, redrawn with a
    carriage return at most every `interval` seconds."""

    def __init__(self, stream: TextIO | None = None, interval: float = 0.25) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self._stage = ""
        self._started = time.perf_counter()
        self._shown = 0.0
        self._width = 0

    def __call__(self, stage: str, applied: int, total: int) -> None:
        now = time.perf_counter()
        total = max(total, applied)  # appends made since the count was taken
        if stage != self._stage:
            if self._stage:
                self.done()
            self._stage, self._started, self._shown = stage, now, 0.0
        elif now - self._shown < self.interval and applied < total:
            return
        self._shown = now
        rate = applied / max(now - self._started, 1e-6)
        share = f" ({100 * applied // total}%)" if total else ""
        line = f"{stage}: {applied:,} / {total:,} events{share}, {rate:,.0f} events/s"
        if stage == "swap":
            line = "swap: taking the log's write lock, catching up, swapping the tables"
        self.stream.write("\r" + line.ljust(self._width))
        self._width = len(line)
        self.stream.flush()

    def done(self) -> None:
        if self._stage:
            self.stream.write("\n")
            self.stream.flush()
            self._stage = ""

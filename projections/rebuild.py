"""Rebuild the catalog read model from the event log, and compare it with the live one.

The inline projection and the rebuild run the same fold (projections/fold.py); the only
difference is that a rebuild has no hints and folds every commit from the previous
document. Equality of the two proves the log alone reproduces the read model,
metadata documents included.

A rebuild is mostly table commits, and the inline path's way of folding one (read the
previous document back from the row, fold, write the row) costs two round trips per
event. `_RebuildView` keeps the documents it wrote in memory and defers a commit's row
write until something else needs the row, so a run of commits to a table costs one
UPDATE; the rows are still the fold's (`statements` of its row operations). Events are
read and applied through the same cursor, so a fold can run inside any transaction: its
own batches (`rebuild`), a swap that holds the log's write lock, or a read snapshot
(`projections.maintenance`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eventsourcing.persistence import ApplicationRecorder, Mapper, Notification
from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg import sql
from psycopg.rows import tuple_row

from icelog.domain.table import Table
from icelog.domain.view import View
from icelog.projections.fold import rows_of
from icelog.projections.row_ops import Require, Update
from icelog.projections.row_writer import Cursor, CursorReads, RowWriter, statements
from icelog.projections.schema import READ_MODEL_TABLES, create_statements
from icelog.projections.sql import write_transaction

BATCH = 2000
# Documents a fold keeps in memory to fold the next commit without reading the row back.
CACHE_BYTES = 256 * 1024 * 1024
# Rows per query when comparing tables (documents can be large).
COMPARE_CHUNK = 500

Datastore = SQLiteDatastore | PostgresDatastore
Progress = Callable[[int], None]


def dialect_of(datastore: Datastore) -> str:
    return "postgres" if isinstance(datastore, PostgresDatastore) else "sqlite"


@contextmanager
def snapshot_transaction(datastore: Datastore) -> Iterator[Any]:
    """A transaction that sees one state of the database throughout (from its first query)
    and is always rolled back: temporary tables written in it vanish with it.

    PostgreSQL: REPEATABLE READ. SQLite: a deferred transaction, which in WAL mode reads one
    snapshot; writes to `temp.` tables take no lock on the database, so writers go on."""
    if isinstance(datastore, PostgresDatastore):
        with (
            datastore.get_connection() as conn,
            conn.transaction(force_rollback=True),
            conn.cursor(row_factory=tuple_row) as cur,
        ):
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield cur
        return
    with datastore.transaction(commit=False) as lite:
        yield lite.sqlite_cursor


def _is_index(statement: str) -> bool:
    return statement.startswith(("CREATE INDEX", "CREATE UNIQUE INDEX"))


def table_statements(dialect: str, prefix: str, *, tuning: bool = True) -> list[str]:
    """DDL for `<prefix>` read-model tables without their secondary indexes (a fold is
    faster without them, and they are built or named once the fold is done)."""
    return [
        s
        for s in create_statements(dialect, prefix)
        if not _is_index(s) and (tuning or s.startswith("CREATE TABLE"))
    ]


def index_statements(dialect: str, prefix: str) -> list[str]:
    return [s for s in create_statements(dialect, prefix) if _is_index(s)]


class _CachedReads(CursorReads):
    """Documents the fold wrote are read from memory, the others from the table."""

    def __init__(self, view: _RebuildView, cur: Cursor) -> None:
        super().__init__(view, cur)
        self.view = view

    def tabular_document(self, tabular_id: str) -> bytes:
        # Nothing deferred for a row whose document is not kept: it is in the table.
        found = self.view.documents.get(tabular_id)
        return super().tabular_document(tabular_id) if found is None else found


class _RebuildView(RowWriter):
    """RowWriter with the previous documents in memory and commits' row writes deferred.

    A commit's writes (the fold's, as for any event) only overwrite columns of the
    table's own row, whatever the row held: so of several commits to one table only the
    last value of each statement matters, and it may be written later — as long as it is
    written before anything else runs. Every other event first writes all deferred
    statements, then runs as the inline projection does.
    """

    def __init__(self, dialect: str, prefix: str, cache_bytes: int | None = None) -> None:
        super().__init__(dialect, prefix)
        self.documents: OrderedDict[str, bytes] = OrderedDict()
        self._doc_bytes = 0
        self._max_bytes = CACHE_BYTES if cache_bytes is None else cache_bytes
        # tabular id -> {statement: params}; statement order is first-use order.
        self._pending: dict[str, dict[str, Sequence[Any]]] = {}

    def apply_one(self, cur: Cursor, event: object, hints: Any) -> None:
        if isinstance(event, (Table.Committed, View.Replaced)) and not hints:
            self._commit(cur, event)
            return
        self.flush(cur)
        if isinstance(event, (Table.Event, View.Event)):
            self._forget(str(event.originator_id))
        super().apply_one(cur, event, hints)

    def _commit(self, cur: Cursor, event: Table.Committed | View.Replaced) -> None:
        tid = str(event.originator_id)
        pending = self._pending.setdefault(tid, {})
        data = b""
        for op in rows_of(event, {}, _CachedReads(self, cur)):
            if isinstance(op, Require):
                continue  # a guard: live appends only
            assert isinstance(op, Update), "a commit only updates its own row"
            data = op.values.get("metadata", data)
            for statement, params in statements(op):
                pending[statement] = params
        self._remember(cur, tid, data)

    def _remember(self, cur: Cursor, tid: str, data: bytes) -> None:
        self._forget(tid)
        self.documents[tid] = data
        self._doc_bytes += len(data)
        while self._doc_bytes > self._max_bytes and self.documents:
            oldest = next(iter(self.documents))
            if oldest in self._pending:
                self.flush(cur)
            self._forget(oldest)

    def _forget(self, tid: str) -> None:
        dropped = self.documents.pop(tid, None)
        if dropped is not None:
            self._doc_bytes -= len(dropped)

    def forget_all(self) -> None:
        """After a rollback: the rows are what the database says again."""
        self.documents.clear()
        self._doc_bytes = 0
        self._pending.clear()

    def flush(self, cur: Cursor) -> None:
        """Write the deferred statements (one per table and statement)."""
        if not self._pending:
            return
        grouped: dict[str, list[Sequence[Any]]] = {}
        for pending in self._pending.values():
            for statement, params in pending.items():
                grouped.setdefault(statement, []).append(params)
        self._pending.clear()
        for statement, rows in grouped.items():
            if self.dialect == "postgres":
                # A pipeline instead of executemany, which would prepare the statement
                # (scratch tables are temporary; see RowWriter.execute on preparing).
                with cur.connection.pipeline():
                    for params in rows:
                        cur.execute(self.sql(statement), params, prepare=False)
            else:
                cur.executemany(self.sql(statement), rows)


class Fold:
    """Applies the log, in order, to the `<prefix>icelog_*` tables through a given cursor.

    It remembers its position, so one fold can go on in a later transaction: the batches
    of a rebuild, then the swap's catch-up under the log's write lock."""

    def __init__(
        self,
        recorder: ApplicationRecorder,
        mapper: Mapper[Any],
        prefix: str,
        *,
        cache_bytes: int | None = None,
    ) -> None:
        self.recorder = recorder
        self.mapper = mapper
        self.prefix = prefix
        self.datastore: Datastore = recorder.datastore  # type: ignore[attr-defined]
        self.dialect = dialect_of(self.datastore)
        self.view = _RebuildView(self.dialect, prefix, cache_bytes)
        self.position = 0
        self.applied = 0
        table_name: str = recorder.events_table_name  # type: ignore[attr-defined]
        if isinstance(self.datastore, PostgresDatastore):
            events = sql.Identifier(self.datastore.schema, table_name)
            self._names = {"events": events, "id": sql.SQL("notification_id")}
        else:
            self._names = {"events": sql.SQL(table_name), "id": sql.SQL("rowid")}

    def _query(self, template: str) -> Any:
        """`{events}` and `{id}` named for the dialect; `%s` parameters."""
        if self.dialect == "postgres":
            return sql.SQL(template).format(**self._names)
        names = {k: v.as_string() for k, v in self._names.items()}
        return template.format(**names).replace("%s", "?")

    def head(self, cur: Cursor) -> int:
        """The log's last position as `cur` sees it."""
        cur.execute(self._query("SELECT MAX({id}) FROM {events}"))
        found = cur.fetchone()
        return int(found[0] or 0)

    def lock_log(self, cur: Cursor) -> None:
        """PostgreSQL: take the lock every append takes on the events table (the
        library's append locks it IN EXCLUSIVE MODE), until the transaction ends."""
        cur.execute(self._query("LOCK TABLE {events} IN EXCLUSIVE MODE"))

    def remaining(self, cur: Cursor, stop: int | None = None) -> int:
        """How many events are after the position (up to `stop`)."""
        stop = self.head(cur) if stop is None else stop
        cur.execute(
            self._query("SELECT COUNT(*) FROM {events} WHERE {id} > %s AND {id} <= %s"),
            (self.position, stop),
        )
        return int(cur.fetchone()[0])

    def create_tables(self, cur: Cursor, *, tuning: bool = True) -> None:
        for statement in table_statements(self.dialect, self.prefix, tuning=tuning):
            cur.execute(statement)

    def _read(self, cur: Cursor, limit: int, stop: int | None) -> list[Notification]:
        bound = "" if stop is None else " AND {id} <= %s"
        query = self._query(
            "SELECT {id}, originator_id, originator_version, topic, state FROM {events} "
            "WHERE {id} > %s" + bound + " ORDER BY {id} LIMIT %s"
        )
        params = (self.position, limit) if stop is None else (self.position, stop, limit)
        cur.execute(query, params)
        convert = getattr(self.recorder, "convert_originator_id", None)
        return [
            Notification(
                id=row[0],
                originator_id=convert(row[1]) if convert else row[1],
                originator_version=row[2],
                topic=row[3],
                state=bytes(row[4]),
            )
            for row in cur.fetchall()
        ]

    def run(
        self,
        cur: Cursor,
        *,
        stop: int | None = None,
        limit: int | None = None,
        progress: Progress | None = None,
    ) -> int:
        """Apply the events after the position (up to `stop`, at most `limit`) through `cur`;
        every row write is made before it returns. Returns how many were applied."""
        done = 0
        while limit is None or done < limit:
            size = BATCH if limit is None else min(BATCH, limit - done)
            batch = self._read(cur, size, stop)
            if not batch:
                break
            for notification in batch:
                self.view.apply_one(cur, self.mapper.to_domain_event(notification), {})
            self.position = batch[-1].id
            done += len(batch)
            self.applied += len(batch)
            if progress is not None:
                progress(self.applied)
        self.view.flush(cur)
        return done

    def checkpoint(self) -> tuple[int, int]:
        return self.position, self.applied

    def rewind(self, checkpoint: tuple[int, int]) -> None:
        """Back to a checkpoint after the transaction that went on from it rolled back."""
        self.position, self.applied = checkpoint
        self.view.forget_all()


def drop_tables(cur: Cursor, prefix: str) -> None:
    for table in READ_MODEL_TABLES:
        cur.execute(f"DROP TABLE IF EXISTS {prefix}{table}")


def rebuild(
    recorder: ApplicationRecorder,
    mapper: Mapper[Any],
    prefix: str,
    progress: Progress | None = None,
) -> int:
    """Fold the whole log into fresh `<prefix>icelog_*` tables; returns events applied."""
    fold = Fold(recorder, mapper, prefix)
    with write_transaction(fold.datastore) as cur:
        drop_tables(cur, prefix)
        fold.create_tables(cur)
        for statement in index_statements(fold.dialect, prefix):
            cur.execute(statement)
    while True:
        with write_transaction(fold.datastore) as cur:
            if not fold.run(cur, limit=BATCH * 5, progress=progress):
                return fold.applied


def _short(value: Any) -> str:
    if isinstance(value, bytes):
        text = value.decode(errors="replace")
        return f"{text[:60]!r}{'...' if len(text) > 60 else ''} ({len(value)} bytes)"
    text = repr(value)
    return text if len(text) <= 240 else text[:237] + "..."


def _normal(row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)


def _ids_after(cur: Cursor, dialect: str, table: str, after: str | None) -> list[str]:
    mark = "%s" if dialect == "postgres" else "?"
    if after is None:
        cur.execute(f"SELECT id FROM {table} ORDER BY id LIMIT {COMPARE_CHUNK}")
    else:
        cur.execute(
            f"SELECT id FROM {table} WHERE id > {mark} ORDER BY id LIMIT {COMPARE_CHUNK}",
            (after,),
        )
    return [str(r[0]) for r in cur.fetchall()]


def _rows_by_id(
    cur: Cursor, dialect: str, table: str, columns: Sequence[str], ids: Sequence[str]
) -> dict[str, tuple[Any, ...]]:
    marks = ", ".join(["%s" if dialect == "postgres" else "?"] * len(ids))
    cur.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE id IN ({marks})", tuple(ids))
    return {str(r[0]): _normal(r) for r in cur.fetchall()}


def compare(
    cur: Cursor, dialect: str, prefix: str, tables: Sequence[str] = READ_MODEL_TABLES
) -> list[str]:
    """Rows that differ between the live tables and the `<prefix>` ones, column by column,
    one line per row. Reads in chunks, so large documents are never all in memory."""
    found: list[str] = []
    for table in tables:
        cur.execute(f"SELECT * FROM {table} WHERE 1 = 0")
        columns = [d[0] for d in cur.description]
        if columns[0] != "id":
            raise ValueError(f"{table}: the first column must be the id")
        seen: set[str] = set()
        after: str | None = None
        while ids := _ids_after(cur, dialect, table, after):
            after = ids[-1]
            seen.update(ids)
            live = _rows_by_id(cur, dialect, table, columns, ids)
            rebuilt = _rows_by_id(cur, dialect, prefix + table, columns, ids)
            for key in ids:
                if key not in rebuilt:
                    found.append(f"{table} {key}: only in the live table")
                elif live[key] != rebuilt[key]:
                    changed = [
                        f"{name} live={_short(a)} rebuilt={_short(b)}"
                        for name, a, b in zip(columns, live[key], rebuilt[key], strict=True)
                        if a != b
                    ]
                    found.append(f"{table} {key}: {'; '.join(changed)}")
        after = None
        while ids := _ids_after(cur, dialect, prefix + table, after):
            after = ids[-1]
            found.extend(
                f"{table} {key}: missing from the live table" for key in ids if key not in seen
            )
    return found


def differences(recorder: ApplicationRecorder, prefix: str) -> list[str]:
    """Rows that differ between the live read model and the `<prefix>` rebuild."""
    datastore: Datastore = recorder.datastore  # type: ignore[attr-defined]
    with snapshot_transaction(datastore) as cur:
        return compare(cur, dialect_of(datastore), prefix)

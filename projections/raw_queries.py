"""A prepared statement run on libpq directly (psycopg's `pq` layer), for the loadTable read.

psycopg's `AsyncConnection.execute` builds a cursor, converts the query, adapts each
parameter and builds the rows through its loaders: measured on this machine, ~140 µs of
Python CPU per loadTable lookup, against ~70 µs for the same prepared statement sent with
`PGconn.send_query_prepared` and its text result read with `get_value`. The loadTable read
runs for every Spark task and every table refresh, so it takes the short way; everything
else keeps psycopg's cursor.

The connection stays a psycopg `AsyncConnection` (opened, closed and used for the rarer
queries through psycopg): only the hot statement skips its cursor. A query cancelled or
failed half-way leaves the connection in an unknown state; the caller discards it then
(fast_reads.py `_connection`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import psycopg
import psycopg.errors
from psycopg import AsyncConnection, pq


def array_literal(values: Sequence[str]) -> str:
    """PostgreSQL's text form of a text[] (a text parameter; pg_binary.text_array is the
    binary form): every element quoted, `"` and `\\` escaped."""
    quoted = (v.replace("\\", "\\\\").replace('"', '\\"') for v in values)
    return "{" + ",".join(f'"{v}"' for v in quoted) + "}"


async def _ready(loop: asyncio.AbstractEventLoop, fd: int, *, write: bool = False) -> None:
    waiter: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not waiter.done():
            waiter.set_result(None)

    if write:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await waiter
    finally:
        if write:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


def _broken(pgconn: pq.abc.PGconn, what: str) -> psycopg.OperationalError:
    return psycopg.OperationalError(pgconn.get_error_message() or what)


async def _one_result(conn: AsyncConnection[Any]) -> pq.abc.PGresult:
    """Send what libpq holds and read the command's result (libpq's own failures — a closed
    socket, a lost server — raise psycopg.OperationalError). A failed command raises the
    error class psycopg would have raised for its SQLSTATE (a statement timeout or a
    recovery conflict is an OperationalError: the reader retries those)."""
    pgconn = conn.pgconn
    loop = asyncio.get_running_loop()
    fd = pgconn.socket
    while pgconn.flush():  # the rest is sent when the socket takes it
        await _ready(loop, fd, write=True)
    result: pq.abc.PGresult | None = None
    while True:
        pgconn.consume_input()
        # get_result() would block on a part not read yet: ask is_busy() before each one.
        while not pgconn.is_busy():
            found = pgconn.get_result()
            if found is None:  # the end of the command's answer
                break
            if result is None:
                result = found
        else:
            await _ready(loop, fd)
            continue
        break
    if result is None:
        raise _broken(pgconn, "no result")
    if result.status == pq.ExecStatus.FATAL_ERROR:
        if pgconn.status != pq.ConnStatus.OK:
            raise _broken(pgconn, "the connection was lost")
        raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
    return result


async def prepare(
    conn: AsyncConnection[Any], name: bytes, statement: str, param_types: Sequence[int]
) -> None:
    """Prepare `statement` (with $1, $2, ... placeholders) as `name` at the protocol level,
    as psycopg's own prepared statements are (poolers such as PgBouncer track those, not
    SQL PREPARE)."""
    pgconn = conn.pgconn
    if pgconn.status != pq.ConnStatus.OK:
        raise _broken(pgconn, "the connection is closed")
    pgconn.send_prepare(name, statement.encode(conn.info.encoding), param_types)
    await _one_result(conn)


async def run_prepared(
    conn: AsyncConnection[Any], name: bytes, params: Sequence[str], encoding: str | None = None
) -> list[tuple[str | None, ...]]:
    """Run the statement prepared as `name` with text parameters; its rows as text.

    A parameter must hold no NUL character (libpq takes C strings: it would end there);
    the caller refuses such input before it gets here. Text goes both ways in the
    connection's client encoding (`encoding`, when the caller knows it), as psycopg's own
    adaptation does."""
    pgconn = conn.pgconn
    if pgconn.status != pq.ConnStatus.OK:
        raise _broken(pgconn, "the connection is closed")
    if encoding is None:
        encoding = conn.info.encoding
    pgconn.send_query_prepared(name, [p.encode(encoding) for p in params])
    result = await _one_result(conn)
    if result.status != pq.ExecStatus.TUPLES_OK:
        raise psycopg.DatabaseError(f"unexpected result status {result.status!r}")
    columns = range(result.nfields)
    rows: list[tuple[str | None, ...]] = []
    for row in range(result.ntuples):
        rows.append(
            tuple(
                None if (value := result.get_value(row, col)) is None else value.decode(encoding)
                for col in columns
            )
        )
    return rows

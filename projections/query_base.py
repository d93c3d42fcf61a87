"""What every read query of the catalog read model stands on: one short read on a
pooled connection, `?` markers for either database, and the page tokens of list routes."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Self

from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg.rows import tuple_row

from icelog.domain.errors import BadRequestError

Rows = list[tuple[Any, ...]]


@dataclass(frozen=True)
class TabularRow:
    id: str
    metadata_location: str
    metadata: bytes
    version: int


def encode_token(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode()


def decode_token(token: str) -> str:
    try:
        decoded = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        raise BadRequestError(f"Invalid pageToken: {token!r}") from None
    if "\x00" in decoded:  # never in a key we issue; PostgreSQL text cannot hold it
        raise BadRequestError(f"Invalid pageToken: {token!r}")
    return decoded


class QueryBase:
    """One short read on a pooled connection per call."""

    def __init__(self, dialect: str, cursor: Callable[[], AbstractContextManager[Any]]) -> None:
        self.dialect = dialect
        self._cursor = cursor

    @classmethod
    def for_datastore(cls, datastore: SQLiteDatastore | PostgresDatastore) -> Self:
        if isinstance(datastore, PostgresDatastore):
            pg = datastore

            @contextmanager
            def pg_cursor() -> Iterator[Any]:
                with pg.get_connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
                    yield cur

            return cls("postgres", pg_cursor)
        lite = datastore

        @contextmanager
        def sqlite_cursor() -> Iterator[Any]:
            with lite.transaction(commit=False) as cur:
                yield cur

        return cls("sqlite", sqlite_cursor)

    def _q(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgres" else sql

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> Rows:
        with self._cursor() as cur:
            cur.execute(self._q(sql), params)
            return [tuple(r) for r in cur.fetchall()]

    def row(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        with self._cursor() as cur:
            cur.execute(self._q(sql), params)
            found = cur.fetchone()
            return tuple(found) if found is not None else None

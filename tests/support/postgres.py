"""Throwaway PostgreSQL databases on the machine's server (127.0.0.1:5432, user postgres)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

PG_HOST = os.environ.get("ICELOG_TEST_PGHOST", "127.0.0.1")
PG_PORT = int(os.environ.get("ICELOG_TEST_PGPORT", "5432"))
PG_USER = os.environ.get("ICELOG_TEST_PGUSER", "postgres")
PG_PASSWORD = os.environ.get("ICELOG_TEST_PGPASSWORD", "")
# PostgreSQL mode requires a storage-credentials key; tests and benchmarks use this one
# (a fixed test key, not a secret of any deployment).
TEST_SECRETS_KEY = "BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY="
# The PostgreSQL connections each catalog process a test starts may open
# (ICELOG_PG_MAX_CONNECTIONS; docs/operations.md, "Connection budget"): four for the write
# side, enough for the committer to keep its connection as in production, and one for
# loadTable. The server's 100 connections are shared by the whole test session and by
# whatever else runs on the machine; the default budget is 12 per process.
SERVER_CONNECTIONS = 5


def _url(dbname: str) -> str:
    auth = PG_USER if not PG_PASSWORD else f"{PG_USER}:{PG_PASSWORD}"
    return f"postgresql://{auth}@{PG_HOST}:{PG_PORT}/{dbname}"


def admin_url() -> str:
    """The server's `postgres` database (what the tests create and drop databases from)."""
    return _url("postgres")


def _admin() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(admin_url(), autocommit=True, connect_timeout=10)


def create_database() -> str:
    """Create ``icelog_test_<random>`` and return its URL."""
    name = f"icelog_test_{secrets.token_hex(6)}"
    with _admin() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return _url(name)


def drop_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with _admin() as conn:
        statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        conn.execute(statement.format(sql.Identifier(name)))


def backends(url: str) -> int:
    """The client backends connected to `url`'s database now."""
    with _admin() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (url.rsplit("/", 1)[1],)
        ).fetchone()
    return int(str(row[0])) if row else 0


@contextmanager
def temporary_database() -> Iterator[str]:
    url = create_database()
    try:
        yield url
    finally:
        drop_database(url)


@contextmanager
def temporary_role(connection_limit: int = -1) -> Iterator[str]:
    """A login role ``icelog_role_<random>`` (no superuser; `connection_limit` as CONNECTION
    LIMIT, -1: none), dropped afterwards."""
    name = f"icelog_role_{secrets.token_hex(6)}"
    with _admin() as conn:
        statement = sql.SQL("CREATE ROLE {} LOGIN CONNECTION LIMIT {}")
        conn.execute(statement.format(sql.Identifier(name), sql.Literal(connection_limit)))
    try:
        yield name
    finally:
        with _admin() as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def url_as(role: str, dbname: str, password: str = "", port: int = PG_PORT) -> str:
    """A URL of this server for another role, database, password or port."""
    auth = role if not password else f"{role}:{password}"
    return f"postgresql://{auth}@{PG_HOST}:{port}/{dbname}"

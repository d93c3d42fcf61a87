"""Whether the catalog's database can be used, and if not, why, in words a person can act on.

Every `icelog` command that touches the catalog asks here first. PostgreSQL: one direct
connection, with the parameters the catalog itself connects with; a failure is named by its
cause (connection refused, unknown host, no answer, database missing, authentication
failed, too many connections, server starting or stopping) rather than left to the pool,
which would retry for its whole timeout and end in a traceback saying only "unavailable".
libpq reports a failed connection as text (no SQLSTATE reaches the client), so the causes
are recognised by PostgreSQL's and libpq's own English messages; an unrecognised one is
passed on as it came. SQLite: the data directory and `catalog.db` are what they should be.

Messages name the database by its URL without the password; libpq's messages never
contain it.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

import psycopg

from icelog.api.settings import Settings

CONNECT_TIMEOUT_S = 10
# Whether the catalog's event table is in the database (on the connection's search path).
_EVENTS_TABLE_SQL = (
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
    "ON n.oid = c.relnamespace WHERE c.relname = 'icelog_events' "
    "AND n.nspname = current_schema())"
)


@dataclass(frozen=True)
class Cause:
    """Why a connection failed: a short name, and what to do about it."""

    name: str
    hint: str


# Recognised failures: (text in libpq's message, lower case) → cause. First match wins.
_CAUSES: tuple[tuple[tuple[str, ...], Cause], ...] = (
    (
        ("connection refused",),
        Cause(
            "connection refused",
            "nothing accepts connections at that host and port: is PostgreSQL running, and "
            "are the host and port in ICELOG_DATABASE_URL right?",
        ),
    ),
    (
        ("failed to resolve host", "could not translate host name"),
        Cause("unknown host", "check the host name in ICELOG_DATABASE_URL"),
    ),
    (
        ("timeout expired", "timed out"),
        Cause(
            "no answer",
            f"the server did not answer within {CONNECT_TIMEOUT_S} s: check the host, the "
            "port and any firewall in between",
        ),
    ),
    (
        ("does not exist",),  # 3D000 for a database; a missing role is matched before this
        Cause(
            "database missing",
            "create it (CREATE DATABASE) or correct the database name in ICELOG_DATABASE_URL",
        ),
    ),
    (
        (
            "authentication failed",  # password, ident, peer, GSSAPI, ...
            "no password supplied",
            "no pg_hba.conf entry",
            "is not permitted to log in",
        ),
        Cause(
            "authentication failed",
            "check the user and password in ICELOG_DATABASE_URL, and the server's pg_hba.conf",
        ),
    ),
    (
        ("too many connections", "too many clients", "remaining connection slots"),
        Cause(
            "too many connections",
            "the server's max_connections, or the role's or database's CONNECTION LIMIT, is "
            "used up: retry when other clients disconnect, lower ICELOG_PG_POOL_SIZE / "
            "ICELOG_PG_MAX_OVERFLOW of the other icelog processes, or raise the limit",
        ),
    ),
    (
        ("starting up", "shutting down", "in recovery mode", "not yet accepting"),
        Cause("server not ready", "the server is starting or stopping: retry shortly"),
    ),
)
_ROLE_MISSING = Cause(
    "authentication failed",
    "the role (user) in ICELOG_DATABASE_URL does not exist on that server: correct the "
    "user, or create the role (CREATE ROLE ... LOGIN)",
)
_UNKNOWN = Cause("connection failed", "check ICELOG_DATABASE_URL")


def reason_of(exc: psycopg.OperationalError) -> str:
    """libpq's own words, without the "connection to server at ... failed:" preamble that
    the message names anyway."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    first = lines[0] if lines else type(exc).__name__
    for marker in ("FATAL:", "failed:"):
        if marker in first:
            first = first.rsplit(marker, 1)[1].strip()
            break
    return first.removeprefix("connection failed:").strip()


def cause_of(exc: psycopg.OperationalError) -> Cause:
    text = str(exc).lower()
    if "role " in text and "does not exist" in text:
        return _ROLE_MISSING
    for markers, cause in _CAUSES:
        if any(marker in text for marker in markers):
            return cause
    return _UNKNOWN


def describe_connection_error(settings: Settings, exc: psycopg.OperationalError) -> str:
    """`cannot connect to <url>: <cause> (<libpq's reason>); <what to do>`."""
    cause, reason = cause_of(exc), reason_of(exc)
    said = cause.name if reason.lower() == cause.name else f"{cause.name} ({reason})"
    return f"cannot connect to {settings.database_url_redacted}: {said}; {cause.hint}"


@dataclass(frozen=True)
class Probe:
    """What a command found: `problem` (why the database cannot be used) or whether the
    catalog is there."""

    problem: str | None = None
    catalog_found: bool = False


def probe(settings: Settings, *, creates: bool) -> Probe:
    """Whether the configured database can be used, and holds a catalog. `creates`: the
    command may create the catalog (`serve`, `migrate`), so a missing SQLite file is fine
    where its directory can be made."""
    if settings.database_url is None:
        return _probe_sqlite(settings, creates=creates)
    env = settings.eventsourcing_env()
    try:
        with psycopg.connect(
            dbname=env["POSTGRES_DBNAME"],
            host=env["POSTGRES_HOST"],
            port=env["POSTGRES_PORT"],
            user=env["POSTGRES_USER"],
            password=env["POSTGRES_PASSWORD"],
            connect_timeout=CONNECT_TIMEOUT_S,
        ) as conn:
            found = conn.execute(_EVENTS_TABLE_SQL).fetchone()
    except psycopg.OperationalError as exc:
        return Probe(problem=describe_connection_error(settings, exc))
    return Probe(catalog_found=bool(found and found[0]))


def _probe_sqlite(settings: Settings, *, creates: bool) -> Probe:
    data_dir, path = settings.data_dir, settings.sqlite_path
    try:
        if data_dir.exists() and not data_dir.is_dir():
            return Probe(problem=f"ICELOG_DATA_DIR {data_dir} is not a directory")
        if not path.exists():
            if creates:
                return Probe(problem=_not_creatable(data_dir))
            return Probe(catalog_found=False)
        if not path.is_file():
            return Probe(problem=f"{path} is not a file (the catalog's SQLite database)")
        problem = _sqlite_unreadable(path)
    except PermissionError as exc:  # a directory on the way that we may not enter
        return Probe(problem=f"cannot read {exc.filename or data_dir}: permission denied")
    return Probe(problem=problem, catalog_found=problem is None)


def _not_creatable(data_dir: Path) -> str | None:
    """Why `data_dir` (or the catalog in it) cannot be created, if it cannot."""
    existing = data_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"cannot create ICELOG_DATA_DIR {data_dir}: {existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot create the catalog in {data_dir}: {existing} is not writable"
    return None


def _sqlite_unreadable(path: Path) -> str | None:
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:  # "unable to open database file"
        return f"cannot open {path}: {exc}"
    try:
        conn.execute("PRAGMA schema_version").fetchone()
    except sqlite3.DatabaseError as exc:  # "file is not a database"
        return f"cannot read {path} as the catalog's SQLite database: {exc}"
    finally:
        conn.close()
    return None


def database_refusal(settings: Settings, *, creates: bool) -> int | None:
    """The `icelog` command's exit status when it cannot go on with the configured database
    (after saying why on stderr): 1 when it cannot be used (unreachable, missing, refused
    us), 2 when it holds no catalog and the command would not create one."""
    found = probe(settings, creates=creates)
    if found.problem is not None:
        print(f"icelog: {found.problem}", file=sys.stderr)
        return 1
    if not creates and not found.catalog_found:
        where = settings.database_url_redacted or str(settings.sqlite_path)
        print(
            f"icelog: no catalog at {where} (set ICELOG_DATA_DIR or ICELOG_DATABASE_URL)",
            file=sys.stderr,
        )
        return 2
    return None

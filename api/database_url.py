"""The catalog database's URLs (ICELOG_DATABASE_URL, ICELOG_DATABASE_READ_URL): their
checks, their redaction for messages, and the eventsourcing library's settings they give.

A mistake is said as a configuration error and never by echoing the URL: an unencoded '/'
in the password makes part of it the "port" or the path.
"""

from __future__ import annotations

import os
from typing import Final
from urllib.parse import unquote, urlparse

PREFIX: Final = "ICELOG_"


class SettingsError(ValueError):
    """A setting is missing or malformed; the server refuses to start."""


def database_url(value: str) -> str | None:
    """ICELOG_DATABASE_URL: a postgresql:// URL naming a database, or unset (SQLite)."""
    url = value.strip() or None
    if url is None:
        return None
    parsed = urlparse(url)
    if parsed.scheme not in ("postgresql", "postgres"):
        raise SettingsError(
            f"{PREFIX}DATABASE_URL must be a postgresql:// URL (got scheme "
            f"{parsed.scheme!r}); leave it unset for the embedded SQLite store"
        )
    if not parsed.path.strip("/"):
        raise SettingsError(f"{PREFIX}DATABASE_URL must name a database")
    try:
        # libpq's multi-host form (`h1:5432,h2:5432`, for failover) is libpq's to parse.
        if "," not in parsed.netloc.rpartition("@")[2]:
            parsed.port  # noqa: B018 - parsing it is the check
    except ValueError:
        raise SettingsError(
            f"{PREFIX}DATABASE_URL: its port is not a number from 0 to 65535 (a '/', '?', "
            "'#' or '@' in the user or password must be percent-encoded)"
        ) from None
    return url


def read_url(value: str, *, primary: str | None) -> str | None:
    """ICELOG_DATABASE_READ_URL: a PostgreSQL replica for the read models (optional)."""
    url = value.strip() or None
    if url is None:
        return None
    if primary is None:
        raise SettingsError(
            f"{PREFIX}DATABASE_READ_URL needs {PREFIX}DATABASE_URL (the primary): a read "
            "replica only exists for PostgreSQL"
        )
    parsed = urlparse(url)
    if parsed.scheme not in ("postgresql", "postgres") or not parsed.path.strip("/"):
        raise SettingsError(
            f"{PREFIX}DATABASE_READ_URL must be a postgresql:// URL naming a database "
            f"(got scheme {parsed.scheme!r})"
        )
    return url


def redact_url(url: str) -> str:
    """A database URL without its password, in the user part or as a `password` query
    parameter (libpq takes both)."""
    parsed = urlparse(url)
    netloc = parsed.netloc
    if parsed.password is not None:
        # The hosts part as written (one host, an IPv6 one, or libpq's several), so that
        # nothing is parsed that could fail or move a piece of the password elsewhere.
        userinfo, _, hosts = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{hosts}"
    query = "&".join(
        f"{name}=***" if unquote(name).strip().lower() == "password" else part
        for part in parsed.query.split("&")
        if part
        for name in [part.partition("=")[0]]
    )
    return parsed._replace(netloc=netloc, query=query).geturl()


def postgres_env(url: str) -> dict[str, str]:
    """The eventsourcing library's connection settings for a PostgreSQL URL."""
    parsed = urlparse(url)
    if not parsed.path.strip("/"):
        raise SettingsError(f"{PREFIX}DATABASE_URL must name a database")
    return {
        "POSTGRES_DBNAME": unquote(parsed.path.strip("/")),
        "POSTGRES_HOST": parsed.hostname or "127.0.0.1",
        "POSTGRES_PORT": str(parsed.port or 5432),
        "POSTGRES_USER": unquote(parsed.username or os.environ.get("PGUSER", "postgres")),
        "POSTGRES_PASSWORD": unquote(parsed.password or ""),
    }

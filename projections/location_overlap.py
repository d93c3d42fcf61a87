"""Which stored locations overlap a location: the SQL that finds them through an index.

Two locations overlap when they are equal or one lies below the other at a '/' boundary.
Written as `substr(?, 1, length(location) + 1) = location || '/'`, the test reads every
row of the warehouse: each create cost more than the one before (6.5 ms of PostgreSQL CPU
per create in an empty warehouse, 15.7 ms at 3,600 tables). Here both directions are index
lookups on (warehouse_id, location):

- the locations that hold `at` (and `at` itself) are among its '/'-prefixes: an equality
  lookup for each (`= ANY` / `IN`);
- the locations below `at` sort between `at + '/'` and `at + '0'` ('0' follows '/') in
  byte order: a range. SQLite compares TEXT bytewise already; PostgreSQL's database
  collation may not, so there the range is taken in the "C" collation, which a migration
  step (15) indexes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

# Larger than any real location's depth; a deeper one (hostile input) is still answered
# correctly, by the direct test on the rows of the warehouse.
MAX_PREFIXES = 256


def spellings(at: str) -> list[str]:
    """`at` as written and, when it holds percent escapes, as decoded: `.../t%2D1` names
    `.../t-1` to a reader that decodes (Hadoop S3A, some S3-compatible stores), so a new
    location overlaps a stored one under either reading, as containment is checked both
    ways (domain/locations.py). Stored locations are compared as written."""
    decoded = unquote(at)
    return [at] if decoded == at else [at, decoded]


def holders(at: str) -> list[str]:
    """`at` and every '/'-prefix of it: the locations that would contain or equal it."""
    return [at[:i] for i, c in enumerate(at) if c == "/" and i > 0] + [at]


def clause(dialect: str, at: str, *, below: bool = True) -> tuple[str, list[Any]]:
    """A WHERE fragment (with `?` markers) true for a row whose `location` equals or holds
    `at` — and, with `below`, lies below it — and its parameters."""
    found = holders(at)
    if len(found) > MAX_PREFIXES:
        sql = "(location = ? OR substr(?, 1, length(location) + 1) = location || '/'"
        params: list[Any] = [at, at]
        if below:
            sql += " OR substr(location, 1, length(?) + 1) = ? || '/'"
            params += [at, at]
        return sql + ")", params
    if dialect == "postgres":
        sql, params = "(location = ANY(?)", [found]
        if below:
            sql += ' OR (location COLLATE "C" >= ? AND location COLLATE "C" < ?)'
            params += [at + "/", at + "0"]
    else:
        sql, params = f"(location IN ({', '.join('?' * len(found))})", list(found)
        if below:
            sql += " OR (location >= ? AND location < ?)"
            params += [at + "/", at + "0"]
    return sql + ")", params


def indexes(dialect: str, prefix: str = "") -> list[str]:
    """The "C"-collation indexes the PostgreSQL range needs (SQLite's own indexes serve)."""
    if dialect != "postgres":
        return []
    return [
        f"CREATE INDEX IF NOT EXISTS {prefix}{table}_by_location_bytes "
        f'ON {prefix}{table} (warehouse_id, (location COLLATE "C"))'
        for table in ("icelog_tabulars", "icelog_deleted_tabulars")
    ]

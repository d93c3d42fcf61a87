"""The indexed overlap test (projections/location_overlap.py) finds exactly the locations the
definition does — equal, holding, or below at a '/' boundary — on SQLite and on PostgreSQL
with a linguistic collation (where byte order and the database's order differ), and it reads
through the index rather than every row of the warehouse."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icelog.projections import location_overlap
from tests.support import postgres

# Segments that sort around '/' and '0' and that collations treat specially.
SEGMENT = st.text(alphabet="ab/-_.0Aé %", min_size=1, max_size=4).filter(
    lambda s: not s.startswith("/") and not s.endswith("/") and "//" not in s
)
LOCATION = st.lists(SEGMENT, min_size=1, max_size=4).map(lambda parts: "s3://b/" + "/".join(parts))


def overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


@pytest.fixture(scope="module")
def lite() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE icelog_tabulars (warehouse_id TEXT, location TEXT)")
    db.execute("CREATE INDEX by_location ON icelog_tabulars (warehouse_id, location)")
    yield db
    db.close()


@pytest.fixture(scope="module")
def pg() -> Iterator[psycopg.Connection[Any]]:
    url = postgres.create_database()
    try:
        with psycopg.connect(url, autocommit=True) as db:
            # A collation whose order is not byte order: what a production database may use.
            db.execute(
                "CREATE TABLE icelog_tabulars "
                '(warehouse_id TEXT, location TEXT COLLATE "en-US-x-icu")'
            )
            db.execute("CREATE INDEX by_location ON icelog_tabulars (warehouse_id, location)")
            for statement in location_overlap.indexes("postgres"):
                if "deleted" not in statement:
                    db.execute(statement)
            yield db
    finally:
        postgres.drop_database(url)


def _found(db: Any, dialect: str, stored: list[str], at: str, below: bool) -> set[str]:
    db.execute("DELETE FROM icelog_tabulars")
    marker = "%s" if dialect == "postgres" else "?"
    for location in stored:
        db.execute(f"INSERT INTO icelog_tabulars VALUES ('w', {marker})", (location,))
    sql, params = location_overlap.clause(dialect, at, below=below)
    query = f"SELECT location FROM icelog_tabulars WHERE warehouse_id = ? AND {sql}"
    rows = db.execute(query.replace("?", marker), ["w", *params]).fetchall()
    return {r[0] for r in rows}


@settings(max_examples=150, deadline=None)
@given(stored=st.lists(LOCATION, max_size=8, unique=True), at=LOCATION, below=st.booleans())
def test_sqlite_finds_what_the_definition_says(
    lite: sqlite3.Connection, stored: list[str], at: str, below: bool
) -> None:
    want = {s for s in stored if overlaps(s, at) and (below or not s.startswith(at + "/"))}
    assert _found(lite, "sqlite", stored, at, below) == want


@settings(max_examples=150, deadline=None)
@given(stored=st.lists(LOCATION, max_size=8, unique=True), at=LOCATION, below=st.booleans())
def test_postgres_finds_what_the_definition_says_whatever_the_collation(
    pg: psycopg.Connection[Any], stored: list[str], at: str, below: bool
) -> None:
    want = {s for s in stored if overlaps(s, at) and (below or not s.startswith(at + "/"))}
    assert _found(pg, "postgres", stored, at, below) == want


def test_a_location_deeper_than_the_prefix_bound_is_still_answered(
    lite: sqlite3.Connection,
) -> None:
    deep = "s3://b/" + "/".join(["x"] * (location_overlap.MAX_PREFIXES + 5))
    stored = ["s3://b/x/x", deep + "/below", "s3://b/y"]
    assert _found(lite, "sqlite", stored, deep, True) == {"s3://b/x/x", deep + "/below"}


def test_the_lookups_use_the_indexes(lite: sqlite3.Connection, pg: psycopg.Connection[Any]) -> None:
    at = "s3://b/ns/t-1"
    sql, params = location_overlap.clause("sqlite", at)
    plan = lite.execute(
        f"EXPLAIN QUERY PLAN SELECT 1 FROM icelog_tabulars WHERE warehouse_id = ? AND {sql}",
        ["w", *params],
    ).fetchall()
    assert not any("SCAN" in str(row[-1]) for row in plan), plan
    pg.execute("DELETE FROM icelog_tabulars")
    pg.execute(
        "INSERT INTO icelog_tabulars "
        "SELECT 'w', 's3://b/ns/t-' || g FROM generate_series(1, 20000) g"
    )
    pg.execute("ANALYZE icelog_tabulars")
    sql, params = location_overlap.clause("postgres", at)
    plan = pg.execute(
        "EXPLAIN SELECT 1 FROM icelog_tabulars WHERE warehouse_id = %s AND "
        + sql.replace("?", "%s"),
        ["w", *params],
    ).fetchall()
    text = "\n".join(r[0] for r in plan)
    assert "Seq Scan" not in text, text


@pytest.mark.attack
def test_a_percent_encoded_location_is_looked_up_decoded_too() -> None:
    """`t%2D1` is `t-1` to a reader that decodes: both spellings are looked up."""
    assert location_overlap.spellings("s3://b/ns/t-1") == ["s3://b/ns/t-1"]
    assert location_overlap.spellings("s3://b/ns/t%2D1") == ["s3://b/ns/t%2D1", "s3://b/ns/t-1"]
    assert location_overlap.spellings("s3://b/%6Es/t") == ["s3://b/%6Es/t", "s3://b/ns/t"]

"""The commit append's parameters, packed in PostgreSQL's binary format (projections/
pg_binary.py), reach PostgreSQL as the values they were made from."""

from __future__ import annotations

from collections.abc import Iterator
from uuid import UUID, uuid4

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icelog.projections import pg_binary
from tests.support import postgres

pytestmark = pytest.mark.postgres

# Text PostgreSQL can hold: any character but NUL.
TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]))
INT8 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.fixture(scope="module")
def conn() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with postgres.temporary_database() as url, psycopg.connect(url, autocommit=True) as c:
        c.execute(
            "CREATE TYPE ev AS (originator_id uuid, originator_version bigint, "
            "topic text, state bytea)"
        )
        c.execute(
            "CREATE TYPE ev_text AS (originator_id text, originator_version bigint, "
            "topic text, state bytea)"
        )
        pg_binary.register(c.adapters)
        yield c


def _oids(conn: psycopg.Connection[tuple[object, ...]], name: str) -> tuple[int, int]:
    row = conn.execute("SELECT oid, typarray FROM pg_type WHERE typname = %s", (name,)).fetchone()
    assert row is not None
    return int(str(row[0])), int(str(row[1]))


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(TEXT, max_size=6),
    blobs=st.lists(st.binary(), max_size=6),
    numbers=st.lists(INT8, max_size=6),
)
def test_arrays_arrive_as_they_were(
    conn: psycopg.Connection[tuple[object, ...]],
    texts: list[str],
    blobs: list[bytes],
    numbers: list[int],
) -> None:
    row = conn.execute(
        "SELECT %b::text[], %b::bytea[], %b::bigint[]",
        (pg_binary.text_array(texts), pg_binary.bytea_array(blobs), pg_binary.int8_array(numbers)),
    ).fetchone()
    assert row == (texts, blobs, numbers)


@settings(max_examples=40, deadline=None)
@given(
    events=st.lists(st.tuples(st.uuids(), INT8, TEXT, st.binary()), max_size=5),
    as_text=st.booleans(),
)
def test_stored_events_arrive_as_they_were(
    conn: psycopg.Connection[tuple[object, ...]],
    events: list[tuple[UUID, int, str, bytes]],
    as_text: bool,
) -> None:
    name = "ev_text" if as_text else "ev"
    type_oid, array_oid = _oids(conn, name)
    encoded = pg_binary.stored_events_array(
        events, type_oid=type_oid, array_oid=array_oid, id_is_uuid=not as_text
    )
    rows = conn.execute(
        "SELECT e.originator_id::text, e.originator_version, e.topic, e.state FROM unnest(%b) AS e",
        (encoded,),
    ).fetchall()
    assert rows == [(str(i), v, t, s) for i, v, t, s in events]


def test_a_text_originator_id_is_accepted_for_a_uuid_store(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    type_oid, array_oid = _oids(conn, "ev")
    ident = uuid4()
    encoded = pg_binary.stored_events_array(
        [(str(ident), 1, "t", b"s")], type_oid=type_oid, array_oid=array_oid, id_is_uuid=True
    )
    row = conn.execute("SELECT (unnest(%b)).originator_id", (encoded,)).fetchone()
    assert row == (ident,)


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.none() | TEXT, max_size=6),
    numbers=st.lists(st.none() | INT8, max_size=6),
    small=st.lists(st.integers(min_value=-(2**31), max_value=2**31 - 1), max_size=6),
)
def test_columns_with_nulls_arrive_as_they_were(
    conn: psycopg.Connection[tuple[object, ...]],
    texts: list[str | None],
    numbers: list[int | None],
    small: list[int],
) -> None:
    """The followers' rows (SqlStore._insert_rows): NULLs among the values, int4 ids."""
    row = conn.execute(
        "SELECT %b::text[], %b::bigint[], %b::int[]",
        (
            pg_binary.column_array("text", texts, "utf-8"),
            pg_binary.column_array("int8", numbers, "utf-8"),
            pg_binary.int4_array(small),
        ),
    ).fetchone()
    assert row is not None
    assert list(row) == [texts, numbers, small]

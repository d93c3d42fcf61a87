"""The one-round-trip append takes exactly the rows the fold gives (projections/fold.py):
which batches it takes, how it groups them, and the function's declared shape."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from icelog.domain.table import Table
from icelog.projections import append_rows
from icelog.projections.fold import rows_of
from icelog.projections.row_ops import Insert, NoReads


def _created(actor: str = "oidc~alice") -> Table:
    tid = uuid4()
    location = f"s3://bucket/wh/db/t-{tid.hex[:8]}"
    return Table.create(
        table_id=tid,
        warehouse_id=uuid4(),
        namespace_id=uuid4(),
        namespace=["db"],
        name=f"t{tid.hex[:8]}",
        location=location,
        metadata_location=f"{location}/metadata/00000-{tid}.metadata.json",
        metadata={"format-version": 2, "table-uuid": str(tid), "location": location},
        updates=[],
        actor=actor,
        request_id="test",
    )


def _commit(table: Table, n: int = 1) -> str:
    location = f"{table.location}/metadata/0000{n}-x.metadata.json"
    table.commit(
        requirements=[],
        updates=[{"action": "set-properties", "updates": {"k": str(n)}}],
        metadata_location=location,
        applied_at_ms=1,
        actor="oidc~alice",
        request_id="test",
    )
    return location


def test_creates_are_planned_with_their_ownership_and_guards() -> None:
    tables = [_created(), _created()]
    events: list[Any] = [e for t in tables for e in t.collect_events()]
    planned = append_rows.plan(events, {})
    assert planned is not None
    new = planned.rows[append_rows.ARRAY_WRITES.index(append_rows.NEW_TABULARS)]
    grants = planned.rows[append_rows.ARRAY_WRITES.index(append_rows.NEW_GRANTS)]
    assert [row[0] for row in new] == [str(t.id) for t in tables]
    assert len(grants) == 2 and not planned.updates
    # The rows are the fold's, column for column.
    [insert] = [op for op in rows_of(events[0], {}, NoReads()) if isinstance(op, Insert)]
    assert new[0] == tuple(insert.row.values())
    assert tuple(insert.row) == append_rows.NEW_TABULARS.columns


def test_commits_with_documents_are_planned_and_a_later_one_supersedes() -> None:
    table = _created()
    table.collect_events()
    first, second = _commit(table, 1), _commit(table, 2)
    events: list[Any] = list(table.collect_events())
    planned = append_rows.plan(events, {first: b"{}", second: b'{"v": 2}'})
    assert planned is not None
    assert list(planned.updates) == [str(table.id)]
    assert planned.updates[str(table.id)][1:3] == (second, b'{"v": 2}')


def test_what_needs_a_read_or_breaks_the_order_takes_the_general_path() -> None:
    table = _created()
    created = list(table.collect_events())
    location = _commit(table)
    committed = list(table.collect_events())
    assert append_rows.plan(committed, {}) is None, "no document handed in: the fold reads"
    together = append_rows.plan([*created, *committed], {location: b"{}"})
    assert together is None, "created and committed in one batch"
    table.drop(purge_requested=False, actor="oidc~alice", request_id="test")
    assert append_rows.plan(list(table.collect_events()), {}) is None, "a drop"


def test_the_function_declares_each_column_with_its_type() -> None:
    declared = append_rows.parameters()
    n = append_rows.ARRAY_WRITES.index(append_rows.NEW_TABULARS)
    assert f"a{n}_metadata bytea[]" in declared and f"a{n}_version bigint[]" in declared
    assert declared.count("[]") == append_rows.parameter_count()
    assert len(append_rows.Planned().params("UTF8")) == append_rows.parameter_count() - 1

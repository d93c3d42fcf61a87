"""A namespace's history in the console (api/console/history.py describe_events) says what
came and went from the children's own events: namespaces no longer record their children
(ADR 0018), and the older child-added / child-removed events add no second line."""

from __future__ import annotations

from typing import Any

from icelog.api.console.history import describe_events


def _event(type_: str, subject: str, data: dict[str, Any], aggregate: str = "t1") -> dict[str, Any]:
    return {
        "type": f"io.icelog.{type_}.v1",
        "subject": subject,
        "aggregate-id": aggregate,
        "data": data,
    }


def _lines(events: list[dict[str, Any]]) -> list[list[str]]:
    return [[f"{c.sign} {c.text}" for c in e["changes"]] for e in describe_events(events)]


def test_children_come_and_go_by_their_own_events() -> None:
    events = [
        _event("namespace.created", "ops", {"properties": {"tier": "gold"}}, "n1"),
        _event("table.created", "ops.jobs", {}),
        _event(
            "table.renamed",
            "ops.runs",
            {"from-namespace": ["ops"], "from-name": "jobs", "namespace": ["ops"], "name": "runs"},
        ),
        _event("view.soft-dropped", "ops.v", {}, "v1"),
        _event("table.dropped", "ops.runs", {}),
        _event("namespace.dropped", "ops.daily", {}, "n2"),
    ]
    assert _lines(events) == [
        ["+ namespace ops", "+ property tier = gold"],
        ["+ table ops.jobs"],
        ["~ table ops.jobs → ops.runs"],
        ["- view ops.v"],
        ["- table ops.runs"],
        ["- namespace ops.daily"],
    ]


def test_an_older_child_added_event_is_titled_without_a_second_line() -> None:
    events = [
        _event("table.created", "ops.jobs", {}),
        _event("namespace.child-added", "ops", {"child-kind": "table", "child-id": "t1"}, "n1"),
    ]
    described = describe_events(events)
    assert [c.text for c in described[0]["changes"]] == ["table ops.jobs"]
    assert described[1]["title"] == "namespace ops: table added"
    assert described[1]["changes"] == []

"""A table's or view's metadata document, folded from its events alone.

The events carry the first document and then, per commit, the submitted updates and when
they were applied; re-applying them reproduces every document the catalog wrote. Comparing
the fold with the current metadata file shows whether the file is what the log says.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import singledispatch, singledispatchmethod
from typing import Any

from icelog.domain.metadata_rules import applying
from icelog.domain.table import Table
from icelog.domain.table_metadata import apply_updates
from icelog.domain.tabular import (
    Changed,
    Dropped,
    Moved,
    Placed,
    SoftDropped,
    TabularEvent,
)
from icelog.domain.view import View
from icelog.domain.view_metadata import apply_view_updates


@dataclass(frozen=True)
class Folded:
    kind: str  # "table" | "view"
    warehouse_id: str
    name: str  # dotted identifier, as of the last event
    metadata_location: str
    document: dict[str, Any]
    live: bool  # False once dropped (soft-deleted counts as not live)


@singledispatch
def replay_commit(event: Changed, previous: dict[str, Any]) -> dict[str, Any]:
    """The document a commit wrote: its updates re-applied to the previous document, at
    the time and under the metadata rules they were applied with."""
    raise TypeError(f"not a table commit or view replace: {type(event).__name__}")


@replay_commit.register
def _(event: Table.Committed, previous: dict[str, Any]) -> dict[str, Any]:
    with applying(event.rules):
        return apply_updates(
            previous,
            event.updates,
            now_ms=event.applied_at_ms,
            previous_location=event.previous_metadata_location,
        )


@replay_commit.register
def _(event: View.Replaced, previous: dict[str, Any]) -> dict[str, Any]:
    with applying(event.rules):
        return apply_view_updates(previous, event.updates, now_ms=event.applied_at_ms)


class _Fold:
    """What the events of one table or view say so far."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self.warehouse: str | None = None
        self.name: str | None = None
        self.location: str | None = None
        self.document: dict[str, Any] = {}
        self.live = False

    @singledispatchmethod
    def step(self, event: object) -> None:
        """Events that change none of what is folded."""

    @step.register
    def _(self, event: Placed) -> None:
        self.kind = "view" if isinstance(event, View.Event) else "table"
        self.warehouse = str(event.warehouse_id)
        self.name = ".".join([*event.namespace, event.name])
        self.location, self.document, self.live = event.metadata_location, event.metadata, True

    @step.register
    def _(self, event: Changed) -> None:
        self.document = replay_commit(event, self.document)
        self.location = event.metadata_location

    @step.register
    def _(self, event: Moved) -> None:  # renamed or undropped
        self.name = ".".join([*event.namespace, event.name])
        self.live = True

    @step.register(Dropped)
    @step.register(SoftDropped)
    def _(self, event: TabularEvent) -> None:
        self.live = False


def fold(events: Iterable[Any]) -> Folded | None:
    state = _Fold()
    for event in events:
        state.step(event)
    if state.kind is None or state.warehouse is None or state.name is None:
        return None
    if state.location is None:
        return None
    return Folded(
        state.kind, state.warehouse, state.name, state.location, state.document, state.live
    )

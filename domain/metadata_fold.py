"""A table's or view's metadata document, folded from its events alone.

The events carry the first document and then, per commit, the submitted updates and when
they were applied; re-applying them reproduces every document the catalog wrote. Comparing
the fold with the current metadata file shows whether the file is what the log says.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from icelog.domain.metadata_rules import applying
from icelog.domain.table import Table
from icelog.domain.table_metadata import apply_updates
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


def replay_commit(
    event: Table.Committed | View.Replaced, previous: dict[str, Any]
) -> dict[str, Any]:
    """The document a commit wrote: its updates re-applied to the previous document, at
    the time and under the metadata rules they were applied with."""
    with applying(event.rules):
        if isinstance(event, View.Replaced):
            return apply_view_updates(previous, event.updates, now_ms=event.applied_at_ms)
        return apply_updates(
            previous,
            event.updates,
            now_ms=event.applied_at_ms,
            previous_location=event.previous_metadata_location,
        )


def fold(events: Iterable[Any]) -> Folded | None:
    kind = warehouse = name = location = None
    document: dict[str, Any] = {}
    live = False
    for event in events:
        if isinstance(event, (Table.Created, Table.Registered, View.Created, View.Registered)):
            kind = "view" if isinstance(event, View.Event) else "table"
            warehouse = str(event.warehouse_id)
            name = ".".join([*event.namespace, event.name])
            location, document, live = event.metadata_location, event.metadata, True
        elif isinstance(event, (Table.Committed, View.Replaced)):
            document = replay_commit(event, document)
            location = event.metadata_location
        elif isinstance(event, (Table.Renamed, View.Renamed, Table.Undropped, View.Undropped)):
            name = ".".join([*event.namespace, event.name])
            live = True
        elif isinstance(
            event,
            (Table.Dropped, View.Dropped, Table.SoftDropped, View.SoftDropped),
        ):
            live = False
    if kind is None or warehouse is None or name is None or location is None:
        return None
    return Folded(kind, warehouse, name, location, document, live)

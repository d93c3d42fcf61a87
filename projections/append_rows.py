"""The read-model rows of a batch the one-statement appends can write (recorders.py).

The inline projection (catalog_view.py) applies events one at a time, each statement a
round trip inside the append's locked transaction. Most appends are made of a few kinds
of events whose rows are known in advance: commits that move a tabular to a document the
command handed in, and creations of tables and views. For such a batch this module
computes every row up front, so that one server-side function call can write the events
and the rows together; any other batch is None and takes the general path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import orjson

from icelog.domain.claims import NameClaim
from icelog.domain.identifiers import NamespaceName
from icelog.domain.locations import normalize_location
from icelog.domain.ownership import owned_by_creation
from icelog.domain.table import Table
from icelog.domain.view import View
from icelog.projections import location_overlap
from icelog.projections.catalog_view import CatalogView
from icelog.projections.schema import grant_row_id

# A commit's row: (metadata location, document, version, time), keyed by tabular id.
CommitRow = tuple[str, bytes, int, str]

# Events that change no read-model row (CatalogView.apply_one has nothing for them):
# names claimed or released.
_NO_ROW = (NameClaim.Event,)
_CREATED = (Table.Created, Table.Registered, View.Created, View.Registered)


@dataclass(frozen=True)
class NewTabular:
    """The row a table's or view's creation inserts, and the locations that would overlap
    it: `holders` (its '/'-prefixes and itself) for the equality lookups; the range below
    it is derived from `location` by the function."""

    id: str
    warehouse_id: str
    ns_key: str
    name: str
    kind: str
    location: str
    metadata_location: str
    document: bytes
    version: int
    stamp: str
    holders: list[str]


@dataclass
class AppendRows:
    commits: dict[str, CommitRow] = field(default_factory=dict)
    creates: list[NewTabular] = field(default_factory=list)
    # (row id, object kind, object id, owner, time): ownership taken by a creation's actor
    grants: list[tuple[str, str, str, str, str]] = field(default_factory=list)


def append_rows(events: Sequence[object] | None, hints: Mapping[str, bytes]) -> AppendRows | None:
    """The rows `events` write, or None when one of them needs the general path."""
    if not events:
        return None
    rows = AppendRows()
    for event in events:
        if isinstance(event, _NO_ROW):
            continue
        if isinstance(event, _CREATED):
            created = _new_tabular(event, hints)
            if created is None:
                return None
            rows.creates.append(created)
            owned = owned_by_creation(event)
            if owned is not None:
                actor = str(event.actor)
                row_id = grant_row_id(owned.id, "ownership", "user", actor)
                rows.grants.append((row_id, owned.kind, owned.id, actor, created.stamp))
            continue
        found = CatalogView.plain_commit(event, hints)
        if found is None:
            return None
        rows.commits[found[0]] = found[1]  # a later commit of the same tabular supersedes
    if rows.commits and any(created.id in rows.commits for created in rows.creates):
        return None  # a tabular created and committed in one batch: keep the event order
    return rows


def _new_tabular(
    event: Table.Created | Table.Registered | View.Created | View.Registered,
    hints: Mapping[str, bytes],
) -> NewTabular | None:
    location = normalize_location(event.location)
    holders = location_overlap.holders(location)
    if len(holders) > location_overlap.MAX_PREFIXES:
        return None  # a hostile depth: the general path's direct test answers it
    stamp = event.timestamp.isoformat()
    return NewTabular(
        id=str(event.originator_id),
        warehouse_id=str(event.warehouse_id),
        ns_key=NamespaceName(tuple(event.namespace)).key,
        name=event.name,
        kind="view" if isinstance(event, View.Event) else "table",
        location=location,
        metadata_location=event.metadata_location,
        document=hints.get(event.metadata_location) or orjson.dumps(event.metadata),
        version=event.originator_version,
        stamp=stamp,
        holders=holders,
    )

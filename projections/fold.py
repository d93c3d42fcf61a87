"""The catalog read model's fold: every row operation an event makes, in order.

One function decides the rows (catalog_rows.py for the catalog's objects, access_rows.py
for users, roles and grants); this adds what any event may write besides its own rows.
"""

from __future__ import annotations

from icelog.domain.ownership import grants_ended_by, owned_by_creation
from icelog.projections import access_rows
from icelog.projections.catalog_rows import Hints, event_rows
from icelog.projections.row_ops import Op, Reads


def rows_of(event: object, hints: Hints, reads: Reads) -> list[Op]:
    """The event's own rows, then the grants it ends and the ownership its creation
    gives."""
    ops = event_rows(event, hints, reads)
    ended = grants_ended_by(event)
    if ended is not None:
        # In the same transaction as the object's (or principal's) end: a name never
        # carries the old object's rights (docs/auth.md).
        ops = [*ops, *access_rows.end_grants(ended)]
    owned = owned_by_creation(event)
    if owned is not None:
        # Creators own what they create (Lakekeeper): the creation event's actor is the
        # grant, so the log holds it without a second event.
        actor, stamp = getattr(event, "actor", ""), getattr(event, "timestamp", None)
        ops = [*ops, access_rows.insert_grant(owned, "ownership", "user", actor, stamp)]
    return ops

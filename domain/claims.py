"""Name claims: uniqueness of names under concurrency without locks.

A claim's id is derived from the name (see :mod:`domain.identifiers`), so two
writers creating one name both append version 1 (or both append the next
version of a released claim) and the event store rejects the second append.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from icelog.domain.attributed import AttributedEvent, fixed


class NameClaim(Aggregate):
    """Who holds a name: a table or a view (one identifier space), or a warehouse."""

    TOPIC = "icelog.name-claim"

    class Event(AttributedEvent):
        TOPIC = "icelog.name-claim.event.v1"

    class Claimed(Event, Aggregate.Created):
        """A name was claimed for the first time, together with the event that takes it: a table or
        view (`ns.name`) or a warehouse (`<project-id>/<warehouse-name>`).

        Data fields:
            kind: `table`, `view` or `warehouse`.
            holder-id: Id of the table, view or warehouse that holds the name.
            name: The full name: `ns.name`, or `<project-id>/<warehouse-name>`.
        """

        TOPIC = "icelog.name-claim.claimed.v1"
        kind: str
        holder_id: UUID
        name: str

        COPIES = ("kind", "holder_id", "name")

    class Reclaimed(Event):
        """A released name was taken again (by a new table or view, an undrop, a rename).

        Data fields:
            kind: `table`, `view` or `warehouse`.
            holder-id: Id of the new holder.
        """

        TOPIC = "icelog.name-claim.reclaimed.v1"
        kind: str
        holder_id: UUID

        COPIES = ("kind", "holder_id")

    class Released(Event):
        """The holder gave the name up: drop, soft drop, rename (the old name), warehouse rename or
        delete.
        """

        TOPIC = "icelog.name-claim.released.v1"

        SETS = fixed(kind=None, holder_id=None)

    # State is set by the events' apply(); declared for type checkers only, because
    # class annotations would make the library generate an __init__ from them.
    if TYPE_CHECKING:
        kind: str | None
        holder_id: UUID | None
        name: str

    @property
    def is_held(self) -> bool:
        return self.holder_id is not None

    def reclaim(self, *, kind: str, holder_id: UUID, actor: str, request_id: str) -> None:
        assert self.holder_id is None, "claim is held"
        self.trigger_event(
            self.Reclaimed, kind=kind, holder_id=holder_id, actor=actor, request_id=request_id
        )

    def release(self, *, actor: str, request_id: str) -> None:
        self.trigger_event(self.Released, actor=actor, request_id=request_id)


def claim(existing: NameClaim | None, *, claim_id: UUID, name: str, **holder: Any) -> NameClaim:
    """Claim a free name: create the claim, or re-claim a released one; `holder` as
    `NameClaim.reclaim` takes it (the name is the claim's from the first: its id says it)."""
    if existing is None:
        return NameClaim._create(NameClaim.Claimed, id=claim_id, name=name, **holder)
    existing.reclaim(**holder)
    return existing

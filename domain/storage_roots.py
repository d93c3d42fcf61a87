"""Where every warehouse's storage lives, so that no two warehouses share any of it.

One aggregate for the whole catalog (every project): creating a warehouse claims its root
here and deleting it releases the root, in the same append as the warehouse's own event.
Two concurrent creates of overlapping warehouses both change this aggregate, so the second
conflicts on its version, starts over and then sees the first (ADR 0011). Roots are
compared by segments (`Location`): `file` roots on their resolved directory, S3 roots on
bucket and key prefix whatever the endpoint (two spellings of one endpoint name one store).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from icelog.domain.attributed import AttributedEvent
from icelog.domain.errors import BadRequestError, ConflictError
from icelog.domain.identifiers import ICELOG_NAMESPACE
from icelog.domain.locations import Location

STORAGE_ROOTS_ID = uuid5(ICELOG_NAMESPACE, "storage-roots")


class StorageOverlapError(ConflictError):
    """A warehouse's storage would overlap another warehouse's (409)."""


class StorageRoots(Aggregate):
    """The storage root of every live warehouse (warehouse id -> location text)."""

    TOPIC = "icelog.storage-roots"

    class Event(AttributedEvent):
        TOPIC = "icelog.storage-roots.event.v1"

    class Started(Event, Aggregate.Created):
        """The registry of warehouse roots began, with the first warehouse created after it existed;
        it holds the roots of the warehouses that were already there.

        Data fields:
            roots: Warehouse id → storage root (`file:///…` resolved, or `s3://bucket/prefix`).
        """

        TOPIC = "icelog.storage-roots.started.v1"
        roots: dict[str, str]
        COPIES = ("roots",)

    class RootClaimed(Event):
        """A warehouse was created: its storage root, which overlaps no other warehouse's. Appended
        with `warehouse.created`.

        Data fields:
            location: The warehouse's storage root (a `file` root as the system resolves it).
        """

        TOPIC = "icelog.storage-roots.root-claimed.v1"
        warehouse_id: UUID
        location: str

        def apply(self, aggregate: Any) -> None:
            aggregate.roots[str(self.warehouse_id)] = self.location

    class RootReleased(Event):
        """A warehouse was deleted: its root is free again. Appended with `warehouse.deleted`."""

        TOPIC = "icelog.storage-roots.root-released.v1"
        warehouse_id: UUID

        def apply(self, aggregate: Any) -> None:
            aggregate.roots.pop(str(self.warehouse_id), None)

    if TYPE_CHECKING:
        roots: dict[str, str]

    @classmethod
    def start(cls, roots: dict[str, str], *, actor: str, request_id: str) -> StorageRoots:
        return cls._create(
            cls.Started, id=STORAGE_ROOTS_ID, roots=roots, actor=actor, request_id=request_id
        )

    def overlapping(self, location: Location, *, except_id: UUID | None = None) -> str | None:
        """The id of a warehouse whose root overlaps `location`, if any. Roots stored before
        the strict location rules are compared as well as they still parse."""
        for warehouse_id, text in self.roots.items():
            if except_id is not None and warehouse_id == str(except_id):
                continue
            try:
                root = Location.parse(text, encoded_separators=True)
            except BadRequestError:
                continue
            if root.overlaps(location):
                return warehouse_id
        return None

    def check_free(self, location: Location, *, except_id: UUID | None = None) -> None:
        """409 when `location` overlaps a live warehouse's root."""
        other = self.overlapping(location, except_id=except_id)
        if other is not None:
            raise StorageOverlapError(
                f"The storage location {location} overlaps the storage of warehouse {other}; "
                "warehouses never share storage"
            )

    def claim(self, warehouse_id: UUID, location: Location, *, actor: str, request_id: str) -> None:
        self.check_free(location, except_id=warehouse_id)
        self.trigger_event(
            self.RootClaimed,
            warehouse_id=warehouse_id,
            location=str(location),
            actor=actor,
            request_id=request_id,
        )

    def release(self, warehouse_id: UUID, *, actor: str, request_id: str) -> None:
        if str(warehouse_id) in self.roots:
            self.trigger_event(
                self.RootReleased, warehouse_id=warehouse_id, actor=actor, request_id=request_id
            )

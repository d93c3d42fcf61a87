"""Tables: the commit unit.

The aggregate keeps only what commands need (name, location, current metadata
location, lifecycle flags). The full metadata lives in the metadata files the
server writes. The events carry enough to rebuild every metadata document from
the log alone: the initial document on create/register, then per commit the
submitted updates, the time they were applied at and the resulting location.
Commits therefore stay linear in size, never the whole metadata per event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from icelog.domain.lifecycle import (
    SoftDeletable,
    apply_expired,
    apply_soft_dropped,
    apply_undropped,
)
from icelog.domain.locations import location_set_by, normalize_location
from icelog.domain.metadata_rules import CURRENT, LEGACY
from icelog.domain.protection import Protectable


class Table(Protectable, SoftDeletable, Aggregate):
    """An Iceberg table registered in a warehouse namespace."""

    TOPIC = "icelog.table"

    class Event(Aggregate.Event):
        TOPIC = "icelog.table.event.v1"
        actor: str
        request_id: str

    class Created(Event, Aggregate.Created):
        """Created by createTable or a create transaction. `metadata` is the first document,
        written to `metadata_location`; `updates` are what a create transaction submitted
        (empty for a plain create)."""

        TOPIC = "icelog.table.created.v1"
        warehouse_id: UUID
        namespace_id: UUID
        namespace: list[str]
        name: str
        location: str
        metadata_location: str
        metadata: dict[str, Any]
        updates: list[dict[str, Any]]

        def apply(self, aggregate: Any) -> None:
            _init(aggregate, self)

    class Registered(Event, Aggregate.Created):
        """An existing metadata file was adopted as a new table (registerTable)."""

        TOPIC = "icelog.table.registered.v1"
        warehouse_id: UUID
        namespace_id: UUID
        namespace: list[str]
        name: str
        location: str
        metadata_location: str
        metadata: dict[str, Any]

        def apply(self, aggregate: Any) -> None:
            _init(aggregate, self)

    class Committed(Event):
        """updateTable: `updates` were applied at `applied_at_ms` to the metadata at
        `previous_metadata_location`, producing `metadata_location`."""

        TOPIC = "icelog.table.committed.v1"
        requirements: list[dict[str, Any]]
        updates: list[dict[str, Any]]
        previous_metadata_location: str
        metadata_location: str
        applied_at_ms: int
        # The metadata rules the updates were applied under (domain/metadata_rules.py):
        # a replay applies the same ones. Events from before the field are rules 1.
        rules: int

        class_version = 2

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["rules"] = LEGACY

        def apply(self, aggregate: Any) -> None:
            aggregate.metadata_location = self.metadata_location
            moved = location_set_by(self.updates)
            if moved is not None:  # purge and undrop act on where the table is now
                aggregate.location = normalize_location(moved)

    class Renamed(Event):
        TOPIC = "icelog.table.renamed.v1"
        from_namespace: list[str]
        from_name: str
        namespace_id: UUID
        namespace: list[str]
        name: str

        def apply(self, aggregate: Any) -> None:
            aggregate.namespace_id = self.namespace_id
            aggregate.namespace = list(self.namespace)
            aggregate.name = self.name

    class Dropped(Event):
        TOPIC = "icelog.table.dropped.v1"
        purge_requested: bool

        def apply(self, aggregate: Any) -> None:
            aggregate.dropped = True

    class Unregistered(Dropped):
        """unregisterTable: the table left the catalog and its files stay where they are,
        to be registered again (here or in another catalog). A drop without purge to every
        projection (it is a `Dropped`), with its own topic for consumers and audit."""

        TOPIC = "icelog.table.unregistered.v1"

    class SoftDropped(Event):
        """Dropped in a soft-delete warehouse: the name is free, the table and its files are
        kept until `expires_at_ms` (delay fixed at drop time), when task
        `expiration_task_id` makes the drop final; with `purge_requested` its files are
        purged then."""

        TOPIC = "icelog.table.soft-dropped.v1"
        deleted_at_ms: int
        expiration_seconds: int
        expires_at_ms: int
        expiration_task_id: UUID
        purge_requested: bool

        def apply(self, aggregate: Any) -> None:
            apply_soft_dropped(aggregate, self)

    class Undropped(Event):
        """A soft-dropped table restored with its last metadata, under `name` (its old name
        unless the undrop asked for another)."""

        TOPIC = "icelog.table.undropped.v1"
        from_namespace: list[str]
        from_name: str
        namespace_id: UUID
        namespace: list[str]
        name: str

        def apply(self, aggregate: Any) -> None:
            apply_undropped(aggregate, self)

    class Expired(Event):
        """A soft drop became final (`reason`: "expired" or "dropped" by a recursive
        namespace drop); `purge_task_id` is the purge that follows, if requested."""

        TOPIC = "icelog.table.expired.v1"
        reason: str
        purge_task_id: UUID | None

        def apply(self, aggregate: Any) -> None:
            apply_expired(aggregate, self)

    class Purged(Event):
        """Files reachable from the table's metadata were deleted after a purge drop."""

        TOPIC = "icelog.table.purged.v1"
        deleted_files: int
        missing_files: int

        def apply(self, aggregate: Any) -> None:
            aggregate.purged = True

    class ProtectionChanged(Event):
        """Protection on or off: a protected table cannot be dropped."""

        TOPIC = "icelog.table.protection-changed.v1"
        protected: bool

        def apply(self, aggregate: Any) -> None:
            aggregate.protected = self.protected

    # State is set by the events' apply(); declared for type checkers only, because
    # class annotations would make the library generate an __init__ from them.
    if TYPE_CHECKING:
        warehouse_id: UUID
        namespace_id: UUID
        namespace: list[str]
        name: str
        location: str
        metadata_location: str
        dropped: bool
        soft_deleted: bool
        deleted_at_ms: int
        expires_at_ms: int
        expiration_task_id: UUID | None
        purged: bool

    @classmethod
    def create(
        cls,
        *,
        table_id: UUID,
        warehouse_id: UUID,
        namespace_id: UUID,
        namespace: list[str],
        name: str,
        location: str,
        metadata_location: str,
        metadata: dict[str, Any],
        updates: list[dict[str, Any]],
        actor: str,
        request_id: str,
    ) -> Table:
        return cls._create(
            cls.Created,
            id=table_id,
            warehouse_id=warehouse_id,
            namespace_id=namespace_id,
            namespace=namespace,
            name=name,
            location=location,
            metadata_location=metadata_location,
            metadata=metadata,
            updates=updates,
            actor=actor,
            request_id=request_id,
        )

    @classmethod
    def register(
        cls,
        *,
        table_id: UUID,
        warehouse_id: UUID,
        namespace_id: UUID,
        namespace: list[str],
        name: str,
        location: str,
        metadata_location: str,
        metadata: dict[str, Any],
        actor: str,
        request_id: str,
    ) -> Table:
        return cls._create(
            cls.Registered,
            id=table_id,
            warehouse_id=warehouse_id,
            namespace_id=namespace_id,
            namespace=namespace,
            name=name,
            location=location,
            metadata_location=metadata_location,
            metadata=metadata,
            actor=actor,
            request_id=request_id,
        )

    def commit(
        self,
        *,
        requirements: list[dict[str, Any]],
        updates: list[dict[str, Any]],
        metadata_location: str,
        applied_at_ms: int,
        actor: str,
        request_id: str,
    ) -> None:
        self.trigger_event(
            self.Committed,
            requirements=requirements,
            updates=updates,
            previous_metadata_location=self.metadata_location,
            metadata_location=metadata_location,
            applied_at_ms=applied_at_ms,
            rules=CURRENT,
            actor=actor,
            request_id=request_id,
        )

    def rename(
        self, *, namespace_id: UUID, namespace: list[str], name: str, actor: str, request_id: str
    ) -> None:
        self.trigger_event(
            self.Renamed,
            from_namespace=self.namespace,
            from_name=self.name,
            namespace_id=namespace_id,
            namespace=namespace,
            name=name,
            actor=actor,
            request_id=request_id,
        )

    def drop(self, *, purge_requested: bool, actor: str, request_id: str) -> None:
        self.trigger_event(
            self.Dropped, purge_requested=purge_requested, actor=actor, request_id=request_id
        )

    def unregister(self, *, actor: str, request_id: str) -> None:
        self.trigger_event(
            self.Unregistered, purge_requested=False, actor=actor, request_id=request_id
        )

    def mark_purged(
        self, *, deleted_files: int, missing_files: int, actor: str, request_id: str
    ) -> None:
        self.trigger_event(
            self.Purged,
            deleted_files=deleted_files,
            missing_files=missing_files,
            actor=actor,
            request_id=request_id,
        )


def _init(aggregate: Any, event: Table.Created | Table.Registered) -> None:
    aggregate.warehouse_id = event.warehouse_id
    aggregate.namespace_id = event.namespace_id
    aggregate.namespace = list(event.namespace)
    aggregate.name = event.name
    aggregate.location = event.location
    aggregate.metadata_location = event.metadata_location
    # A registered file is the client's, not the catalog's: it may change after the
    # register, so the logged document is the table's first state, not the file.
    aggregate.registered_location = (
        event.metadata_location if isinstance(event, Table.Registered) else None
    )
    aggregate.dropped = False
    aggregate.purged = False

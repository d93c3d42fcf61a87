"""Tables: the commit unit.

The aggregate keeps only what commands need (name, location, current metadata
location, lifecycle flags). The full metadata lives in the metadata files the
server writes. The events carry enough to rebuild every metadata document from
the log alone: the initial document on create/register, then per commit the
submitted updates, the time they were applied at and the resulting location.
Commits therefore stay linear in size, never the whole metadata per event.

What tables share with views (events' bodies, rules) is in `domain/tabular.py`;
here is what only a table has: commits, unregister, purge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from icelog.domain import tabular
from icelog.domain.errors import ConflictError, NoSuchTableError
from icelog.domain.tabular import Tabular


class Table(Tabular):
    """An Iceberg table registered in a warehouse namespace."""

    TOPIC = "icelog.table"
    KIND = "Table"
    CHANGE_EVENT = "Committed"
    NOT_FOUND = NoSuchTableError

    class Event(tabular.TabularEvent):
        TOPIC = "icelog.table.event.v1"

    class Created(Event, tabular.TabularPlaced):
        """Created by createTable or a create transaction. `metadata` is the first document,
        written to `metadata_location`; `updates` are what a create transaction submitted
        (empty for a plain create)."""

        TOPIC = "icelog.table.created.v1"
        updates: list[dict[str, Any]]

        def apply(self, aggregate: Any) -> None:
            super().apply(aggregate)
            aggregate.purged = False

    class Registered(Event, tabular.TabularPlaced):
        """An existing metadata file was adopted as a new table (registerTable)."""

        TOPIC = "icelog.table.registered.v1"
        registers = True

        def apply(self, aggregate: Any) -> None:
            super().apply(aggregate)
            aggregate.purged = False

    class Committed(Event, tabular.Changed):
        """updateTable: `updates` were applied at `applied_at_ms` to the metadata at
        `previous_metadata_location`, producing `metadata_location`."""

        TOPIC = "icelog.table.committed.v1"

    class Renamed(Event, tabular.Moved):
        TOPIC = "icelog.table.renamed.v1"

    class Dropped(Event, tabular.Dropped):
        TOPIC = "icelog.table.dropped.v1"
        purge_requested: bool

    class Unregistered(Dropped):
        """unregisterTable: the table left the catalog and its files stay where they are,
        to be registered again (here or in another catalog). A drop without purge to every
        projection (it is a `Dropped`), with its own topic for consumers and audit."""

        TOPIC = "icelog.table.unregistered.v1"

    class SoftDropped(Event, tabular.SoftDropped):
        """Dropped in a soft-delete warehouse: the name is free, the table and its files are
        kept until `expires_at_ms` (delay fixed at drop time), when task
        `expiration_task_id` makes the drop final; with `purge_requested` its files are
        purged then."""

        TOPIC = "icelog.table.soft-dropped.v1"
        purge_requested: bool

    class Undropped(Event, tabular.Undropped):
        """A soft-dropped table restored with its last metadata, under `name` (its old name
        unless the undrop asked for another)."""

        TOPIC = "icelog.table.undropped.v1"

    class Expired(Event, tabular.Expired):
        """A soft drop became final (`reason`: "expired" or "dropped" by a recursive
        namespace drop); `purge_task_id` is the purge that follows, if requested."""

        TOPIC = "icelog.table.expired.v1"

    class Purged(Event):
        """Files reachable from the table's metadata were deleted after a purge drop."""

        TOPIC = "icelog.table.purged.v1"
        deleted_files: int
        missing_files: int

        def apply(self, aggregate: Any) -> None:
            aggregate.purged = True

    class ProtectionChanged(Event, tabular.ProtectionChanged):
        """Protection on or off: a protected table cannot be dropped."""

        TOPIC = "icelog.table.protection-changed.v1"

    if TYPE_CHECKING:
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
    def register(cls, *, table_id: UUID, **fields: Any) -> Table:
        """Adopt an existing metadata file; `fields` as on `Registered`."""
        return cls._create(cls.Registered, id=table_id, **fields)

    commit = Tabular.record_change

    def drop(self, *, purge_requested: bool, actor: str, request_id: str) -> None:
        self.ensure_droppable()
        self.trigger_event(
            self.Dropped, purge_requested=purge_requested, actor=actor, request_id=request_id
        )

    def unregister(self, *, actor: str, request_id: str) -> None:
        self.ensure_droppable()
        self.trigger_event(
            self.Unregistered, purge_requested=False, actor=actor, request_id=request_id
        )

    def mark_purged(
        self, *, deleted_files: int, missing_files: int, actor: str, request_id: str
    ) -> None:
        # Only a table whose drop is final has its files purged, and only once.
        if not self.dropped or self.is_soft_deleted or self.purged:
            raise ConflictError(f"Table {self.dotted} is not awaiting a purge")
        self.trigger_event(
            self.Purged,
            deleted_files=deleted_files,
            missing_files=missing_files,
            actor=actor,
            request_id=request_id,
        )

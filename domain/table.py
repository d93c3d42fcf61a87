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
        """A table was created: `createTable` (`POST …/namespaces/{ns}/tables` without
        `stage-create`), or a create transaction was committed (stage-create, then a commit with
        `assert-create`). `metadata` is the first metadata document, already written to
        `metadata-location`.

        Data fields:
            metadata: The whole first metadata document (Iceberg table metadata JSON).
            updates: What a create transaction submitted (empty for a plain create).
            location: The table's base location.
        """

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
        """`registerTable` (`POST …/namespaces/{ns}/register`) adopted an existing metadata file as
        a new table. The table gets a new id (`tabularid`): it is not the `table-uuid` inside the
        adopted metadata.

        Data fields:
            metadata: The adopted metadata document.
            metadata-location: The adopted metadata file.
            location: The table's base location (from the metadata).
        """

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
        """A commit to the table: `updateTable` (`POST …/namespaces/{ns}/tables/{table}`) or this
        table's part of a multi-table transaction (`POST …/transactions/commit`, one event per
        table, all in one append). `updates` were applied at `applied-at-ms` to the metadata at
        `previous-metadata-location`, producing `metadata-location`.
        """

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
        """`renameTable` (`POST …/tables/rename`), within a namespace or into another one of the
        same warehouse. The envelope (`subject`, `namespace`, `name`) already has the new name.

        Data fields:
            namespace-id: Id of the namespace it is in now.
            namespace: Namespace levels now.
            name: Name now.
        """

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
        """`dropTable` in a warehouse whose delete profile is `hard` (the default), or a recursive
        namespace drop: the table is gone at once. With `purge-requested` (`?purgeRequested=true`) a
        purge task is scheduled in the same append and `table.purged` follows.

        Data fields:
            purge-requested: Whether the client asked to purge the files (a purge task follows).
        """

        TOPIC = "icelog.table.dropped.v1"
        purge_requested: bool

        def apply(self, aggregate: Any) -> None:
            aggregate.dropped = True

    class Unregistered(Dropped):
        """`unregisterTable` (`POST …/namespaces/{ns}/tables/{table}/unregister`, Iceberg's main
        spec): the table left the catalog at once, whatever the delete profile, and no file was
        touched — `registerTable` with its last metadata location brings it back. Everything that
        reads the log treats it as a `table.dropped` without purge.

        Data fields:
            purge-requested: Always false: no file is touched.
        """

        TOPIC = "icelog.table.unregistered.v1"

    class SoftDropped(Event):
        """`dropTable` in a warehouse with a `soft` delete profile: the name is free at once, but
        the table and its files are kept until `expires-at-ms` (the delay is fixed at drop time).
        Until then it can be undropped; then task `expiration-task-id` makes the drop final
        (`table.expired`).

        Data fields:
            purge-requested: Whether the drop asked for a purge (it runs when the drop expires).
        """

        TOPIC = "icelog.table.soft-dropped.v1"
        deleted_at_ms: int
        expiration_seconds: int
        expires_at_ms: int
        expiration_task_id: UUID
        purge_requested: bool

        def apply(self, aggregate: Any) -> None:
            apply_soft_dropped(aggregate, self)

    class Undropped(Event):
        """`POST /management/v1/warehouse/{id}/deleted-tabulars/undrop` restored a soft-dropped
        table with its last metadata, under `name` (its old name unless the request gave
        `new-name`). Its expiration task is cancelled in the same append.

        Data fields:
            namespace: Namespace levels it is restored into (the one it was dropped from).
            name: Name it is restored under.
            from-namespace: Namespace levels when it was dropped.
            from-name: Name when it was dropped.
        """

        TOPIC = "icelog.table.undropped.v1"
        from_namespace: list[str]
        from_name: str
        namespace_id: UUID
        namespace: list[str]
        name: str

        def apply(self, aggregate: Any) -> None:
            apply_undropped(aggregate, self)

    class Expired(Event):
        """A soft drop became final: `reason` is `"expired"` (the expiration task ran) or
        `"dropped"` (a recursive namespace drop removed it). `purge-task-id` is the purge that
        follows when the drop or the namespace drop asked for one.
        """

        TOPIC = "icelog.table.expired.v1"
        reason: str
        purge_task_id: UUID | None

        def apply(self, aggregate: Any) -> None:
            apply_expired(aggregate, self)

    class Purged(Event):
        """The purge task of a drop with `purgeRequested=true` deleted the files reachable from the
        table's metadata (data and delete files, manifests, manifest lists, statistics, every
        metadata file the catalog wrote).

        Data fields:
            deleted-files: Files deleted.
            missing-files: Files referenced by the metadata that were already gone.
        """

        TOPIC = "icelog.table.purged.v1"
        deleted_files: int
        missing_files: int

        def apply(self, aggregate: Any) -> None:
            aggregate.purged = True

    class ProtectionChanged(Event):
        """Protection switched on or off (`POST
        /management/v1/warehouse/{id}/table/{table-id}/protection`). A protected table cannot be
        dropped.
        """

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

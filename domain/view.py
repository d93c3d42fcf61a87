"""Views: like tables, a name in the shared identifier space pointing at metadata files.

Events carry the first metadata document on create/register and, per replace, the
submitted updates with the time they were applied: folding them with
`domain.view_metadata.apply_view_updates` reproduces every view metadata document.
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


class View(Protectable, SoftDeletable, Aggregate):
    """An Iceberg view registered in a warehouse namespace."""

    TOPIC = "icelog.view"

    class Event(Aggregate.Event):
        TOPIC = "icelog.view.event.v1"
        actor: str
        request_id: str

    class Created(Event, Aggregate.Created):
        """`createView` (`POST …/namespaces/{ns}/views`): `metadata` is the first view metadata
        document, already written to `metadata-location`.

        Data fields:
            metadata: The whole first view metadata document.
            location: The view's base location.
        """

        TOPIC = "icelog.view.created.v1"
        warehouse_id: UUID
        namespace_id: UUID
        namespace: list[str]
        name: str
        location: str
        metadata_location: str
        metadata: dict[str, Any]

        def apply(self, aggregate: Any) -> None:
            _init(aggregate, self)

    class Registered(Event, Aggregate.Created):
        """`registerView` (`POST …/namespaces/{ns}/register-view`) adopted an existing view metadata
        file. The view gets a new id: it is not the `view-uuid` inside the metadata.

        Data fields:
            metadata: The adopted view metadata document.
            metadata-location: The adopted metadata file.
            location: The view's base location (from the metadata).
        """

        TOPIC = "icelog.view.registered.v1"
        warehouse_id: UUID
        namespace_id: UUID
        namespace: list[str]
        name: str
        location: str
        metadata_location: str
        metadata: dict[str, Any]

        def apply(self, aggregate: Any) -> None:
            _init(aggregate, self)

    class Replaced(Event):
        """`replaceView` (`POST …/namespaces/{ns}/views/{view}`): `updates` were applied at
        `applied-at-ms` to the document at `previous-metadata-location`, producing
        `metadata-location`.
        """

        TOPIC = "icelog.view.replaced.v1"
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
        """`renameView` (`POST …/views/rename`). The envelope already has the new name.

        Data fields:
            namespace-id: Id of the namespace it is in now.
            namespace: Namespace levels now.
            name: Name now.
        """

        TOPIC = "icelog.view.renamed.v1"
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
        """`dropView` in a warehouse with a `hard` delete profile, or a recursive namespace drop."""

        TOPIC = "icelog.view.dropped.v1"

        def apply(self, aggregate: Any) -> None:
            aggregate.dropped = True

    class SoftDropped(Event):
        """`dropView` in a warehouse with a `soft` delete profile: the name is free, the view is
        kept until `expires-at-ms`, when task `expiration-task-id` makes the drop final.
        """

        TOPIC = "icelog.view.soft-dropped.v1"
        deleted_at_ms: int
        expiration_seconds: int
        expires_at_ms: int
        expiration_task_id: UUID

        def apply(self, aggregate: Any) -> None:
            apply_soft_dropped(aggregate, self)

    class Undropped(Event):
        """A soft-dropped view was restored (`…/deleted-tabulars/undrop`) under `name` (its old name
        unless the request gave `new-name`); its expiration task is cancelled.

        Data fields:
            namespace: Namespace levels it is restored into.
            name: Name it is restored under.
            from-namespace: Namespace levels when it was dropped.
            from-name: Name when it was dropped.
        """

        TOPIC = "icelog.view.undropped.v1"
        from_namespace: list[str]
        from_name: str
        namespace_id: UUID
        namespace: list[str]
        name: str

        def apply(self, aggregate: Any) -> None:
            apply_undropped(aggregate, self)

    class Expired(Event):
        """A soft drop of a view became final: `reason` `"expired"` or `"dropped"` (recursive
        namespace drop). Views have no files to purge, so `purge-task-id` is null.

        Data fields:
            purge-task-id: Always null for views.
        """

        TOPIC = "icelog.view.expired.v1"
        reason: str
        purge_task_id: UUID | None

        def apply(self, aggregate: Any) -> None:
            apply_expired(aggregate, self)

    class ProtectionChanged(Event):
        """Protection switched on or off (`…/view/{view-id}/protection`). A protected view cannot be
        dropped.
        """

        TOPIC = "icelog.view.protection-changed.v1"
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

    @classmethod
    def create(cls, *, registered: bool = False, view_id: UUID, **fields: Any) -> View:
        """Create (or, with `registered`, register) a view; `fields` as on the events."""
        event = cls.Registered if registered else cls.Created
        return cls._create(event, id=view_id, **fields)

    def replace(
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
            self.Replaced,
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

    def drop(self, *, actor: str, request_id: str) -> None:
        self.trigger_event(self.Dropped, actor=actor, request_id=request_id)


def _init(aggregate: Any, event: View.Created | View.Registered) -> None:
    aggregate.warehouse_id = event.warehouse_id
    aggregate.namespace_id = event.namespace_id
    aggregate.namespace = list(event.namespace)
    aggregate.name = event.name
    aggregate.location = event.location
    aggregate.metadata_location = event.metadata_location
    # As for tables: a registered file is the client's; the logged document is the view's.
    aggregate.registered_location = (
        event.metadata_location if isinstance(event, View.Registered) else None
    )
    aggregate.dropped = False

"""Warehouses: a storage root plus the namespaces and tables inside it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from icelog.domain import protection
from icelog.domain.attributed import AttributedEvent, fixed
from icelog.domain.errors import NoSuchWarehouseError, NotEmptyError
from icelog.domain.protection import Protectable, ensure_unprotected
from icelog.domain.removal import Removable


class Warehouse(Protectable, Removable, Aggregate):
    """A warehouse. The storage profile holds no secrets, only a credential's id.

    `namespace_count` counts top-level namespaces, so deleting a warehouse conflicts with
    a concurrent top-level namespace create instead of orphaning it.
    """

    TOPIC = "icelog.warehouse"
    NOT_FOUND = NoSuchWarehouseError
    REMOVED_FLAG = "deleted"

    class Event(AttributedEvent):
        TOPIC = "icelog.warehouse.event.v1"

    class Created(Event, Aggregate.Created):
        """`POST /management/v1/warehouse`; at first start also the embedded `default` warehouse
        (actor `system`). Appended with the project's `project.warehouse-added`.

        Data fields:
            project-id: The project it belongs to (for good).
            name: The warehouse's name (unique per project).
            storage-profile: Where its files live (`type`, `base-location`, …); never secrets.
            delete-profile: `{"type": "hard"}` or `{"type": "soft", "expiration-seconds": N}`.
        """

        TOPIC = "icelog.warehouse.created.v1"
        project_id: UUID
        name: str
        storage_profile: dict[str, Any]
        delete_profile: dict[str, Any]

        COPIES = ("project_id", "name", "storage_profile", "delete_profile")
        SETS = fixed(namespace_count=0, deleted=False)

    class Renamed(Event):
        """`POST /management/v1/warehouse/{id}/rename`.

        Data fields:
            name: The new name.
        """

        TOPIC = "icelog.warehouse.renamed.v1"
        name: str
        COPIES = ("name",)

    class NamespaceAdded(Event):
        """Bookkeeping: a top-level namespace was created in the warehouse (so deleting the
        warehouse conflicts with a concurrent namespace create).

        Data fields:
            namespace-id: The top-level namespace's id.
        """

        TOPIC = "icelog.warehouse.namespace-added.v1"
        namespace_id: UUID

        def apply(self, aggregate: Any) -> None:
            aggregate.namespace_count += 1

    class NamespaceRemoved(Event):
        """Bookkeeping: a top-level namespace was dropped.

        Data fields:
            namespace-id: The top-level namespace's id.
        """

        TOPIC = "icelog.warehouse.namespace-removed.v1"
        namespace_id: UUID

        def apply(self, aggregate: Any) -> None:
            aggregate.namespace_count -= 1

    class Deleted(Event):
        """`DELETE /management/v1/warehouse/{id}`: only an unprotected warehouse without namespaces
        and open tasks. Appended with `project.warehouse-removed`.
        """

        TOPIC = "icelog.warehouse.deleted.v1"
        SETS = fixed(deleted=True)

    class DeleteProfileChanged(Event):
        """`POST /management/v1/warehouse/{id}/delete-profile`: what drops do from now on (a soft
        drop fixes its own expiry at drop time).

        Data fields:
            delete-profile: `{"type": "hard"}` or `{"type": "soft", "expiration-seconds": N}`.
        """

        TOPIC = "icelog.warehouse.delete-profile-changed.v1"
        delete_profile: dict[str, Any]
        COPIES = ("delete_profile",)

    class StorageProfileChanged(Event):
        """`POST /management/v1/warehouse/{id}/storage` or `.../storage-credential`: new storage
        settings or a new credential for the same storage location. The credential itself is never
        in the log: the profile names it by `credential-id`.

        Data fields:
            storage-profile: The whole new profile (`type`, `base-location`, S3 settings,
                `credential-id`); never secrets.
        """

        TOPIC = "icelog.warehouse.storage-profile-changed.v1"
        storage_profile: dict[str, Any]
        COPIES = ("storage_profile",)

    class ProtectionChanged(Event, protection.ProtectionChanged):
        """Protection switched on or off (`POST /management/v1/warehouse/{id}/protection`). A
        protected warehouse cannot be deleted.
        """

        TOPIC = "icelog.warehouse.protection-changed.v1"

    # State is set by the events' apply(); declared for type checkers only, because
    # class annotations would make the library generate an __init__ from them.
    if TYPE_CHECKING:
        project_id: UUID
        name: str
        storage_profile: dict[str, Any]
        delete_profile: dict[str, Any]
        namespace_count: int
        deleted: bool

    @classmethod
    def create(cls, *, warehouse_id: UUID, **fields: Any) -> Warehouse:
        """Create one; `fields` as on `Created`."""
        return cls._create(cls.Created, id=warehouse_id, **fields)

    @property
    def base_location(self) -> str:
        return str(self.storage_profile["base-location"])

    # -- commands --------------------------------------------------------------------------
    def rename(self, name: str, *, actor: str, request_id: str) -> None:
        self._change(self.Renamed, name=name, actor=actor, request_id=request_id)

    def add_namespace(self, namespace_id: UUID, *, actor: str, request_id: str) -> None:
        self._change(
            self.NamespaceAdded, namespace_id=namespace_id, actor=actor, request_id=request_id
        )

    def remove_namespace(self, namespace_id: UUID, *, actor: str, request_id: str) -> None:
        self.trigger_event(
            self.NamespaceRemoved, namespace_id=namespace_id, actor=actor, request_id=request_id
        )

    def delete(self, *, actor: str, request_id: str) -> None:
        self.ensure_live()
        ensure_unprotected(self.is_protected, f"Warehouse {self.name}")
        if self.namespace_count > 0:
            raise NotEmptyError(
                f"Warehouse {self.name} is not empty: it has {self.namespace_count} namespace(s)"
            )
        self.trigger_event(self.Deleted, actor=actor, request_id=request_id)

    def change_storage_profile(
        self, storage_profile: dict[str, Any], *, actor: str, request_id: str
    ) -> None:
        self._change(
            self.StorageProfileChanged,
            storage_profile=storage_profile,
            actor=actor,
            request_id=request_id,
        )

    def change_delete_profile(
        self, delete_profile: dict[str, Any], *, actor: str, request_id: str
    ) -> None:
        self._change(
            self.DeleteProfileChanged,
            delete_profile=delete_profile,
            actor=actor,
            request_id=request_id,
        )

"""Projects: the tenancy unit that owns warehouses (Lakekeeper's model)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from icelog.domain.attributed import AttributedEvent, fixed
from icelog.domain.errors import NoSuchProjectError, NotEmptyError
from icelog.domain.removal import Removable


class Project(Removable, Aggregate):
    """A project. `warehouse_count` makes "delete only when empty" safe under concurrency:
    a warehouse create appends to its project, so it conflicts with a concurrent delete."""

    TOPIC = "icelog.project"
    NOT_FOUND = NoSuchProjectError
    REMOVED_FLAG = "deleted"

    class Event(AttributedEvent):
        TOPIC = "icelog.project.event.v1"

    class Created(Event, Aggregate.Created):
        """`POST /management/v1/project`; at first start also the `default` project (nil UUID, actor
        `system`).

        Data fields:
            name: The project's name.
        """

        TOPIC = "icelog.project.created.v1"
        name: str

        COPIES = ("name",)
        SETS = fixed(deleted=False, warehouse_count=0)

    class Renamed(Event):
        """`POST /management/v1/project/{id}/rename`.

        Data fields:
            name: The new name.
        """

        TOPIC = "icelog.project.renamed.v1"
        name: str
        COPIES = ("name",)

    class WarehouseAdded(Event):
        """Bookkeeping: a warehouse was created in the project (appended with `warehouse.created`).

        Data fields:
            warehouse-id: The new warehouse.
        """

        TOPIC = "icelog.project.warehouse-added.v1"
        warehouse_id: UUID

        def apply(self, aggregate: Any) -> None:
            aggregate.warehouse_count += 1

    class WarehouseRemoved(Event):
        """Bookkeeping: a warehouse of the project was deleted (with `warehouse.deleted`).

        Data fields:
            warehouse-id: The deleted warehouse.
        """

        TOPIC = "icelog.project.warehouse-removed.v1"
        warehouse_id: UUID

        def apply(self, aggregate: Any) -> None:
            aggregate.warehouse_count -= 1

    class Deleted(Event):
        """`DELETE /management/v1/project/{id}`: only a project without warehouses."""

        TOPIC = "icelog.project.deleted.v1"
        SETS = fixed(deleted=True)

    # State is set by the events' apply(); declared for type checkers only, because
    # class annotations would make the library generate an __init__ from them.
    if TYPE_CHECKING:
        name: str
        deleted: bool
        warehouse_count: int

    @classmethod
    def create(cls, *, project_id: UUID, name: str, actor: str, request_id: str) -> Project:
        return cls._create(
            cls.Created, id=project_id, name=name, actor=actor, request_id=request_id
        )

    def rename(self, name: str, *, actor: str, request_id: str) -> None:
        self._change(self.Renamed, name=name, actor=actor, request_id=request_id)

    def add_warehouse(self, warehouse_id: UUID, *, actor: str, request_id: str) -> None:
        self._change(
            self.WarehouseAdded, warehouse_id=warehouse_id, actor=actor, request_id=request_id
        )

    def remove_warehouse(self, warehouse_id: UUID, *, actor: str, request_id: str) -> None:
        self._change(
            self.WarehouseRemoved, warehouse_id=warehouse_id, actor=actor, request_id=request_id
        )

    def delete(self, *, actor: str, request_id: str) -> None:
        self.ensure_live()
        if self.warehouse_count > 0:
            raise NotEmptyError(f"Project {self.id} still has {self.warehouse_count} warehouse(s)")
        self.trigger_event(self.Deleted, actor=actor, request_id=request_id)

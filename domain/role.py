"""Roles: named groups of users and roles in a project (Lakekeeper's). Membership is the
role's `assignee` grant (domain/grants.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from icelog.domain.attributed import AttributedEvent, fixed


class Role(Aggregate):
    TOPIC = "icelog.role"

    class Event(AttributedEvent):
        TOPIC = "icelog.role.event.v1"

    class Created(Event, Aggregate.Created):
        """`POST /management/v1/role`; its creator owns it.

        Data fields:
            project-id: The role's project.
            name: Unique in the project.
            description: Free text, or null.
        """

        TOPIC = "icelog.role.created.v1"
        project_id: UUID
        name: str
        description: str | None

        COPIES = ("project_id", "name", "description")
        SETS = fixed(deleted=False)

    class Updated(Event):
        """`POST /management/v1/role/{id}`: a new name or description.

        Data fields:
            name: The new name.
            description: Free text, or null.
        """

        TOPIC = "icelog.role.updated.v1"
        name: str
        description: str | None
        COPIES = ("name", "description")

    class Deleted(Event):
        """`DELETE /management/v1/role/{id}`; its memberships and the grants it held go with it."""

        TOPIC = "icelog.role.deleted.v1"

        SETS = fixed(deleted=True)

    if TYPE_CHECKING:
        project_id: UUID
        name: str
        description: str | None
        deleted: bool

    @classmethod
    def create(cls, *, role_id: UUID, **fields: Any) -> Role:
        """Create one; `fields` as on `Created`."""
        return cls._create(cls.Created, id=role_id, **fields)

    def update(self, *, name: str, description: str | None, actor: str, request_id: str) -> None:
        self.trigger_event(
            self.Updated, name=name, description=description, actor=actor, request_id=request_id
        )

    def delete(self, *, actor: str, request_id: str) -> None:
        self.trigger_event(self.Deleted, actor=actor, request_id=request_id)

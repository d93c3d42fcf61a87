"""The grants on one object (Lakekeeper's assignments), as events: one stream per object,
so that one request's writes and deletes land together and a grant that is already there
appends nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from icelog.domain.identifiers import ICELOG_NAMESPACE
from icelog.domain.permissions import ObjectRef, PrincipalRef, check_relation

Grant = tuple[str, str, str]  # (relation, principal kind, principal id)


def grants_id(obj: ObjectRef) -> UUID:
    """The stream of an object's grants: derived, so the first grant needs no lookup."""
    return uuid5(ICELOG_NAMESPACE, f"grants:{obj.kind}:{obj.id}")


class _GrantsEvent(Aggregate.Event):
    actor: str
    request_id: str
    object_kind: str
    object_id: str


class _GrantEvent(_GrantsEvent):
    """One grant written or deleted."""

    relation: str
    principal_kind: str
    principal_id: str

    @property
    def grant(self) -> Grant:
        return (self.relation, self.principal_kind, self.principal_id)


class Grants(Aggregate):
    TOPIC = "icelog.grants"

    class Event(_GrantsEvent):
        TOPIC = "icelog.grants.event.v1"

    class Started(Event, Aggregate.Created):
        """The first grant on an object is about to be written (bookkeeping; one stream per object).

        Data fields:
            object-kind: server, project, warehouse, namespace, table, view or role.
            object-id: The object's id (the server's: its fixed id).
        """

        TOPIC = "icelog.grants.started.v1"

        def apply(self, aggregate: Any) -> None:
            aggregate.held = set()

    class Granted(Event, _GrantEvent):
        """A relation on an object was granted to a user or a role: `POST
        /management/v1/permissions/.../assignments` (`writes`), or the first admin at `POST
        /management/v1/bootstrap`. A grant already held appends nothing.

        Data fields:
            object-kind: server, project, warehouse, namespace, table, view or role.
            object-id: The object's id.
            relation: Lakekeeper's relation: ownership, select, modify, assignee, ...
            principal-kind: `user` or `role`.
            principal-id: `oidc~<subject>` or the role's id.
        """

        TOPIC = "icelog.grants.granted.v1"

        def apply(self, aggregate: Any) -> None:
            aggregate.held.add(self.grant)

    class Revoked(Event, _GrantEvent):
        """A grant was taken back (`deletes` of an assignments request).

        Data fields:
            object-kind: As in `granted`.
            object-id: The object's id.
            relation: The relation taken back.
            principal-kind: `user` or `role`.
            principal-id: `oidc~<subject>` or the role's id.
        """

        TOPIC = "icelog.grants.revoked.v1"

        def apply(self, aggregate: Any) -> None:
            aggregate.held.discard(self.grant)

    if TYPE_CHECKING:
        held: set[Grant]

    @classmethod
    def start(cls, obj: ObjectRef, *, actor: str, request_id: str) -> Grants:
        return cls._create(
            cls.Started, id=grants_id(obj), object_kind=obj.kind, object_id=obj.id,
            actor=actor, request_id=request_id,
        )  # fmt: skip

    def change(
        self,
        obj: ObjectRef,
        *,
        writes: list[tuple[str, PrincipalRef]],
        deletes: list[tuple[str, PrincipalRef]],
        actor: str,
        request_id: str,
        held_now: set[Grant] | None = None,
    ) -> None:
        """Deletes first, then writes (a request may move a grant); unchanged ones append
        nothing. Refuses a relation the object's kind does not have (ValueError).

        `held_now`: the grants the object holds now, when the caller knows better than this
        stream: the read model ends an object's grants with the object (domain/ownership.py
        `grants_ended_by`) without a revoke event, so the stream of a namespace that was
        dropped and made again still lists the old one's grants."""
        held = set(self.held if held_now is None else held_now)
        for relation, _ in (*deletes, *writes):
            check_relation(obj.kind, relation)
        common = {"object_kind": obj.kind, "object_id": obj.id, "actor": actor,
                  "request_id": request_id}  # fmt: skip
        for relation, who in deletes:
            if (relation, who.kind, who.id) in held:
                held.discard((relation, who.kind, who.id))
                self.trigger_event(
                    self.Revoked, relation=relation, principal_kind=who.kind,
                    principal_id=who.id, **common,
                )  # fmt: skip
        for relation, who in writes:
            if (relation, who.kind, who.id) not in held:
                held.add((relation, who.kind, who.id))
                self.trigger_event(
                    self.Granted, relation=relation, principal_kind=who.kind,
                    principal_id=who.id, **common,
                )  # fmt: skip

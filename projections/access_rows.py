"""The catalog read model's fold, for access: users, roles and grants (docs/auth.md).

Registered on catalog_rows.py's `event_rows`; `end_grants` and `insert_grant` are also
what fold.py adds to any event that ends an object's grants or gives its creator
ownership.
"""

from __future__ import annotations

from typing import Any, cast

from icelog.domain.grants import Grants
from icelog.domain.ownership import GrantsEnded
from icelog.domain.permissions import Kind, ObjectRef
from icelog.domain.role import Role
from icelog.domain.user import User
from icelog.projections.catalog_rows import Hints, event_rows
from icelog.projections.row_ops import (
    Delete,
    Insert,
    InsertIfAbsent,
    ObjectExists,
    Op,
    Reads,
    Require,
    Update,
)
from icelog.projections.schema import grant_row_id

GRANTS = "icelog_grants"


def insert_grant(obj: ObjectRef, relation: str, kind: str, principal: str, at: Any) -> Op:
    row = {
        "id": grant_row_id(obj.id, relation, kind, principal),
        "object_kind": obj.kind,
        "object_id": obj.id,
        "relation": relation,
        "principal_kind": kind,
        "principal_id": principal,
        "created_at": at.isoformat(),
    }
    return InsertIfAbsent(GRANTS, row)


def end_grants(ended: GrantsEnded) -> list[Op]:
    """Delete the grants on the object that is gone, and those its principal held."""
    ops: list[Op] = []
    if ended.on is not None:
        ops.append(Delete(GRANTS, {"object_id": ended.on.id, "object_kind": ended.on.kind}))
    if ended.held_by is not None:
        held_by = {"principal_id": ended.held_by.id, "principal_kind": ended.held_by.kind}
        ops.append(Delete(GRANTS, held_by))
    return ops


@event_rows.register
def _(event: Grants.Granted, hints: Hints, reads: Reads) -> list[Op]:
    # A grant of something gone would outlive it and pass to the next object of that
    # name (a namespace's id derives from its name). Live, that is a conflict (it was
    # checked before the append and dropped meanwhile); a rebuild skips such a grant (the
    # log of an older release may hold one), as the live model no longer has it.
    obj = ObjectRef(cast(Kind, event.object_kind), event.object_id)
    ops: list[Op] = [
        Require(
            ObjectExists(obj.kind, obj.id),
            f"the {obj.kind} {obj.id} does not exist",
            always=True,
        )
    ]
    if event.principal_kind == "role":
        role = event.principal_id
        ops.append(
            Require(ObjectExists("role", role), f"the role {role} does not exist", always=True)
        )
    grant = insert_grant(
        obj, event.relation, event.principal_kind, event.principal_id, event.timestamp
    )
    return [*ops, grant]


@event_rows.register
def _(event: Grants.Revoked, hints: Hints, reads: Reads) -> list[Op]:
    row_id = grant_row_id(event.object_id, event.relation, event.principal_kind, event.principal_id)
    return [Delete(GRANTS, {"id": row_id})]


@event_rows.register
def _(event: Role.Created, hints: Hints, reads: Reads) -> list[Op]:
    pid = str(event.project_id)
    row = {
        "id": str(event.originator_id),
        "project_id": pid,
        "name": event.name,
        "description": event.description,
        "created_at": event.timestamp.isoformat(),
    }
    # A role created while its project was deleted would outlive it.
    guard = Require(ObjectExists("project", pid), f"the project {pid} does not exist")
    return [guard, Insert("icelog_roles", row)]


@event_rows.register
def _(event: Role.Updated, hints: Hints, reads: Reads) -> list[Op]:
    values = {
        "name": event.name,
        "description": event.description,
        "updated_at": event.timestamp.isoformat(),
    }
    return [Update("icelog_roles", str(event.originator_id), values)]


@event_rows.register
def _(event: Role.Deleted, hints: Hints, reads: Reads) -> list[Op]:
    # Its memberships, the grants on it and those it held go with it (fold.py).
    return [Delete("icelog_roles", {"id": str(event.originator_id)})]


def _user(event: User.Provisioned | User.Updated) -> dict[str, Any]:
    return {
        "id": event.user_id,
        "name": event.name,
        "email": event.email,
        "user_type": event.user_type,
        "last_updated_with": event.how,
    }


@event_rows.register
def _(event: User.Provisioned, hints: Hints, reads: Reads) -> list[Op]:
    return [Insert("icelog_users", _user(event) | {"created_at": event.timestamp.isoformat()})]


@event_rows.register
def _(event: User.Updated, hints: Hints, reads: Reads) -> list[Op]:
    # An update after a delete brings the user back (the row went with the delete).
    stamp = event.timestamp.isoformat()
    row = _user(event)
    values = {k: v for k, v in row.items() if k != "id"} | {"updated_at": stamp}
    back = row | {"created_at": stamp, "updated_at": stamp}
    return [Update("icelog_users", event.user_id, values), InsertIfAbsent("icelog_users", back)]


@event_rows.register
def _(event: User.Deleted, hints: Hints, reads: Reads) -> list[Op]:
    return [Delete("icelog_users", {"id": event.user_id})]

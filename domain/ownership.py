"""Grants that events begin and end without a grant event: which object a creation event
makes its actor the owner of (Lakekeeper: creators own what they create; only identified
users of any provider own (domain/user_ids.py), `anonymous` and `system` never do), and
which grants end with the object or principal an event removes."""

from __future__ import annotations

from dataclasses import dataclass

from icelog.domain.namespace import Namespace
from icelog.domain.permissions import ObjectRef, PrincipalRef
from icelog.domain.project import Project
from icelog.domain.role import Role
from icelog.domain.table import Table
from icelog.domain.user import User
from icelog.domain.user_ids import is_user_id
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse


def owned_by_creation(event: object) -> ObjectRef | None:
    actor = getattr(event, "actor", "")
    if not isinstance(actor, str) or not is_user_id(actor):
        return None
    oid = str(getattr(event, "originator_id", ""))
    if isinstance(event, (Table.Created, Table.Registered)):
        return ObjectRef("table", oid)
    if isinstance(event, (View.Created, View.Registered)):
        return ObjectRef("view", oid)
    if isinstance(event, (Namespace.Created, Namespace.Recreated)):
        return ObjectRef("namespace", oid)
    if isinstance(event, Warehouse.Created):
        return ObjectRef("warehouse", oid)
    if isinstance(event, Role.Created):
        return ObjectRef("role", oid)
    return None


@dataclass(frozen=True)
class GrantsEnded:
    """The grants an event ends (docs/auth.md, "Rights end with their object"): every grant
    ON `on` (the object is gone), and every grant HELD BY `held_by` (the principal is
    gone). Rights belong to an object's identity, never to its name: a namespace's id
    derives from its name, and a user's from its subject, so without this the next holder
    of the name would inherit them."""

    on: ObjectRef | None = None
    held_by: PrincipalRef | None = None


def grants_ended_by(event: object) -> GrantsEnded | None:
    """Which grants `event` ends, or None. A soft drop ends none (an undrop brings the
    table or view back with its rights); its expiry, or a purge, ends them."""
    if not isinstance(event, _ENDING):
        return None
    oid = str(getattr(event, "originator_id", ""))
    if isinstance(event, Namespace.Dropped):
        return GrantsEnded(on=ObjectRef("namespace", oid))
    # Table.Unregistered is a Table.Dropped.
    if isinstance(event, (Table.Dropped, Table.Expired, Table.Purged)):
        return GrantsEnded(on=ObjectRef("table", oid))
    if isinstance(event, (View.Dropped, View.Expired)):
        return GrantsEnded(on=ObjectRef("view", oid))
    if isinstance(event, Warehouse.Deleted):
        return GrantsEnded(on=ObjectRef("warehouse", oid))
    if isinstance(event, Project.Deleted):
        return GrantsEnded(on=ObjectRef("project", oid))
    if isinstance(event, Role.Deleted):
        # Its memberships and the grants on it, and the grants the role held.
        return GrantsEnded(on=ObjectRef("role", oid), held_by=PrincipalRef("role", oid))
    assert isinstance(event, User.Deleted)
    return GrantsEnded(held_by=PrincipalRef("user", event.user_id))


_ENDING = (
    Namespace.Dropped,
    Table.Dropped,
    Table.Expired,
    Table.Purged,
    View.Dropped,
    View.Expired,
    Warehouse.Deleted,
    Project.Deleted,
    Role.Deleted,
    User.Deleted,
)

"""Grants that events begin and end without a grant event: which object a creation event
makes its actor the owner of (Lakekeeper: creators own what they create; only identified
users of any provider own (domain/user_ids.py), `anonymous` and `system` never do), and
which grants end with the object or principal an event removes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import singledispatch
from typing import Any

from icelog.domain.namespace import Namespace
from icelog.domain.permissions import Kind, ObjectRef, PrincipalRef
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
    kind = _created_kind(event)
    return None if kind is None else ObjectRef(kind, str(getattr(event, "originator_id", "")))


@singledispatch
def _created_kind(event: object) -> Kind | None:
    """The kind of object `event` creates (its creator owns it), or None."""
    return None


def _constant(kind: Kind) -> Callable[[object], Kind]:
    return lambda _event: kind


def _register_kinds(
    dispatcher: Any,
    table: tuple[tuple[Kind, tuple[type, ...]], ...],
    handler: Callable[[Kind], Callable[[object], Any]],
) -> None:
    """Register on `dispatcher`, for every event class of each kind in `table`, the
    handler made for the kind."""
    for kind, classes in table:
        for event_class in classes:
            dispatcher.register(event_class, handler(kind))


_CREATED_BY: tuple[tuple[Kind, tuple[type, ...]], ...] = (
    ("table", (Table.Created, Table.Registered)),
    ("view", (View.Created, View.Registered)),
    ("namespace", (Namespace.Created, Namespace.Recreated)),
    ("warehouse", (Warehouse.Created,)),
    ("role", (Role.Created,)),
)
_register_kinds(_created_kind, _CREATED_BY, _constant)


@dataclass(frozen=True)
class GrantsEnded:
    """The grants an event ends (docs/auth.md, "Rights end with their object"): every grant
    ON `on` (the object is gone), and every grant HELD BY `held_by` (the principal is
    gone). Rights belong to an object's identity, never to its name: a namespace's id
    derives from its name, and a user's from its subject, so without this the next holder
    of the name would inherit them."""

    on: ObjectRef | None = None
    held_by: PrincipalRef | None = None


@singledispatch
def grants_ended_by(event: object) -> GrantsEnded | None:
    """Which grants `event` ends, or None. A soft drop ends none (an undrop brings the
    table or view back with its rights); its expiry, or a purge, ends them."""
    return None


def _ends_grants_on(kind: Kind) -> Callable[[object], GrantsEnded]:
    return lambda event: GrantsEnded(on=ObjectRef(kind, str(getattr(event, "originator_id", ""))))


_ENDED_WITH: tuple[tuple[Kind, tuple[type, ...]], ...] = (
    ("namespace", (Namespace.Dropped,)),
    # Table.Unregistered is a Table.Dropped.
    ("table", (Table.Dropped, Table.Expired, Table.Purged)),
    ("view", (View.Dropped, View.Expired)),
    ("warehouse", (Warehouse.Deleted,)),
    ("project", (Project.Deleted,)),
)
_register_kinds(grants_ended_by, _ENDED_WITH, _ends_grants_on)


@grants_ended_by.register(Role.Deleted)
def _(event: Role.Deleted) -> GrantsEnded:
    # Its memberships and the grants on it, and the grants the role held.
    oid = str(event.originator_id)
    return GrantsEnded(on=ObjectRef("role", oid), held_by=PrincipalRef("role", oid))


@grants_ended_by.register(User.Deleted)
def _(event: User.Deleted) -> GrantsEnded:
    return GrantsEnded(held_by=PrincipalRef("user", event.user_id))

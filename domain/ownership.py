"""Which object a creation event makes its actor the owner of (Lakekeeper: creators own
what they create). Only identified users (of any provider, domain/user_ids.py) own:
`anonymous` and `system` never do."""

from __future__ import annotations

from icelog.domain.namespace import Namespace
from icelog.domain.permissions import ObjectRef
from icelog.domain.role import Role
from icelog.domain.table import Table
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

"""Who may do what: Lakekeeper's permission model, as pure functions (docs/auth.md).

Objects form a tree: server → project → warehouse → namespace (nested) → table / view; roles
hang off their project. A *grant* (Lakekeeper: an assignment) gives one relation on one
object to a user (`oidc~…`) or a role. What a caller may do on an object follows from the
relations their principals hold on the object and on every ancestor (top-down inheritance):

- `ownership` holds everything below it, including handing out grants;
- `modify` ⊇ `select` ⊇ `describe`; `create` ⊇ `describe`; `manage_grants` ⊇ `pass_grants`;
- project `data_admin`: create, modify, select, describe on everything in the project;
  `security_admin`: describe everything and manage its grants, but no data;
  `project_admin`: both; `role_creator`: create roles;
- server `operator`: everything; server `admin`: the server's users and projects (rename,
  delete, grant their admin roles), but no data inside them.

Bottom-up navigation (Lakekeeper's `visible_below`): a grant of a `NAVIGATING` relation on a
table lets its holder find their way to it — the `navigate` capability on each namespace,
the warehouse and the project above it: read their metadata and the warehouse's config,
list them, the lists filtered to the way to what they hold (`navigable` in the list
queries). Whether someone holds such a grant below an object is a read-model question, so
the authorizer adds `navigate` (`NAVIGATION`); `describe` implies it. `navigate` gives
nothing else: no contents beyond that way, no create, no warehouse-wide reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["server", "project", "warehouse", "namespace", "table", "view", "role"]
KINDS: tuple[Kind, ...] = ("server", "project", "warehouse", "namespace", "table", "view", "role")
PrincipalKind = Literal["user", "role"]

_DATA = ("ownership", "pass_grants", "manage_grants", "describe", "select", "modify")

# The relations a grant may carry, per object kind (Lakekeeper's, without tags and
# generic tables, which icelog does not have).
RELATIONS: Mapping[Kind, frozenset[str]] = {
    "server": frozenset({"admin", "operator"}),
    "project": frozenset(
        {
            "project_admin",
            "security_admin",
            "data_admin",
            "role_creator",
            "describe",
            "select",
            "create",
            "modify",
        }
    ),
    "warehouse": frozenset({*_DATA, "create"}),
    "namespace": frozenset({*_DATA, "create"}),
    "table": frozenset(_DATA),
    "view": frozenset(_DATA),
    "role": frozenset({"assignee", "ownership"}),
}

# The relations whose grant, anywhere below a container, lets its holder navigate to it:
# those that let the holder see the object itself (`describe` and what includes it).
NAVIGATING: frozenset[str] = frozenset({"ownership", "modify", "select", "create", "describe"})
# The kinds a grant below can make navigable (containers of the catalog's tree).
NAVIGABLE_KINDS: frozenset[str] = frozenset({"project", "warehouse", "namespace"})
NAVIGATION: frozenset[str] = frozenset({"navigate"})

# What holding a relation somewhere lets its holder do there and below (capabilities).
_EXPANDS: Mapping[str, frozenset[str]] = {
    "ownership": frozenset(
        {"ownership", "modify", "select", "describe", "create", "manage_grants", "pass_grants"}
    ),
    "modify": frozenset({"modify", "select", "describe"}),
    "select": frozenset({"select", "describe"}),
    "create": frozenset({"create", "describe"}),
    "describe": frozenset({"describe"}),
    "manage_grants": frozenset({"manage_grants", "pass_grants"}),
    "pass_grants": frozenset({"pass_grants"}),
    "data_admin": frozenset({"create", "modify", "select", "describe", "grant_data_admin"}),
    "security_admin": frozenset({"describe", "manage_grants", "pass_grants", "create_role"}),
    "project_admin": frozenset(
        {
            "create",
            "modify",
            "select",
            "describe",
            "manage_grants",
            "pass_grants",
            "grant_data_admin",
            "administer",
            "create_role",
        }
    ),
    "role_creator": frozenset({"create_role"}),
    "operator": frozenset(
        {
            "ownership",
            "modify",
            "select",
            "describe",
            "create",
            "manage_grants",
            "pass_grants",
            "grant_data_admin",
            "administer",
            "create_role",
            "server_admin",
        }
    ),
    # The server admin manages users and projects, never the data in them.
    "admin": frozenset({"server_admin", "administer"}),
    "assignee": frozenset(),
}
# Capabilities that stay on the object they are held on (no inheritance downwards).
_LOCAL = frozenset({"administer", "server_admin", "create_role", "grant_data_admin"})
# Server-admin capabilities reach one level down: the projects.
_ADMIN_REACH: Mapping[Kind, frozenset[str]] = {"project": frozenset({"administer"})}


@dataclass(frozen=True, order=True)
class ObjectRef:
    kind: Kind
    id: str


@dataclass(frozen=True, order=True)
class PrincipalRef:
    kind: PrincipalKind
    id: str


SERVER = "server"


def capabilities(
    chain: Sequence[ObjectRef], held: Mapping[ObjectRef, Iterable[str]]
) -> frozenset[str]:
    """What the holder of `held` (relations per object, for all their principals) may do on
    `chain[0]`, whose ancestors follow it in `chain` (the server last)."""
    found: set[str] = set()
    for depth, obj in enumerate(chain):
        for relation in held.get(obj, ()):
            granted = _EXPANDS.get(relation, frozenset())
            if depth == 0 or relation == "operator":  # the operator may do all, everywhere
                found |= granted
                continue
            found |= granted - _LOCAL
            if obj.kind == "server" and relation == "admin" and depth == 1:
                found |= _ADMIN_REACH.get(chain[0].kind, frozenset())
    if "describe" in found:  # who may see everything in an object may find their way in it
        found |= NAVIGATION
    return frozenset(found)


def may_grant(relation: str, caps: frozenset[str], own_relations: frozenset[str]) -> bool:
    """May someone with `caps` on an object write (or delete) a grant of `relation` there?
    `manage_grants` (or ownership) allows any relation; `pass_grants` only relations the
    granter holds there (directly or from above), and never `pass_grants`, `manage_grants`
    or `ownership` themselves; the project's admin roles need the project's administration
    (data_admin delegates its own)."""
    if relation in ("project_admin", "security_admin", "role_creator"):
        return "administer" in caps
    if relation == "data_admin":
        return "administer" in caps or "grant_data_admin" in caps
    if relation in ("admin", "operator"):
        return "server_admin" in caps
    if "manage_grants" in caps:
        return True
    if "pass_grants" in caps:
        passable = relation not in ("pass_grants", "manage_grants", "ownership")
        return passable and relation in caps
    return False


def check_relation(kind: Kind, relation: str) -> None:
    """Refuse a relation the object's kind does not have (a 400)."""
    if relation not in RELATIONS[kind]:
        allowed = ", ".join(sorted(RELATIONS[kind]))
        raise ValueError(f"{kind} has no relation {relation!r} (one of: {allowed})")


def role_closure(
    user_id: str, memberships: Mapping[PrincipalRef, Iterable[str]]
) -> frozenset[PrincipalRef]:
    """The user and every role they are an assignee of, through nested roles:
    `memberships` maps a principal to the role ids it is directly assigned to."""
    start = PrincipalRef("user", user_id)
    seen = {start}
    pending = [start]
    while pending:
        for role_id in memberships.get(pending.pop(), ()):
            role = PrincipalRef("role", role_id)
            if role not in seen:
                seen.add(role)
                pending.append(role)
    return frozenset(seen)


# Lakekeeper's actions per object kind, and the capability each needs there (`grant_<r>`
# actions are decided by `may_grant`). Routes name an action; `/access` lists the allowed.
ACTIONS: Mapping[Kind, Mapping[str, str]] = {
    "server": {
        "create_project": "server_admin", "update_users": "server_admin",
        "delete_users": "server_admin", "list_users": "server_admin",
        "provision_users": "server_admin", "read_assignments": "server_admin",
    },
    # `navigate` (a grant below, or describe): the object itself and lists filtered to the
    # way down (Lakekeeper's `can_get_metadata` and what derives from it); `list_everything`
    # and the rest need describe — what reads a warehouse whole is not filtered.
    "project": {
        "create_warehouse": "create", "delete": "administer", "rename": "administer",
        "get_metadata": "navigate", "list_warehouses": "navigate",
        "include_in_list": "navigate", "create_role": "create_role",
        "list_roles": "describe", "search_roles": "describe", "read_assignments": "pass_grants",
    },
    "warehouse": {
        "create_namespace": "create", "delete": "modify", "modify_storage": "modify",
        "modify_storage_credential": "modify", "get_config": "navigate",
        "get_metadata": "navigate", "list_namespaces": "navigate", "use": "navigate",
        "include_in_list": "navigate", "list_everything": "describe", "rename": "modify",
        "list_deleted_tabulars": "describe", "read_assignments": "pass_grants",
        "change_ownership": "manage_grants", "get_all_tasks": "describe",
        "control_all_tasks": "modify", "set_protection": "modify",
    },
    "namespace": {
        "create_table": "create", "create_view": "create", "create_namespace": "create",
        "delete": "modify", "update_properties": "modify", "get_metadata": "navigate",
        "list_namespaces": "navigate", "list_tables": "navigate", "list_views": "navigate",
        "include_in_list": "navigate", "list_everything": "describe",
        "read_assignments": "pass_grants", "change_ownership": "manage_grants",
        "set_protection": "modify",
        # Functions (ADR 0017) are not objects of their own for grants: their namespace's.
        "list_functions": "describe", "load_function": "describe",
        "create_function": "create", "replace_function": "modify", "drop_function": "modify",
    },
    "table": {
        "drop": "modify", "write_data": "modify", "read_data": "select",
        "get_metadata": "describe", "commit": "modify", "rename": "modify",
        "read_assignments": "pass_grants", "change_ownership": "manage_grants",
        "get_tasks": "describe", "control_tasks": "modify", "set_protection": "modify",
        "undrop": "modify",
    },
    "view": {
        "drop": "modify", "commit": "modify", "get_metadata": "describe", "select": "select",
        "rename": "modify", "read_assignments": "pass_grants",
        "change_ownership": "manage_grants", "set_protection": "modify", "undrop": "modify",
    },
    "role": {
        "assume": "assignee", "can_grant_assignee": "manage_grants",
        "can_change_ownership": "manage_grants", "delete": "ownership", "update": "ownership",
        "read": "describe", "read_assignments": "pass_grants",
    },
}  # fmt: skip
# Which grant_<relation> actions each kind lists in `/access`.
_GRANTABLE: Mapping[Kind, tuple[str, ...]] = {
    "server": ("admin",),
    "project": (
        "role_creator", "create", "describe", "modify", "select", "project_admin",
        "security_admin", "data_admin",
    ),
    "warehouse": ("create", "describe", "modify", "select", "pass_grants", "manage_grants"),
    "namespace": ("create", "describe", "modify", "select", "pass_grants", "manage_grants"),
    "table": ("pass_grants", "manage_grants", "describe", "select", "modify"),
    "view": ("pass_grants", "manage_grants", "describe", "select", "modify"),
    "role": (),
}  # fmt: skip


def allows(kind: Kind, action: str, caps: frozenset[str], own: frozenset[str]) -> bool:
    """May someone with `caps` (and directly holding `own`) do `action` on a `kind`?"""
    if action.startswith("grant_"):
        relation = action.removeprefix("grant_")
        return relation in RELATIONS[kind] and may_grant(relation, caps, own)
    need = ACTIONS[kind].get(action)
    if need is None:
        raise KeyError(f"{kind} has no action {action!r}")
    if need == "assignee":  # a role is assumed by its members only
        return "assignee" in own or "ownership" in caps
    return need in caps


def allowed_actions(kind: Kind, caps: frozenset[str], own: frozenset[str]) -> list[str]:
    """Every action on a `kind` that `caps` allow, as `/access` lists them."""
    found = [action for action in ACTIONS[kind] if allows(kind, action, caps, own)]
    found += [
        f"grant_{relation}"
        for relation in _GRANTABLE[kind]
        if allows(kind, f"grant_{relation}", caps, own)
    ]
    return found


@dataclass(frozen=True)
class DataRights:
    """Which of a table's data actions a caller holds: what storage access the catalog may
    hand them (vended credentials, remote signing). `write` implies access that writes as
    well as reads; neither: no credentials and no signer at all."""

    read: bool
    write: bool

    @property
    def any(self) -> bool:
        return self.read or self.write


ALL_DATA = DataRights(read=True, write=True)
NO_DATA = DataRights(read=False, write=False)


def data_rights_from(caps: frozenset[str], own: frozenset[str] = frozenset()) -> DataRights:
    """`read_data` / `write_data` on a table, for someone with `caps` on it."""
    return DataRights(
        read=allows("table", "read_data", caps, own),
        write=allows("table", "write_data", caps, own),
    )

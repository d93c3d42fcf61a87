"""Decisions: what a principal may do on an object (docs/auth.md).

`Authorizer` is the seam: `GrantAuthorizer` answers from the grants read model in-process;
`AllowAll` (no identity provider) allows everything. An OpenFGA or Cedar authorizer would
implement the same two methods, mapping `ObjectRef`s to its object ids and `capabilities`
to its check API (docs/auth.md, "Another authorizer").
"""

from __future__ import annotations

from typing import Protocol
from uuid import UUID

from icelog.domain.errors import (
    NoSuchNamespaceError,
    NoSuchProjectError,
    NoSuchWarehouseError,
    NotFoundError,
)
from icelog.domain.identifiers import NIL_UUID, SERVER_ID, NamespaceName, namespace_id
from icelog.domain.permissions import (
    KINDS,
    ObjectRef,
    PrincipalRef,
    capabilities,
    role_closure,
)
from icelog.projections.queries import CatalogQueries

SERVER = ObjectRef("server", str(SERVER_ID))
EVERYTHING = frozenset(
    {"ownership", "modify", "select", "describe", "create", "manage_grants", "pass_grants",
     "grant_data_admin", "administer", "create_role", "server_admin"}
)  # fmt: skip


class Authorizer(Protocol):
    enabled: bool

    def principals(self, user_id: str) -> frozenset[PrincipalRef]: ...

    def decide(
        self, principals: frozenset[PrincipalRef], obj: ObjectRef
    ) -> tuple[frozenset[str], frozenset[str]]:
        """(capabilities on `obj`, relations held directly on it)."""
        ...


class AllowAll:
    """No identity provider: every caller may do everything (and says so in /info)."""

    enabled = False

    def principals(self, user_id: str) -> frozenset[PrincipalRef]:
        return frozenset({PrincipalRef("user", user_id)})

    def decide(
        self, principals: frozenset[PrincipalRef], obj: ObjectRef
    ) -> tuple[frozenset[str], frozenset[str]]:
        return EVERYTHING, frozenset()


class GrantSource(Protocol):
    def grants_held(self, principal_ids: list[str]) -> list[tuple[str, str, str, str]]:
        """(object kind, object id, relation, principal id) of every grant they hold."""
        ...


class GrantAuthorizer:
    """From the grants read model: the caller's roles (nested), then the relations they hold
    on the object and its ancestors, in one query each. `grants`: where grants are read
    (default the live read model; `GrantsAsOf` for a past moment)."""

    enabled = True

    def __init__(self, queries: CatalogQueries, grants: GrantSource | None = None) -> None:
        self.queries = queries
        self.grants: GrantSource = grants if grants is not None else queries

    def principals(self, user_id: str) -> frozenset[PrincipalRef]:
        memberships: dict[PrincipalRef, list[str]] = {}
        pending = [user_id]
        seen: set[str] = set()
        while pending:  # one query per level of role nesting
            rows = self.grants.grants_held(pending)
            seen.update(pending)
            pending = []
            for kind, object_id, relation, principal_id in rows:
                if kind == "role" and relation == "assignee":
                    who = PrincipalRef("user" if principal_id == user_id else "role", principal_id)
                    memberships.setdefault(who, []).append(object_id)
                    if object_id not in seen:
                        pending.append(object_id)
        return role_closure(user_id, memberships)

    def decide(
        self, principals: frozenset[PrincipalRef], obj: ObjectRef
    ) -> tuple[frozenset[str], frozenset[str]]:
        chain = self.chain(obj)
        ids = {o.id for o in chain}
        held: dict[ObjectRef, set[str]] = {}
        for kind, object_id, relation, _ in self.grants.grants_held([p.id for p in principals]):
            if object_id in ids and kind in KINDS:
                held.setdefault(ObjectRef(kind, object_id), set()).add(relation)
        own = frozenset(held.get(obj, set()))
        return capabilities(chain, held), own

    def chain(self, obj: ObjectRef) -> list[ObjectRef]:
        """`obj` and its ancestors up to the server (NotFoundError when it is gone)."""
        return ancestors(self.queries, obj)


def ancestors(queries: CatalogQueries, obj: ObjectRef) -> list[ObjectRef]:
    if obj.kind == "server":
        return [SERVER]
    if obj.kind == "project":
        if obj.id != str(NIL_UUID) and queries.project(obj.id) is None:
            raise NoSuchProjectError(f"Project does not exist: {obj.id}")
        return [obj, SERVER]
    if obj.kind == "role":
        role = queries.role(obj.id)
        if role is None:
            raise NotFoundError(f"Role does not exist: {obj.id}")
        return [obj, ObjectRef("project", role["project-id"]), SERVER]
    if obj.kind == "warehouse":
        return [obj, *_warehouse_up(queries, obj.id)[1:]]
    if obj.kind == "namespace":
        found = queries.namespace_by_id(obj.id)
        if found is None:
            raise NoSuchNamespaceError(f"Namespace does not exist: {obj.id}")
        return _namespace_up(queries, *found)
    found_tabular = queries.tabular_by_id(obj.id)
    if found_tabular is None or found_tabular[3] != obj.kind:
        raise NotFoundError(f"{obj.kind.capitalize()} does not exist: {obj.id}")
    warehouse_id, namespace, _, _ = found_tabular
    return [obj, *_namespace_up(queries, warehouse_id, namespace)]


def namespace_chain(
    queries: CatalogQueries, warehouse_id: str, namespace: NamespaceName
) -> list[ObjectRef]:
    """A namespace (by name) and its ancestors, without a lookup per level: namespace ids
    derive from (warehouse, levels)."""
    return _namespace_up(queries, warehouse_id, namespace)


def _namespace_up(
    queries: CatalogQueries, warehouse_id: str, namespace: NamespaceName
) -> list[ObjectRef]:
    levels = namespace.levels
    found = [
        ObjectRef("namespace", str(namespace_id(UUID(warehouse_id), NamespaceName(levels[:n]))))
        for n in range(len(levels), 0, -1)
    ]
    return [*found, *_warehouse_up(queries, warehouse_id)]


def _warehouse_up(queries: CatalogQueries, warehouse_id: str) -> list[ObjectRef]:
    warehouse = queries.warehouse(warehouse_id)
    if warehouse is None:
        raise NoSuchWarehouseError(f"Warehouse does not exist: {warehouse_id}")
    project = ObjectRef("project", str(warehouse["project-id"]))
    return [ObjectRef("warehouse", warehouse_id), project, SERVER]

"""Which right each route needs, on which object (docs/auth.md, "Permissions").

A guard runs after the request's body and query are validated and before its handler, in
the threadpool (it reads the grants read model). It raises 403 when the caller may see the
object but not do the action, and 404 — the object's own "does not exist" error — when the
caller may not even see it, so that nobody learns what exists in a project they have no
rights in. Without an identity provider no guard runs (`AllowAll`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast
from uuid import UUID

from starlette.requests import Request

from icelog.api.auth.authorizer import Authorizer
from icelog.api.auth.principal import Principal
from icelog.domain.errors import (
    ForbiddenError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    NoSuchWarehouseError,
    NotFoundError,
)
from icelog.domain.identifiers import NamespaceName, TabularName, namespace_id
from icelog.domain.permissions import ObjectRef, PrincipalRef, allows

Guard = Callable[[Request, Any, Any], None]

_HIDDEN: dict[str, type[NotFoundError]] = {
    "warehouse": NoSuchWarehouseError,
    "namespace": NoSuchNamespaceError,
    "table": NoSuchTableError,
    "view": NoSuchViewError,
}


def authorizer(request: Request) -> Authorizer:
    return cast(Authorizer, request.app.state.authorizer)


def principals(request: Request) -> frozenset[PrincipalRef]:
    """The caller and their roles, once per request."""
    cached = getattr(request.state, "principals", None)
    if cached is not None:
        return cast(frozenset[PrincipalRef], cached)
    principal = getattr(request.state, "principal", None)
    user = principal.user_id if isinstance(principal, Principal) else "anonymous"
    found = authorizer(request).principals(user)
    request.state.principals = found
    return found


def require(request: Request, obj: ObjectRef, action: str, what: str = "") -> frozenset[str]:
    """The caller's capabilities on `obj`, when they allow `action`; else 403 or 404."""
    caps, own = authorizer(request).decide(principals(request), obj)
    if allows(obj.kind, action, caps, own):
        return caps
    if "describe" not in caps and obj.kind in _HIDDEN:
        raise _HIDDEN[obj.kind](f"{obj.kind.capitalize()} does not exist: {what or obj.id}")
    raise ForbiddenError(f"Not allowed to {action} on {obj.kind} {what or obj.id}")


# -- the objects a catalog request names -------------------------------------------------------
def _services(request: Request) -> Any:
    return request.app.state.services


def warehouse_of(request: Request) -> ObjectRef:
    prefix = request.path_params.get("prefix")
    wid = _services(request).warehouse_for_prefix(str(prefix) if prefix is not None else None)
    return ObjectRef("warehouse", str(wid))


def namespace_ref(request: Request, namespace: NamespaceName) -> ObjectRef:
    wid = UUID(warehouse_of(request).id)
    return ObjectRef("namespace", str(namespace_id(wid, namespace)))


def tabular_ref(request: Request, name: TabularName, kind: str) -> ObjectRef:
    warehouse = warehouse_of(request)
    found = _services(request).primary.tabular_id(warehouse.id, name.namespace, name.name)
    if found is None or found[1] != kind:
        raise _HIDDEN[kind](f"{kind.capitalize()} does not exist: {name.dotted}")
    return ObjectRef("table" if kind == "table" else "view", found[0])


# -- guards of the catalog routes --------------------------------------------------------------
def _path_namespace(request: Request) -> NamespaceName:
    from icelog.api.http import namespace_param  # noqa: PLC0415 - api.http imports models

    return namespace_param(request)


def _path_tabular(request: Request, param: str) -> TabularName:
    from icelog.api.http import path_param  # noqa: PLC0415

    return TabularName(_path_namespace(request), path_param(request, param))


def on_warehouse(action: str) -> Guard:
    def guard(request: Request, body: Any, query: Any) -> None:
        require(request, warehouse_of(request), action)

    return guard


def on_namespace(action: str) -> Guard:
    def guard(request: Request, body: Any, query: Any) -> None:
        namespace = _path_namespace(request)
        require(request, namespace_ref(request, namespace), action, namespace.dotted)

    return guard


def on_new_namespace(request: Request, body: Any, query: Any) -> None:
    """Creating `a.b.c` needs `create_namespace` on `a.b` (on the warehouse for `a`)."""
    levels = tuple(body.namespace)
    if len(levels) == 1:
        require(request, warehouse_of(request), "create_namespace")
        return
    parent = NamespaceName(levels[:-1])
    require(request, namespace_ref(request, parent), "create_namespace", parent.dotted)


def on_tabular(kind: str, action: str, param: str) -> Guard:
    def guard(request: Request, body: Any, query: Any) -> None:
        name = _path_tabular(request, param)
        caps = require(request, tabular_ref(request, name, kind), action, name.dotted)
        request.state.caps = caps  # what vended credentials may do (load, credentials)

    return guard


def on_rename(kind: str) -> Guard:
    def guard(request: Request, body: Any, query: Any) -> None:
        source = TabularName(NamespaceName(tuple(body.source.namespace)), body.source.name)
        require(request, tabular_ref(request, source, kind), "rename", source.dotted)
        target = NamespaceName(tuple(body.destination.namespace))
        require(request, namespace_ref(request, target), f"create_{kind}", target.dotted)

    return guard


def on_transaction(request: Request, body: Any, query: Any) -> None:
    for change in body.table_changes:
        name = TabularName(
            NamespaceName(tuple(change.identifier.namespace)), change.identifier.name
        )
        require(request, tabular_ref(request, name, "table"), "commit", name.dotted)


def on_sign(request: Request, body: Any, query: Any) -> None:
    """Reads (GET, HEAD) need `read_data`, anything else `write_data`."""
    action = "read_data" if body.method in ("GET", "HEAD") else "write_data"
    name = _path_tabular(request, "table")
    require(request, tabular_ref(request, name, "table"), action, name.dotted)


def on_warehouse_sign(request: Request, body: Any, query: Any) -> None:
    """The signer's warehouse-wide path names no table: rights on the whole warehouse."""
    action = "read_data" if body.method in ("GET", "HEAD") else "write_data"
    caps, _ = authorizer(request).decide(principals(request), warehouse_of(request))
    need = "select" if action == "read_data" else "modify"
    if need not in caps:
        raise ForbiddenError(f"Not allowed to {action} in this warehouse (sign at the table)")


def on_list(kind: str) -> Guard:
    """Lists are filtered to what the caller may see (`visible_to` in the list query) unless
    they may describe the container; see `list_filter`."""

    def guard(request: Request, body: Any, query: Any) -> None:
        if kind == "namespace" and getattr(query, "parent", None):
            from icelog.api.http import namespace_from_query  # noqa: PLC0415

            container = namespace_ref(request, namespace_from_query(query.parent))
        elif kind == "namespace":
            container = warehouse_of(request)
        else:
            container = namespace_ref(request, _path_namespace(request))
        caps, _ = authorizer(request).decide(principals(request), container)
        if "describe" not in caps:
            request.state.visible_to = sorted(p.id for p in principals(request))
            request.state.hidden = container

    return guard


def list_filter(request: Request) -> list[str] | None:
    """The principal ids a list is filtered to, or None: everything."""
    found = getattr(request.state, "visible_to", None)
    return cast(list[str] | None, found)


def hide_empty(request: Request, items: list[Any]) -> None:
    """A filtered list that came back empty: the container does not exist for this caller."""
    hidden = getattr(request.state, "hidden", None)
    if hidden is not None and not items and not getattr(request.state, "page_token", None):
        raise _HIDDEN[hidden.kind](f"{hidden.kind.capitalize()} does not exist")


def may_write_data(request: Request) -> bool:
    """Vend read-write storage credentials? Without authorization: yes."""
    caps = getattr(request.state, "caps", None)
    return caps is None or "modify" in caps


def places_held(request: Request) -> tuple[set[str], set[str]]:
    """(project ids, warehouse ids) the caller holds a grant in or below: what lists of
    projects and warehouses show besides what the caller may describe."""
    services = _services(request)
    projects: set[str] = set()
    warehouses: set[str] = set()
    for kind, object_id, _, _ in services.primary.grants_held([p.id for p in principals(request)]):
        warehouse_id = None
        if kind == "project":
            projects.add(object_id)
        elif kind == "warehouse":
            warehouse_id = object_id
        elif kind == "namespace":
            found = services.primary.namespace_by_id(object_id)
            warehouse_id = found[0] if found else None
        elif kind in ("table", "view"):
            tabular = services.primary.tabular_by_id(object_id)
            warehouse_id = tabular[0] if tabular else None
        if warehouse_id is not None:
            warehouses.add(warehouse_id)
            row = services.primary.warehouse(warehouse_id)
            if row is not None:
                projects.add(str(row["project-id"]))
    return projects, warehouses


def visible(request: Request, kind: str, ids: list[str]) -> set[str]:
    """Which of these projects or warehouses the caller may see (all without a provider)."""
    if not authorizer(request).enabled:
        return set(ids)
    projects, warehouses = places_held(request)
    held = projects if kind == "project" else warehouses
    found = set()
    for object_id in ids:
        obj = ObjectRef("project" if kind == "project" else "warehouse", object_id)
        if (
            object_id in held
            or "describe" in authorizer(request).decide(principals(request), obj)[0]
        ):
            found.add(object_id)
    return found

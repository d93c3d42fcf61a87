"""Namespace routes of the Iceberg REST API."""

from __future__ import annotations

from uuid import UUID

from starlette.requests import Request

from icelog.api.auth.guards import list_filter
from icelog.api.http import context, namespace_from_query, namespace_param, page_of
from icelog.api.models.catalog import (
    CreateNamespaceRequest,
    CreateNamespaceResponse,
    DropNamespaceQuery,
    GetNamespaceResponse,
    ListNamespacesQuery,
    ListNamespacesResponse,
    UpdateNamespacePropertiesRequest,
    UpdateNamespacePropertiesResponse,
)
from icelog.api.routes import prefix, services
from icelog.api.services import Services
from icelog.domain.context import RequestContext
from icelog.domain.errors import NoSuchNamespaceError
from icelog.domain.idempotency import deferred_landing
from icelog.domain.identifiers import NamespaceName, TabularName
from icelog.domain.protection import ProtectedError


def list_namespaces(request: Request, query: ListNamespacesQuery) -> ListNamespacesResponse:
    svc = services(request)
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    parent = namespace_from_query(query.parent) if query.parent else None
    if parent is not None and not svc.queries.namespace_exists(warehouse_id, parent):
        raise NoSuchNamespaceError(f"Namespace does not exist: {parent.dotted}")
    token, size = page_of(query)
    names, next_token = svc.queries.list_namespaces(
        warehouse_id, parent, token, size, visible_to=list_filter(request)
    )
    return ListNamespacesResponse(namespaces=names, next_page_token=next_token)


def create_namespace(request: Request, body: CreateNamespaceRequest) -> CreateNamespaceResponse:
    svc = services(request)
    name = NamespaceName(tuple(body.namespace))
    warehouse_id = svc.warehouse_for_prefix(prefix(request))
    ns = svc.catalog.namespaces.create_namespace(
        context(request), warehouse_id, name, dict(body.properties or {})
    )
    return CreateNamespaceResponse(namespace=name.as_list(), properties=ns.properties)


def load_namespace(request: Request) -> GetNamespaceResponse | None:
    svc = services(request)
    name = namespace_param(request)
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    properties = svc.queries.namespace_properties(warehouse_id, name)
    if properties is None:
        raise NoSuchNamespaceError(f"Namespace does not exist: {name.dotted}")
    if request.method == "HEAD":
        return None
    return GetNamespaceResponse(namespace=name.as_list(), properties=properties)


def drop_namespace(request: Request, query: DropNamespaceQuery) -> None:
    """dropNamespace; with the extension `?recursive=true` (as Lakekeeper), everything inside
    is dropped first, each child with its own events."""
    svc = services(request)
    name = namespace_param(request)
    warehouse_id = svc.warehouse_for_prefix(prefix(request))
    if query.recursive:
        drop_recursively(svc, context(request), warehouse_id, name, purge=query.purge)
    else:
        svc.catalog.namespaces.drop_namespace(context(request), warehouse_id, name)


def drop_recursively(
    svc: Services, ctx: RequestContext, warehouse_id: UUID, name: NamespaceName, *, purge: bool
) -> None:
    """Cascade drop: refuse up front if anything inside is protected, then drop the tree
    leaves first. Each drop is its own append, so the log shows every child's drop.

    The namespace goes away, so nothing inside can wait for undrop: drops are final even
    in a soft-delete warehouse, and soft-deleted tabulars inside expire now (their files
    purged when this drop or their own drop asked for it)."""
    tree = _subtree(svc, str(warehouse_id), name)
    for ns in tree:
        for kind in ("table", "view"):
            for child in _tabulars(svc, str(warehouse_id), ns, kind):
                if svc.catalog.lifecycle.tabular_protected(
                    warehouse_id, TabularName(ns, child), kind
                ):
                    raise ProtectedError(f"{kind.capitalize()} {ns.dotted}.{child} is protected")
        if svc.catalog.namespaces.namespace_protected(warehouse_id, ns):
            raise ProtectedError(f"Namespace {ns.dotted} is protected")
    # One append per object; an Idempotency-Key lands with the last one, the root's drop,
    # so that a retry after a failure half-way drops what is left.
    with deferred_landing():
        for ns in reversed(tree):  # children before parents
            for child in _tabulars(svc, str(warehouse_id), ns, "table"):
                svc.catalog.lifecycle.drop_table(
                    ctx, warehouse_id, TabularName(ns, child), purge=purge, final=True
                )
            for child in _tabulars(svc, str(warehouse_id), ns, "view"):
                svc.catalog.lifecycle.drop_view(
                    ctx, warehouse_id, TabularName(ns, child), final=True
                )
            for function in svc.queries.function_names(str(warehouse_id), ns):
                svc.catalog.functions.drop_function(ctx, warehouse_id, TabularName(ns, function))
            for tabular_id, _kind in svc.queries.deleted_tabular_ids(str(warehouse_id), ns):
                svc.catalog.lifecycle.expire_now(ctx, warehouse_id, UUID(tabular_id), purge=purge)
            if ns != name:
                svc.catalog.namespaces.drop_namespace(ctx, warehouse_id, ns)
    svc.catalog.namespaces.drop_namespace(ctx, warehouse_id, name)


def _subtree(svc: Services, warehouse_id: str, root: NamespaceName) -> list[NamespaceName]:
    if not svc.queries.namespace_exists(warehouse_id, root):
        raise NoSuchNamespaceError(f"Namespace does not exist: {root.dotted}")
    found, pending = [root], [root]
    while pending:
        children, _ = svc.queries.list_namespaces(warehouse_id, pending.pop(), None, None)
        for levels in children:
            child = NamespaceName(tuple(levels))
            found.append(child)
            pending.append(child)
    return found


def _tabulars(svc: Services, warehouse_id: str, ns: NamespaceName, kind: str) -> list[str]:
    names, _ = svc.queries.list_tabulars(warehouse_id, ns, kind, None, None)
    return names


def update_properties(
    request: Request, body: UpdateNamespacePropertiesRequest
) -> UpdateNamespacePropertiesResponse:
    svc = services(request)
    updated, removed, missing = svc.catalog.namespaces.update_namespace_properties(
        context(request),
        svc.warehouse_for_prefix(prefix(request)),
        namespace_param(request),
        dict(body.updates or {}),
        list(body.removals or []),
    )
    return UpdateNamespacePropertiesResponse(updated=updated, removed=removed, missing=missing)

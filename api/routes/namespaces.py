"""Namespace routes of the Iceberg REST API."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from starlette.requests import Request
from starlette.responses import Response

from icelog.api.http import (
    context,
    json_response,
    namespace_from_json,
    namespace_from_query,
    namespace_param,
    no_content,
    page_params,
    require_object,
)
from icelog.api.routes import prefix, services
from icelog.api.services import Services
from icelog.domain.context import RequestContext
from icelog.domain.errors import BadRequestError, NoSuchNamespaceError
from icelog.domain.idempotency import deferred_landing
from icelog.domain.identifiers import NamespaceName, TabularName
from icelog.domain.properties import require_string_map
from icelog.domain.protection import ProtectedError


def list_namespaces(request: Request, _body: Any) -> Response:
    svc = services(request)
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    raw_parent = request.query_params.get("parent") or None
    parent = namespace_from_query(raw_parent) if raw_parent else None
    if parent is not None and not svc.queries.namespace_exists(warehouse_id, parent):
        raise NoSuchNamespaceError(f"Namespace does not exist: {parent.dotted}")
    token, size = page_params(request)
    names, next_token = svc.queries.list_namespaces(warehouse_id, parent, token, size)
    payload: dict[str, Any] = {"namespaces": names}
    if next_token is not None:
        payload["next-page-token"] = next_token
    return json_response(payload)


def create_namespace(request: Request, body: Any) -> Response:
    svc = services(request)
    data = require_object(body, "CreateNamespaceRequest")
    name = namespace_from_json(data.get("namespace"))
    properties = require_string_map(data.get("properties"), "properties")
    warehouse_id = svc.warehouse_for_prefix(prefix(request))
    ns = svc.catalog.create_namespace(context(request), warehouse_id, name, properties)
    return json_response({"namespace": name.as_list(), "properties": ns.properties})


def load_namespace(request: Request, _body: Any) -> Response:
    svc = services(request)
    name = namespace_param(request)
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    properties = svc.queries.namespace_properties(warehouse_id, name)
    if properties is None:
        raise NoSuchNamespaceError(f"Namespace does not exist: {name.dotted}")
    if request.method == "HEAD":
        return no_content()
    return json_response({"namespace": name.as_list(), "properties": properties})


def drop_namespace(request: Request, _body: Any) -> Response:
    """dropNamespace; with the extension `?recursive=true` (as Lakekeeper), everything inside
    is dropped first, each child with its own events."""
    svc = services(request)
    name = namespace_param(request)
    warehouse_id = svc.warehouse_for_prefix(prefix(request))
    if _flag(request, "recursive"):
        drop_recursively(svc, context(request), warehouse_id, name, purge=_flag(request, "purge"))
    else:
        svc.catalog.drop_namespace(context(request), warehouse_id, name)
    return no_content()


def _flag(request: Request, key: str) -> bool:
    raw = (request.query_params.get(key) or "false").lower()
    if raw not in ("true", "false"):
        raise BadRequestError(f"{key} must be true or false")
    return raw == "true"


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
                if svc.catalog.tabular_protected(warehouse_id, TabularName(ns, child), kind):
                    raise ProtectedError(f"{kind.capitalize()} {ns.dotted}.{child} is protected")
        if svc.catalog.namespace_protected(warehouse_id, ns):
            raise ProtectedError(f"Namespace {ns.dotted} is protected")
    # One append per object; an Idempotency-Key lands with the last one, the root's drop,
    # so that a retry after a failure half-way drops what is left.
    with deferred_landing():
        for ns in reversed(tree):  # children before parents
            for child in _tabulars(svc, str(warehouse_id), ns, "table"):
                svc.catalog.drop_table(
                    ctx, warehouse_id, TabularName(ns, child), purge=purge, final=True
                )
            for child in _tabulars(svc, str(warehouse_id), ns, "view"):
                svc.catalog.drop_view(ctx, warehouse_id, TabularName(ns, child), final=True)
            for tabular_id, _kind in svc.queries.deleted_tabular_ids(str(warehouse_id), ns):
                svc.catalog.expire_now(ctx, warehouse_id, UUID(tabular_id), purge=purge)
            if ns != name:
                svc.catalog.drop_namespace(ctx, warehouse_id, ns)
    svc.catalog.drop_namespace(ctx, warehouse_id, name)


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


def update_properties(request: Request, body: Any) -> Response:
    svc = services(request)
    name = namespace_param(request)
    data = require_object(body, "UpdateNamespacePropertiesRequest")
    updates = require_string_map(data.get("updates"), "updates")
    removals = data.get("removals") or []
    if not isinstance(removals, list) or not all(isinstance(k, str) for k in removals):
        raise BadRequestError("removals must be an array of strings")
    updated, removed, missing = svc.catalog.update_namespace_properties(
        context(request), svc.warehouse_for_prefix(prefix(request)), name, updates, removals
    )
    return json_response({"updated": updated, "removed": removed, "missing": missing})

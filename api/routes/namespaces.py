"""Namespace routes of the Iceberg REST API."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from api.http import (
    context,
    json_response,
    namespace_from_json,
    namespace_from_query,
    namespace_param,
    no_content,
    page_params,
    require_object,
)
from api.routes import prefix, services
from domain.errors import BadRequestError, NoSuchNamespaceError
from domain.properties import require_string_map


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
    svc = services(request)
    name = namespace_param(request)
    svc.catalog.drop_namespace(context(request), svc.warehouse_for_prefix(prefix(request)), name)
    return no_content()


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

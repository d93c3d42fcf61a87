"""View routes of the Iceberg REST API (views share the tables' identifier space)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from icelog.api.http import (
    context,
    json_response,
    namespace_param,
    no_content,
    path_param,
    raw_json_response,
    require_object,
)
from icelog.api.routes import prefix, services
from icelog.api.routes.tables import identifier_from_json, list_tabulars
from icelog.commands.catalog import TableState
from icelog.domain.errors import BadRequestError, NoSuchViewError
from icelog.domain.identifiers import TabularName
from icelog.domain.properties import require_string_map


def _name(request: Request) -> TabularName:
    return TabularName(namespace_param(request), path_param(request, "view"))


def _result(state: TableState) -> dict[str, Any]:
    return {"metadata-location": state.metadata_location, "metadata": state.metadata, "config": {}}


def list_views(request: Request, _body: Any) -> Response:
    return list_tabulars(request, "view")


def create_view(request: Request, body: Any) -> Response:
    svc = services(request)
    ns = namespace_param(request)
    data = require_object(body, "CreateViewRequest")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequestError("CreateViewRequest.name must be a non-empty string")
    schema = data.get("schema")
    version = data.get("view-version")
    location = data.get("location")
    if not isinstance(schema, dict):
        raise BadRequestError("CreateViewRequest.schema must be an object")
    if not isinstance(version, dict):
        raise BadRequestError("CreateViewRequest.view-version must be an object")
    if location is not None and not isinstance(location, str):
        raise BadRequestError("location must be a string")
    state = svc.catalog.create_view(
        context(request),
        svc.warehouse_for_prefix(prefix(request)),
        TabularName(ns, name),
        schema=schema,
        view_version=version,
        location=location or None,
        properties=require_string_map(data.get("properties"), "properties"),
    )
    return json_response(_result(state))


async def load_view(request: Request, _body: Any) -> Response:
    svc = services(request)
    name = _name(request)
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    row = await svc.reader.load_tabular(warehouse_id, name.namespace, name.name, "view")
    if row is None:
        raise NoSuchViewError(f"View does not exist: {name.dotted}")
    if request.method == "HEAD":
        return no_content()
    etag = f'"{row.id}-{row.version}"'
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers={"ETag": etag})
    body = (
        b'{"metadata-location":'
        + orjson.dumps(row.metadata_location)
        + b',"metadata":'
        + row.metadata
        + b',"config":{}}'
    )
    return raw_json_response(body, headers={"ETag": etag})


def replace_view(request: Request, body: Any) -> Response:
    svc = services(request)
    name = _name(request)
    data = require_object(body, "CommitViewRequest")
    identifier = data.get("identifier")
    if identifier is not None and identifier_from_json(identifier, "identifier") != name:
        raise BadRequestError("identifier in the body does not match the request path")
    requirements = data.get("requirements") or []
    updates = data.get("updates")
    if not isinstance(requirements, list) or not all(isinstance(r, dict) for r in requirements):
        raise BadRequestError("requirements must be an array of objects")
    if not isinstance(updates, list) or not all(isinstance(u, dict) for u in updates):
        raise BadRequestError("updates must be an array of objects")
    state = svc.catalog.replace_view(
        context(request), svc.warehouse_for_prefix(prefix(request)), name, requirements, updates
    )
    return json_response(_result(state))


def drop_view(request: Request, _body: Any) -> Response:
    svc = services(request)
    svc.catalog.drop_view(
        context(request), svc.warehouse_for_prefix(prefix(request)), _name(request)
    )
    return no_content()


def rename_view(request: Request, body: Any) -> Response:
    svc = services(request)
    data = require_object(body, "RenameTableRequest")
    svc.catalog.rename_view(
        context(request),
        svc.warehouse_for_prefix(prefix(request)),
        identifier_from_json(data.get("source"), "source"),
        identifier_from_json(data.get("destination"), "destination"),
    )
    return no_content()


def register_view(request: Request, body: Any) -> Response:
    svc = services(request)
    ns = namespace_param(request)
    data = require_object(body, "RegisterViewRequest")
    name = data.get("name")
    location = data.get("metadata-location")
    if not isinstance(name, str) or not name:
        raise BadRequestError("RegisterViewRequest.name must be a non-empty string")
    if not isinstance(location, str) or not location:
        raise BadRequestError("RegisterViewRequest.metadata-location must be a string")
    state = svc.catalog.register_view(
        context(request), svc.warehouse_for_prefix(prefix(request)), TabularName(ns, name), location
    )
    return json_response(_result(state))

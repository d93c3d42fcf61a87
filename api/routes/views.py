"""View routes of the Iceberg REST API (views share the tables' identifier space)."""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response

from icelog.api.http import context, namespace_param, path_param, raw_json_response
from icelog.api.models.catalog import (
    CommitViewRequest,
    CreateViewRequest,
    ListTablesResponse,
    PageQuery,
    RegisterViewRequest,
    RenameTableRequest,
    ViewResult,
)
from icelog.api.routes import prefix, services
from icelog.api.routes.tables import change_request, list_tabulars, rename_tabular
from icelog.commands.catalog import TableState
from icelog.domain.errors import NoSuchViewError
from icelog.domain.identifiers import TabularName


def _name(request: Request) -> TabularName:
    return TabularName(namespace_param(request), path_param(request, "view"))


def _result(state: TableState) -> ViewResult:
    assert state.metadata_location is not None
    return ViewResult(metadata_location=state.metadata_location, metadata=state.metadata, config={})


def list_views(request: Request, query: PageQuery) -> ListTablesResponse:
    return list_tabulars(request, "view", query)


def create_view(request: Request, body: CreateViewRequest) -> ViewResult:
    svc = services(request)
    state = svc.catalog.views.create_view(
        context(request),
        svc.warehouse_for_prefix(prefix(request)),
        TabularName(namespace_param(request), body.name),
        schema=body.view_schema,
        view_version=body.view_version,
        location=body.location or None,
        properties=dict(body.properties or {}),
    )
    return _result(state)


async def load_view(request: Request) -> Response:
    svc = services(request)
    name = _name(request)
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    row = await svc.reader.load_tabular(warehouse_id, name.namespace, name.name, "view")
    if row is None:
        raise NoSuchViewError(f"View does not exist: {name.dotted}")
    if request.method == "HEAD":
        return Response(status_code=204)
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


def replace_view(request: Request, body: CommitViewRequest) -> ViewResult:
    state = services(request).catalog.views.replace_view(
        change_request(request, _name(request), body)
    )
    return _result(state)


def drop_view(request: Request) -> None:
    svc = services(request)
    svc.catalog.lifecycle.drop_view(
        context(request), svc.warehouse_for_prefix(prefix(request)), _name(request)
    )


def rename_view(request: Request, body: RenameTableRequest) -> None:
    rename_tabular(request, body, "view")


def register_view(request: Request, body: RegisterViewRequest) -> ViewResult:
    svc = services(request)
    state = svc.catalog.views.register_view(
        context(request),
        svc.warehouse_for_prefix(prefix(request)),
        TabularName(namespace_param(request), body.name),
        body.metadata_location,
    )
    return _result(state)

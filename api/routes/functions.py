"""Functions (Iceberg UDFs, ADR 0017): listFunctions and loadFunction of the Iceberg REST
API (main's spec), answered from the read model; create, replace and drop through the
management API, since the spec has no write route."""

from __future__ import annotations

from uuid import UUID

import orjson
from starlette.requests import Request
from starlette.responses import Response

from icelog.api.http import context, namespace_param, page_of, parse_uuid, path_param
from icelog.api.models.catalog import PageQuery
from icelog.api.models.functions import (
    CreateFunctionRequest,
    ListFunctionsResponse,
    ReplaceFunctionRequest,
)
from icelog.api.routes import prefix, services
from icelog.commands.functions import FunctionState
from icelog.domain.errors import NoSuchFunctionError, NoSuchNamespaceError
from icelog.domain.identifiers import NamespaceName, TabularName, reject_control_characters


def _load_result(metadata_location: str, document: bytes) -> bytes:
    return (
        b'{"metadata-location":'
        + orjson.dumps(metadata_location)
        + b',"metadata":'
        + (document)
        + b"}"
    )


# -- the catalog's reads ----------------------------------------------------------------------
def list_functions(request: Request, query: PageQuery) -> ListFunctionsResponse:
    svc = services(request)
    ns = namespace_param(request)
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    if not svc.queries.namespace_exists(warehouse_id, ns):
        raise NoSuchNamespaceError(f"Namespace does not exist: {ns.dotted}")
    token, size = page_of(query)
    names, next_token = svc.queries.list_functions(warehouse_id, ns, token, size)
    return ListFunctionsResponse(
        identifiers=[[*ns.levels, name] for name in names], next_page_token=next_token
    )


def load_function(request: Request) -> Response:
    svc = services(request)
    ns = namespace_param(request)
    name = TabularName(ns, path_param(request, "function"))
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    row = svc.queries.load_function(warehouse_id, ns, name.name)
    if row is None:
        if not svc.queries.namespace_exists(warehouse_id, ns):
            raise NoSuchNamespaceError(f"Namespace does not exist: {ns.dotted}")
        raise NoSuchFunctionError(f"Function does not exist: {name.dotted}")
    return Response(
        _load_result(row.metadata_location, row.metadata), media_type="application/json"
    )


# -- the management API's writes -------------------------------------------------------------
def _namespace(request: Request) -> tuple[UUID, NamespaceName]:
    svc = services(request)
    warehouse_id = parse_uuid(request.path_params["warehouse_id"], "warehouse id")
    ns_id = parse_uuid(request.path_params["namespace_id"], "namespace id")
    return warehouse_id, svc.catalog.namespaces.namespace_name(warehouse_id, ns_id)


def _answer(state: FunctionState) -> Response:
    document = orjson.dumps(state.metadata)
    return Response(_load_result(state.metadata_location, document), media_type="application/json")


def create_function(request: Request, body: CreateFunctionRequest) -> Response:
    warehouse_id, ns = _namespace(request)
    metadata = None
    if body.metadata is not None:
        metadata = body.metadata.model_dump(by_alias=True, exclude_none=True)
    state = services(request).catalog.functions.create_function(
        context(request),
        warehouse_id,
        TabularName(ns, reject_control_characters(body.name, "A function name")),
        definitions=None if body.definitions is None else [d.as_change() for d in body.definitions],
        doc=body.doc,
        properties=dict(body.properties or {}),
        secure=body.secure,
        metadata=metadata,
    )
    return _answer(state)


def _function_name(request: Request, ns: NamespaceName) -> TabularName:
    return TabularName(ns, str(request.path_params["function"]))


def replace_function(request: Request, body: ReplaceFunctionRequest) -> Response:
    warehouse_id, ns = _namespace(request)
    state = services(request).catalog.functions.replace_function(
        context(request),
        warehouse_id,
        _function_name(request, ns),
        body.as_changes(),
        expected_metadata_location=body.expected_metadata_location,
    )
    return _answer(state)


def drop_function(request: Request) -> None:
    warehouse_id, ns = _namespace(request)
    services(request).catalog.functions.drop_function(
        context(request), warehouse_id, _function_name(request, ns)
    )

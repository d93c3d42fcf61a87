"""Table routes of the Iceberg REST API."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from icelog.api.http import (
    context,
    json_response,
    namespace_from_json,
    namespace_param,
    no_content,
    page_params,
    path_param,
    raw_json_response,
    require_object,
)
from icelog.api.routes import prefix, services
from icelog.api.storage_access import TableAccess
from icelog.commands.catalog import TableState
from icelog.domain.errors import BadRequestError, NoSuchNamespaceError, NoSuchTableError
from icelog.domain.identifiers import TabularName
from icelog.domain.properties import require_string_map


def _name(request: Request) -> TabularName:
    return TabularName(namespace_param(request), path_param(request, "table"))


def catalog_root(request: Request) -> str:
    """Where clients reach `/catalog` (signer requests are sent there)."""
    return str(request.base_url).rstrip("/") + "/catalog"


def table_access(
    request: Request, warehouse_id: UUID, name: TabularName, location: str
) -> TableAccess:
    return services(request).access.for_table(
        warehouse_id=warehouse_id,
        name=name,
        location=location,
        delegation=request.headers.get("x-iceberg-access-delegation"),
        catalog_root=catalog_root(request),
    )


def _load_result(
    request: Request, warehouse_id: UUID, name: TabularName, state: TableState
) -> dict[str, Any]:
    access = table_access(request, warehouse_id, name, str(state.metadata["location"]))
    result: dict[str, Any] = {"metadata": state.metadata, **access.response_fields()}
    if state.metadata_location is not None:
        result["metadata-location"] = state.metadata_location
    return result


def _etag(table_id: str, version: int, mode: str) -> str:
    # Differs per table version and per snapshot mode, as the spec requires.
    return f'"{table_id}-{version}-{mode}"'


def _refs_only(metadata: dict[str, Any]) -> dict[str, Any]:
    """snapshots=refs: keep only snapshots that a branch or tag points at."""
    referenced = {ref["snapshot-id"] for ref in metadata.get("refs", {}).values()}
    trimmed = dict(metadata)
    trimmed["snapshots"] = [
        s for s in metadata.get("snapshots", []) if s["snapshot-id"] in referenced
    ]
    return trimmed


def list_tables(request: Request, _body: Any) -> Response:
    return list_tabulars(request, "table")


def list_tabulars(request: Request, kind: str) -> Response:
    """listTables / listViews: the names of one kind in a namespace, paged when asked."""
    svc = services(request)
    ns = namespace_param(request)
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    if not svc.queries.namespace_exists(warehouse_id, ns):
        raise NoSuchNamespaceError(f"Namespace does not exist: {ns.dotted}")
    token, size = page_params(request)
    names, next_token = svc.queries.list_tabulars(warehouse_id, ns, kind, token, size)
    payload: dict[str, Any] = {
        "identifiers": [{"namespace": ns.as_list(), "name": n} for n in names]
    }
    if next_token is not None:
        payload["next-page-token"] = next_token
    return json_response(payload)


def create_table(request: Request, body: Any) -> Response:
    svc = services(request)
    ns = namespace_param(request)
    data = require_object(body, "CreateTableRequest")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequestError("CreateTableRequest.name must be a non-empty string")
    schema = data.get("schema")
    if not isinstance(schema, dict):
        raise BadRequestError("CreateTableRequest.schema must be an object")
    spec = data.get("partition-spec")
    order = data.get("write-order")
    location = data.get("location")
    if spec is not None and not isinstance(spec, dict):
        raise BadRequestError("partition-spec must be an object")
    if order is not None and not isinstance(order, dict):
        raise BadRequestError("write-order must be an object")
    if location is not None and not isinstance(location, str):
        raise BadRequestError("location must be a string")
    warehouse_id = svc.warehouse_for_prefix(prefix(request))
    state = svc.catalog.create_table(
        context(request),
        warehouse_id,
        TabularName(ns, name),
        schema=schema,
        partition_spec=spec,
        sort_order=order,
        location=location or None,
        properties=require_string_map(data.get("properties"), "properties"),
        stage=bool(data.get("stage-create", False)),
    )
    return json_response(_load_result(request, warehouse_id, TabularName(ns, name), state))


async def load_table(request: Request, _body: Any) -> Response:
    svc = services(request)
    name = _name(request)
    wid = svc.warehouse_for_prefix(prefix(request))
    warehouse_id = str(wid)
    row = await svc.reader.load_tabular(warehouse_id, name.namespace, name.name, "table")
    if row is None:
        raise NoSuchTableError(f"Table does not exist: {name.dotted}")
    if request.method == "HEAD":
        return no_content()
    mode = request.query_params.get("snapshots") or "all"
    if mode not in ("all", "refs"):
        raise BadRequestError("snapshots must be 'all' or 'refs'")
    access = await _access_for_row(request, wid, name, row.id)
    # Vended credentials expire: such a response must not be answered with 304 later.
    etag = None if access.vended else _etag(row.id, row.version, mode)
    if etag is not None and request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers={"ETag": etag})
    metadata = row.metadata
    if mode == "refs":
        metadata = orjson.dumps(_refs_only(orjson.loads(metadata)))
    fields = access.response_fields()
    # The stored document is sent as-is: no parse, no re-serialisation on the hot path.
    body = (
        b'{"metadata-location":'
        + orjson.dumps(row.metadata_location)
        + b',"metadata":'
        + metadata
        + b","
        + orjson.dumps(fields)[1:]
    )
    return raw_json_response(body, headers={"ETag": etag} if etag else None)


async def _access_for_row(
    request: Request, warehouse_id: UUID, name: TabularName, table_id: str
) -> TableAccess:
    """File warehouses answer from the cached profile on the loop; S3 ones may call STS,
    so that work goes to a thread."""
    svc = services(request)
    cached = svc.catalog.cached_storage_profile(warehouse_id)
    if cached is not None and cached.get("type") == "file":
        return TableAccess()

    def build() -> TableAccess:
        if svc.access.profile(warehouse_id).get("type") == "file":
            return TableAccess()
        location = svc.queries.tabular_location(table_id)
        if location is None:
            raise NoSuchTableError(f"Table does not exist: {name.dotted}")
        return table_access(request, warehouse_id, name, location)

    return await run_in_threadpool(build)


def commit_table(request: Request, body: Any) -> Response:
    svc = services(request)
    name = _name(request)
    data = require_object(body, "CommitTableRequest")
    identifier = data.get("identifier")
    if identifier is not None:
        ident = require_object(identifier, "identifier")
        if (
            namespace_from_json(ident.get("namespace")) != name.namespace
            or ident.get("name") != name.name
        ):
            raise BadRequestError("identifier in the body does not match the request path")
    requirements = data.get("requirements") or []
    updates = data.get("updates")
    if updates is None:
        updates = []
    if not isinstance(requirements, list) or not all(isinstance(r, dict) for r in requirements):
        raise BadRequestError("requirements must be an array of objects")
    if not isinstance(updates, list) or not all(isinstance(u, dict) for u in updates):
        raise BadRequestError("updates must be an array of objects")
    state = svc.catalog.commit_table(
        context(request),
        svc.warehouse_for_prefix(prefix(request)),
        name,
        requirements,
        updates,
    )
    if state.document is None:
        return json_response(
            {"metadata-location": state.metadata_location, "metadata": state.metadata}
        )
    # The document as written to the metadata file: serialising it again cost as much as
    # the rest of the commit's Python work for a table with hundreds of snapshots.
    return raw_json_response(
        b'{"metadata-location":'
        + orjson.dumps(state.metadata_location)
        + b',"metadata":'
        + state.document
        + b"}"
    )


def drop_table(request: Request, _body: Any) -> Response:
    svc = services(request)
    raw = (request.query_params.get("purgeRequested") or "false").lower()
    if raw not in ("true", "false"):
        raise BadRequestError("purgeRequested must be true or false")
    svc.catalog.drop_table(
        context(request),
        svc.warehouse_for_prefix(prefix(request)),
        _name(request),
        purge=raw == "true",
    )
    return no_content()


def register_table(request: Request, body: Any) -> Response:
    svc = services(request)
    ns = namespace_param(request)
    data = require_object(body, "RegisterTableRequest")
    name = data.get("name")
    location = data.get("metadata-location")
    if not isinstance(name, str) or not name:
        raise BadRequestError("RegisterTableRequest.name must be a non-empty string")
    if not isinstance(location, str) or not location:
        raise BadRequestError("RegisterTableRequest.metadata-location must be a string")
    warehouse_id = svc.warehouse_for_prefix(prefix(request))
    state = svc.catalog.register_table(
        context(request),
        warehouse_id,
        TabularName(ns, name),
        location,
        overwrite=bool(data.get("overwrite", False)),
    )
    return json_response(_load_result(request, warehouse_id, TabularName(ns, name), state))


def identifier_from_json(value: Any, field: str) -> TabularName:
    data = require_object(value, field)
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequestError(f"{field}.name must be a non-empty string")
    return TabularName(namespace_from_json(data.get("namespace"), f"{field}.namespace"), name)


def rename_table(request: Request, body: Any) -> Response:
    svc = services(request)
    data = require_object(body, "RenameTableRequest")
    svc.catalog.rename_table(
        context(request),
        svc.warehouse_for_prefix(prefix(request)),
        identifier_from_json(data.get("source"), "source"),
        identifier_from_json(data.get("destination"), "destination"),
    )
    return no_content()


def report_metrics(request: Request, body: Any) -> Response:
    """Accepted and not stored: metrics reports are telemetry, not catalog state."""
    svc = services(request)
    name = _name(request)
    require_object(body, "ReportMetricsRequest")
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    if svc.queries.load_tabular(warehouse_id, name.namespace, name.name, "table") is None:
        raise NoSuchTableError(f"Table does not exist: {name.dotted}")
    return no_content()


def commit_transaction(request: Request, body: Any) -> Response:
    """transactions/commit: atomic across tables (one append), 204 on success."""
    svc = services(request)
    data = require_object(body, "CommitTransactionRequest")
    table_changes = data.get("table-changes")
    if not isinstance(table_changes, list) or not table_changes:
        raise BadRequestError("table-changes must be a non-empty array")
    changes = []
    for change in table_changes:
        entry = require_object(change, "table change")
        if entry.get("identifier") is None:
            raise BadRequestError("Every table change of a transaction needs an identifier")
        name = identifier_from_json(entry["identifier"], "identifier")
        requirements = entry.get("requirements") or []
        updates = entry.get("updates") or []
        if not isinstance(requirements, list) or not all(isinstance(r, dict) for r in requirements):
            raise BadRequestError("requirements must be an array of objects")
        if not isinstance(updates, list) or not all(isinstance(u, dict) for u in updates):
            raise BadRequestError("updates must be an array of objects")
        changes.append((name, requirements, updates))
    svc.catalog.commit_transaction(
        context(request), svc.warehouse_for_prefix(prefix(request)), changes
    )
    return no_content()


def load_credentials(request: Request, _body: Any) -> Response:
    """Fresh vended credentials for a table (Java calls this before the old ones expire).
    File warehouses, and S3 ones without STS, have none: an empty list."""
    svc = services(request)
    name = _name(request)
    wid = svc.warehouse_for_prefix(prefix(request))
    row = svc.queries.load_tabular(str(wid), name.namespace, name.name, "table")
    location = None if row is None else svc.queries.tabular_location(row.id)
    if row is None or location is None:
        raise NoSuchTableError(f"Table does not exist: {name.dotted}")
    profile = svc.access.profile(wid)
    if profile.get("type") != "s3" or not profile.get("sts-enabled"):
        return json_response({"storage-credentials": []})
    return json_response({"storage-credentials": svc.access.vend(profile, location)})

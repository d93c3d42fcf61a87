"""Table routes of the Iceberg REST API."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import orjson
from starlette.requests import Request
from starlette.responses import Response

from icelog.api.auth.guards import (
    data_rights,
    list_filter,
    may_cover_files,
    new_table_rights,
    sets_location,
)
from icelog.api.http import (
    context,
    namespace_param,
    no_content,
    page_of,
    path_param,
    raw_json_response,
)
from icelog.api.models.catalog import (
    CommitTableRequest,
    CommitTransactionRequest,
    CommitViewRequest,
    CreateTableRequest,
    DropTableQuery,
    ListTablesResponse,
    LoadCredentialsResponse,
    PageQuery,
    RegisterTableRequest,
    RenameTableRequest,
    ReportMetricsRequest,
    StorageCredential,
    TableIdentifier,
)
from icelog.api.routes import prefix, services
from icelog.api.services import Services
from icelog.api.storage_access import TableAccess
from icelog.api.threads import run_in_thread
from icelog.commands.catalog import TableState
from icelog.commands.storage import clients_need_access
from icelog.commands.tabular_values import Change
from icelog.domain.errors import (
    BadRequestError,
    CommitFailedError,
    ForbiddenError,
    NoSuchNamespaceError,
    NoSuchTableError,
)
from icelog.domain.identifiers import NamespaceName, TabularName
from icelog.domain.permissions import DataRights


def _name(request: Request) -> TabularName:
    params = request.path_params
    raw = (params["namespace"], params["table"])
    found = _NAMES.get(raw)
    if found is None:
        found = TabularName(namespace_param(request), path_param(request, "table"))
        if len(raw[0]) + len(raw[1]) <= _NAME_KEPT_CHARS:
            if len(_NAMES) >= 4096:  # a flood of made-up names only empties it
                _NAMES.clear()
            _NAMES[raw] = found
    return found


# Parsed names by their raw path segments: names are values, and parsing one (decoding,
# two frozen dataclasses, their checks) showed on loadTable. A name that fails to parse
# raises and is not kept; nor is a long one (the dict's size is bounded by count and
# length: 4,096 names of at most 512 characters, whatever a client sends).
_NAMES: dict[tuple[str, str], TabularName] = {}
_NAME_KEPT_CHARS = 512


def tabular_name(identifier: TableIdentifier) -> TabularName:
    return TabularName(NamespaceName(tuple(identifier.namespace)), identifier.name)


def change_request(
    request: Request, path_name: TabularName, body: CommitTableRequest | CommitViewRequest
) -> Change:
    """A commit's or replace's request: the table or view its path names (which the body's
    optional identifier must repeat), with the body's requirements and updates."""
    if body.identifier is not None and tabular_name(body.identifier) != path_name:
        raise BadRequestError("identifier in the body does not match the request path")
    return Change(
        context(request),
        services(request).warehouse_for_prefix(prefix(request)),
        path_name,
        list(body.requirements or []),
        list(body.updates or []),
    )


def catalog_root(request: Request) -> str:
    """Where clients reach `/catalog` (signer requests are sent there)."""
    return str(request.base_url).rstrip("/") + "/catalog"


def table_access(
    request: Request,
    warehouse_id: UUID,
    name: TabularName,
    location: str,
    rights: DataRights | None = None,
) -> TableAccess:
    """The storage part of a table answer, by the caller's data rights: by default those
    the route's guard found on the table (`data_rights`)."""
    return services(request).access.for_table(
        warehouse_id=warehouse_id,
        name=name,
        location=location,
        delegation=request.headers.get("x-iceberg-access-delegation"),
        catalog_root=catalog_root(request),
        rights=data_rights(request) if rights is None else rights,
    )


def _load_result(
    request: Request,
    warehouse_id: UUID,
    name: TabularName,
    state: TableState,
    rights: DataRights,
) -> bytes:
    """LoadTableResult: the document as rendered (the commands already hold its bytes when
    they wrote the file), the storage configuration, the location."""
    access = table_access(request, warehouse_id, name, str(state.metadata["location"]), rights)
    document = state.document if state.document is not None else orjson.dumps(state.metadata)
    location = b""
    if state.metadata_location is not None:
        location = b'"metadata-location":' + orjson.dumps(state.metadata_location) + b","
    return (
        b"{"
        + location
        + b'"metadata":'
        + document
        + b","
        + orjson.dumps(access.response_fields())[1:]
    )


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


def list_tables(request: Request, query: PageQuery) -> ListTablesResponse:
    return list_tabulars(request, "table", query)


def list_tabulars(request: Request, kind: str, query: PageQuery) -> ListTablesResponse:
    """listTables / listViews: the names of one kind in a namespace, paged when asked."""
    svc = services(request)
    ns = namespace_param(request)
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    if not svc.queries.namespace_exists(warehouse_id, ns):
        raise NoSuchNamespaceError(f"Namespace does not exist: {ns.dotted}")
    token, size = page_of(query)
    names, next_token = svc.queries.list_tabulars(
        warehouse_id, ns, kind, token, size, visible_to=list_filter(request)
    )
    return ListTablesResponse(
        identifiers=[TableIdentifier(namespace=ns.as_list(), name=n) for n in names],
        next_page_token=next_token,
    )


def create_table(request: Request, body: CreateTableRequest) -> bytes:
    svc = services(request)
    name = TabularName(namespace_param(request), body.name)
    warehouse_id = svc.warehouse_for_prefix(prefix(request))
    state = svc.catalog.tables.create_table(
        context(request),
        warehouse_id,
        name,
        schema=body.table_schema,
        partition_spec=body.partition_spec,
        sort_order=body.write_order,
        location=body.location or None,
        properties=dict(body.properties or {}),
        stage=bool(body.stage_create),
        may_cover_files=may_cover_files(request) if body.location else True,
    )
    rights = new_table_rights(
        request,
        name.namespace,
        None if body.stage_create else str(state.table_id),
        chosen_location=bool(body.location),
    )
    return _load_result(request, warehouse_id, name, state, rights)


async def load_table(request: Request) -> Response:
    answer = await load_table_answer(request)
    if answer is None:
        return no_content()  # HEAD: the table exists
    status, body, etag = answer
    headers = {"ETag": etag} if etag else None
    if status == 304:
        return Response(status_code=304, headers=headers)
    return raw_json_response(body, headers=headers)


# The query strings engines send (or none): read without parsing the query.
_PLAIN_QUERIES = {b"": "all", b"snapshots=all": "all", b"snapshots=refs": "refs"}


async def load_table_answer(request: Request) -> tuple[int, bytes, str | None] | None:
    """loadTable as (status, body, ETag): 200 with the LoadTableResult, or 304 when the
    client holds this version; None for HEAD (it exists). Shared by the route and its
    hot lane (api/hot_load.py), which sends it without building a Response."""
    svc = services(request)
    name = _name(request)
    wid, wid_text = svc.warehouse_text_for_prefix(prefix(request))
    row = await svc.reader.load_tabular(wid_text, name.namespace, name.name, "table")
    if row is None:
        raise NoSuchTableError(f"Table does not exist: {name.dotted}")
    if request.scope["method"] == "HEAD":
        return None
    # The query is read here rather than by a model: this is the hot path, and the one
    # parameter's rule is `LoadTableQuery`'s (documented there).
    mode = _PLAIN_QUERIES.get(request.scope["query_string"])
    if mode is None:
        mode = request.query_params.get("snapshots") or "all"
    if mode not in ("all", "refs"):
        raise BadRequestError("Invalid LoadTableQuery: snapshots: must be 'all' or 'refs'")
    if _serves_clients_directly(svc, wid):
        # Nothing vended, no signer: the fields are always the same.
        fields, vended, scope = _PLAIN_FIELDS, False, ""
    else:
        rights = data_rights(request)
        access = await _access_for_row(request, wid, name, row.id, rights)
        fields, vended = orjson.dumps(access.response_fields())[1:], access.vended
        # The storage part differs by right (a signer or none): a 304 must not keep a
        # caller on what an answer for their former rights held.
        scope = "-rw" if rights.write else "-r" if rights.read else "-none"
    # Vended credentials expire: such a response must not be answered with 304 later.
    etag = None if vended else _etag(row.id, row.version, mode + scope)
    if etag is not None and _if_none_match(request) == etag:
        return 304, b"", etag
    metadata = row.metadata
    if mode == "refs":
        metadata = orjson.dumps(_refs_only(orjson.loads(metadata)))
    # The stored document is sent as-is: no parse, no re-serialisation on the hot path.
    body = (
        b'{"metadata-location":'
        + orjson.dumps(row.metadata_location)
        + b',"metadata":'
        + metadata
        + b","
        + fields
    )
    return 200, body, etag


# The response fields of a table whose clients reach the files directly (`TableAccess()`),
# after the '{'.
_PLAIN_FIELDS = orjson.dumps(TableAccess().response_fields())[1:]


def _serves_clients_directly(svc: Services, warehouse_id: UUID) -> bool:
    """Whether the warehouse's recently read profile is of a kind whose clients reach the
    files directly, with nothing in the answer about storage (False: not known)."""
    cached = svc.catalog.app.cached_storage_profile(warehouse_id)
    if cached is None:
        return False
    try:
        return not clients_need_access(cached)
    except BadRequestError:
        return False  # a profile no kind takes: the slow path says so


def _if_none_match(request: Request) -> str | None:
    """The If-None-Match header, read from the scope (no Headers object on the hot path)."""
    for key, value in request.scope["headers"]:
        if key == b"if-none-match":
            return str(value.decode("latin-1"))
    return None


async def _access_for_row(
    request: Request, warehouse_id: UUID, name: TabularName, table_id: str, rights: DataRights
) -> TableAccess:
    """The access of a table whose clients are not known to reach the files directly (the
    caller answers those on the loop): vending may call the storage's token service, so
    the work goes to a thread."""
    svc = services(request)

    def build() -> TableAccess:
        if not clients_need_access(svc.access.profile(warehouse_id)):
            return TableAccess()
        location = svc.queries.tabular_location(table_id)
        if location is None:
            raise NoSuchTableError(f"Table does not exist: {name.dotted}")
        return table_access(request, warehouse_id, name, location, rights)

    return await run_in_thread(build)


def commit_table(request: Request, body: CommitTableRequest) -> bytes:
    state = services(request).catalog.tables.commit_table(
        change_request(request, _name(request), body),
        may_cover_files=may_cover_files(request) if sets_location(body.updates) else True,
    )
    # The document as written to the metadata file: serialising it again cost as much as
    # the rest of the commit's Python work for a table with hundreds of snapshots.
    document = state.document if state.document is not None else orjson.dumps(state.metadata)
    return (
        b'{"metadata-location":'
        + orjson.dumps(state.metadata_location)
        + b',"metadata":'
        + document
        + b"}"
    )


def drop_table(request: Request, query: DropTableQuery) -> None:
    svc = services(request)
    svc.catalog.lifecycle.drop_table(
        context(request),
        svc.warehouse_for_prefix(prefix(request)),
        _name(request),
        purge=query.purge_requested,
    )


def unregister_table(request: Request) -> bytes:
    """The table leaves the catalog, its files stay (main's spec): the answer is the last
    metadata location and document, which hold every commit before the unregister."""
    svc = services(request)
    name = _name(request)
    warehouse_id = svc.warehouse_for_prefix(prefix(request))
    for _ in range(3):  # a commit between the read and the unregister: read again
        row = svc.primary.load_tabular(str(warehouse_id), name.namespace, name.name, "table")
        if row is None:
            raise NoSuchTableError(f"Table does not exist: {name.dotted}")
        try:
            svc.catalog.lifecycle.unregister_table(
                context(request), warehouse_id, name, expected_location=row.metadata_location
            )
        except CommitFailedError:
            continue
        return (
            b'{"metadata-location":'
            + orjson.dumps(row.metadata_location)
            + b',"metadata":'
            + row.metadata
            + b"}"
        )
    raise CommitFailedError(f"Table {name.dotted} kept changing: unregister it again")


def register_table(request: Request, body: RegisterTableRequest) -> bytes:
    svc = services(request)
    name = TabularName(namespace_param(request), body.name)
    warehouse_id = svc.warehouse_for_prefix(prefix(request))
    state = svc.catalog.tables.register_table(
        context(request),
        warehouse_id,
        name,
        body.metadata_location,
        overwrite=body.overwrite,
        may_cover_files=may_cover_files(request),
    )
    rights = new_table_rights(request, name.namespace, str(state.table_id), chosen_location=False)
    return _load_result(request, warehouse_id, name, state, rights)


def rename_tabular(request: Request, body: RenameTableRequest, kind: str) -> None:
    """renameTable and renameView: one move of a name in the warehouse's one identifier
    space (a table and a view cannot share a name)."""
    svc = services(request)
    svc.catalog.tabulars.rename(
        context(request),
        kind,
        svc.warehouse_for_prefix(prefix(request)),
        tabular_name(body.source),
        tabular_name(body.destination),
    )


def rename_table(request: Request, body: RenameTableRequest) -> None:
    rename_tabular(request, body, "table")


def report_metrics(request: Request, body: ReportMetricsRequest) -> None:
    """Accepted and not stored: metrics reports are telemetry, not catalog state."""
    svc = services(request)
    name = _name(request)
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    if svc.queries.load_tabular(warehouse_id, name.namespace, name.name, "table") is None:
        raise NoSuchTableError(f"Table does not exist: {name.dotted}")


def commit_transaction(request: Request, body: CommitTransactionRequest) -> None:
    """transactions/commit: atomic across tables (one append), 204 on success."""
    svc = services(request)
    changes = [
        (
            tabular_name(change.identifier),
            list(change.requirements or []),
            list(change.updates or []),
        )
        for change in body.table_changes
    ]
    moves = any(sets_location(updates) for _name, _requirements, updates in changes)
    svc.catalog.tables.commit_transaction(
        context(request),
        svc.warehouse_for_prefix(prefix(request)),
        changes,
        may_cover_files=may_cover_files(request) if moves else True,
    )


def load_credentials(request: Request) -> LoadCredentialsResponse:
    """Fresh vended credentials for a table (Java calls this before the old ones expire).
    Warehouses whose storage does not vend have none: an empty list."""
    svc = services(request)
    name = _name(request)
    wid = svc.warehouse_for_prefix(prefix(request))
    row = svc.queries.load_tabular(str(wid), name.namespace, name.name, "table")
    location = None if row is None else svc.queries.tabular_location(row.id)
    if row is None or location is None:
        raise NoSuchTableError(f"Table does not exist: {name.dotted}")
    rights = data_rights(request)  # the guard asked for read_data; write scope by right
    if not rights.any:
        raise ForbiddenError(f"Not allowed to read_data on table {name.dotted}")
    profile = svc.access.profile(wid)
    if not svc.access.vends(profile):
        return LoadCredentialsResponse(storage_credentials=[])
    vended = svc.access.vend(profile, location, write=rights.write)
    return LoadCredentialsResponse(
        storage_credentials=[StorageCredential.model_validate(c) for c in vended]
    )

"""Management API (`/management/v1`), shaped like Lakekeeper's."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any
from uuid import UUID

from starlette.requests import Request

from icelog.api.auth.guards import visible
from icelog.api.http import context, parse_uuid
from icelog.api.models.management import (
    BootstrapRequest,
    CreateProjectRequest,
    CreateProjectResponse,
    CreateWarehouseRequest,
    CreateWarehouseResponse,
    DropNamespaceQuery,
    GetProjectResponse,
    GetWarehouseResponse,
    ListProjectsResponse,
    ListWarehousesResponse,
    ProtectionResponse,
    RenameProjectRequest,
    RenameWarehouseRequest,
    ServerInfo,
    SetProtectionRequest,
    UpdateWarehouseCredentialRequest,
    UpdateWarehouseDeleteProfileRequest,
    UpdateWarehouseStorageRequest,
    as_dict,
)
from icelog.api.routes import services
from icelog.api.routes.config import project_id
from icelog.api.routes.namespaces import drop_recursively
from icelog.commands.access import AlreadyBootstrappedError
from icelog.domain.errors import BadRequestError, NoSuchProjectError, NoSuchWarehouseError
from icelog.domain.identifiers import NIL_UUID, SERVER_ID


def _version() -> str:
    try:
        return version("icelog")
    except PackageNotFoundError:  # pragma: no cover - running from a plain checkout
        return "0.0.0"


def _project_from(request: Request, requested: UUID | None = None) -> UUID:
    """The project of the path, else the one the body names, else `x-project-id`."""
    explicit = request.path_params.get("project_id")
    if explicit is not None:
        return parse_uuid(explicit, "project id")
    return requested or UUID(project_id(request))


def info(request: Request) -> ServerInfo:
    svc = services(request)
    return ServerInfo(
        version=_version(),
        bootstrapped=svc.catalog.management.is_bootstrapped(),
        server_id=SERVER_ID,
        default_project_id=NIL_UUID,
        # No provider: everyone may do everything; with one, the grants decide (api/auth).
        authz_backend="grants" if request.app.state.authorizer.enabled else "allow-all",
        aws_system_identities_enabled=False,
        azure_system_identities_enabled=False,
        gcp_system_identities_enabled=False,
        queues=[],
        backend=svc.settings.backend,
    )


def bootstrap(request: Request, body: BootstrapRequest) -> None:
    """Without authentication: the server's bootstrap (once). With it: the first
    authenticated caller becomes the server's admin (once; the server itself was
    bootstrapped at its first start)."""
    if not body.accept_terms_of_use:
        raise BadRequestError("accept-terms-of-use must be true")
    svc = services(request)
    if getattr(request.state, "principal", None) is not None:
        svc.catalog.management.bootstrap(context(request), is_operator=body.is_operator)
        svc.catalog.access.grant_first_admin(context(request), is_operator=body.is_operator)
        request.app.state.authorizer.forget()
        return
    if not svc.catalog.management.bootstrap(context(request), is_operator=body.is_operator):
        raise AlreadyBootstrappedError("Catalog already bootstrapped")


# -- projects --------------------------------------------------------------------------------
def create_project(request: Request, body: CreateProjectRequest) -> CreateProjectResponse:
    pid = services(request).catalog.management.create_project(
        context(request), body.project_name, body.project_id
    )
    return CreateProjectResponse(project_id=pid)


def list_projects(request: Request) -> ListProjectsResponse:
    """The projects the caller may see: all without a provider."""
    projects = services(request).queries.projects()
    shown = visible(request, "project", [p["project-id"] for p in projects])
    return ListProjectsResponse.model_validate(
        {"projects": [p for p in projects if p["project-id"] in shown]}
    )


def get_project(request: Request) -> GetProjectResponse:
    pid = _project_from(request)
    found = services(request).queries.project(str(pid))
    if found is None:
        raise NoSuchProjectError(f"Project does not exist: {pid}")
    return GetProjectResponse.model_validate(found)


def rename_project(request: Request, body: RenameProjectRequest) -> None:
    services(request).catalog.management.rename_project(
        context(request), _project_from(request), body.new_name
    )


def delete_project(request: Request) -> None:
    services(request).catalog.management.delete_project(context(request), _project_from(request))


# -- warehouses ------------------------------------------------------------------------------
def create_warehouse(request: Request, body: CreateWarehouseRequest) -> CreateWarehouseResponse:
    svc = services(request)
    warehouse_id = svc.catalog.management.create_warehouse(
        context(request),
        project_id=_project_from(request, body.project_id),
        name=body.warehouse_name,
        storage_profile=as_dict(body.storage_profile),
        storage_credential=as_dict(body.storage_credential),
        delete_profile=as_dict(body.delete_profile),
        check_access=not svc.settings.skip_storage_validation,
    )
    return CreateWarehouseResponse(warehouse_id=warehouse_id)


def update_storage(request: Request, body: UpdateWarehouseStorageRequest) -> None:
    """Lakekeeper's update-storage-profile: new settings for the same location, optionally
    with a new credential (the current one is kept otherwise)."""
    warehouse = get_warehouse_row(request)
    svc = services(request)
    svc.catalog.management.update_storage(
        context(request),
        UUID(warehouse["id"]),
        storage_profile=as_dict(body.storage_profile),
        storage_credential=as_dict(body.storage_credential),
        check_access=not svc.settings.skip_storage_validation,
    )


def update_storage_credential(request: Request, body: UpdateWarehouseCredentialRequest) -> None:
    warehouse = get_warehouse_row(request)
    svc = services(request)
    svc.catalog.management.update_storage_credential(
        context(request),
        UUID(warehouse["id"]),
        as_dict(body.new_storage_credential),
        check_access=not svc.settings.skip_storage_validation,
    )


def get_warehouse_row(request: Request) -> dict[str, Any]:
    """The `{warehouse_id}` of the path, from the read model; 404 when it does not exist."""
    wid = parse_uuid(request.path_params["warehouse_id"], "warehouse id")
    found = services(request).queries.warehouse(str(wid))
    if found is None:
        raise NoSuchWarehouseError(f"Warehouse does not exist: {wid}")
    return found


def list_warehouses(request: Request) -> ListWarehousesResponse:
    warehouses = services(request).queries.warehouses(str(_project_from(request)))
    shown = visible(request, "warehouse", [str(w["id"]) for w in warehouses])
    warehouses = [w for w in warehouses if str(w["id"]) in shown]
    return ListWarehousesResponse.model_validate(
        {"warehouses": [{**w, "protected": False} for w in warehouses]}
    )


def get_warehouse(request: Request) -> GetWarehouseResponse:
    warehouse = get_warehouse_row(request)
    catalog = services(request).catalog
    protected, _ = catalog.lifecycle.protection(
        UUID(warehouse["id"]), "warehouse", UUID(warehouse["id"])
    )
    return GetWarehouseResponse.model_validate({**warehouse, "protected": protected})


def rename_warehouse(request: Request, body: RenameWarehouseRequest) -> None:
    warehouse = get_warehouse_row(request)
    services(request).catalog.management.rename_warehouse(
        context(request), UUID(warehouse["id"]), body.new_name
    )


def delete_warehouse(request: Request) -> None:
    warehouse = get_warehouse_row(request)
    services(request).catalog.management.delete_warehouse(context(request), UUID(warehouse["id"]))


# -- delete profile and protection -------------------------------------------------------------
def update_delete_profile(request: Request, body: UpdateWarehouseDeleteProfileRequest) -> None:
    warehouse = get_warehouse_row(request)
    services(request).catalog.management.change_delete_profile(
        context(request), UUID(warehouse["id"]), as_dict(body.delete_profile)
    )


def _protection_target(request: Request) -> tuple[UUID, str, UUID]:
    warehouse_id = parse_uuid(request.path_params["warehouse_id"], "warehouse id")
    for kind in ("table", "view", "namespace"):
        raw = request.path_params.get(f"{kind}_id")
        if raw is not None:
            return warehouse_id, kind, parse_uuid(raw, f"{kind} id")
    return warehouse_id, "warehouse", warehouse_id


def get_protection(request: Request) -> ProtectionResponse:
    warehouse_id, kind, entity_id = _protection_target(request)
    protected, updated_at = services(request).catalog.lifecycle.protection(
        warehouse_id, kind, entity_id
    )
    return ProtectionResponse(protected=protected, updated_at=updated_at.isoformat())


def set_protection(request: Request, body: SetProtectionRequest) -> ProtectionResponse:
    warehouse_id, kind, entity_id = _protection_target(request)
    result, updated_at = services(request).catalog.lifecycle.set_protection(
        context(request), warehouse_id, kind, entity_id, body.protected
    )
    return ProtectionResponse(protected=result, updated_at=updated_at.isoformat())


def drop_namespace_by_id(request: Request, query: DropNamespaceQuery) -> None:
    """Cascade drop by id (`?recursive=true` drops everything inside first)."""
    svc = services(request)
    warehouse_id = parse_uuid(request.path_params["warehouse_id"], "warehouse id")
    ns_id = parse_uuid(request.path_params["namespace_id"], "namespace id")
    name = svc.catalog.namespaces.namespace_name(warehouse_id, ns_id)
    if query.recursive:
        drop_recursively(svc, context(request), warehouse_id, name, purge=query.purge)
    else:
        svc.catalog.namespaces.drop_namespace(context(request), warehouse_id, name)

"""Management API (`/management/v1`), shaped like Lakekeeper's."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any
from uuid import UUID

from starlette.requests import Request
from starlette.responses import Response

from icelog.api.http import context, json_response, no_content, parse_uuid, require_object
from icelog.api.routes import services
from icelog.api.routes.config import project_id
from icelog.api.routes.namespaces import drop_recursively
from icelog.domain.errors import BadRequestError, NoSuchProjectError, NoSuchWarehouseError
from icelog.domain.identifiers import NIL_UUID, SERVER_ID


class AlreadyBootstrappedError(BadRequestError):
    error_type = "CatalogAlreadyBootstrapped"


def _version() -> str:
    try:
        return version("icelog")
    except PackageNotFoundError:  # pragma: no cover - running from a plain checkout
        return "0.0.0"


def _project_from(request: Request, body: dict[str, Any] | None = None) -> UUID:
    explicit = request.path_params.get("project_id")
    if explicit is not None:
        return parse_uuid(explicit, "project id")
    if body and body.get("project-id"):
        return parse_uuid(body["project-id"], "project-id")
    return UUID(project_id(request))


def info(request: Request, _body: Any) -> Response:
    svc = services(request)
    return json_response(
        {
            "version": _version(),
            "bootstrapped": svc.catalog.is_bootstrapped(),
            "server-id": str(SERVER_ID),
            "default-project-id": str(NIL_UUID),
            "authz-backend": "allow-all",
            "aws-system-identities-enabled": False,
            "azure-system-identities-enabled": False,
            "gcp-system-identities-enabled": False,
            "queues": [],
            "backend": svc.settings.backend,
        }
    )


def bootstrap(request: Request, body: Any) -> Response:
    data = require_object(body, "BootstrapRequest")
    if data.get("accept-terms-of-use") is not True:
        raise BadRequestError("accept-terms-of-use must be true")
    is_operator = data.get("is-operator", False)
    if not isinstance(is_operator, bool):
        raise BadRequestError("is-operator must be a boolean")
    if not services(request).catalog.bootstrap(context(request), is_operator=is_operator):
        raise AlreadyBootstrappedError("Catalog already bootstrapped")
    return no_content()


# -- projects --------------------------------------------------------------------------------
def create_project(request: Request, body: Any) -> Response:
    data = require_object(body, "CreateProjectRequest")
    requested = data.get("project-id")
    pid = services(request).catalog.create_project(
        context(request),
        data.get("project-name"),  # type: ignore[arg-type]  # validated by the command
        parse_uuid(requested, "project-id") if requested else None,
    )
    return json_response({"project-id": str(pid)})


def list_projects(request: Request, _body: Any) -> Response:
    return json_response({"projects": services(request).queries.projects()})


def get_project(request: Request, _body: Any) -> Response:
    pid = _project_from(request)
    found = services(request).queries.project(str(pid))
    if found is None:
        raise NoSuchProjectError(f"Project does not exist: {pid}")
    return json_response(found)


def rename_project(request: Request, body: Any) -> Response:
    data = require_object(body, "RenameProjectRequest")
    services(request).catalog.rename_project(
        context(request),
        _project_from(request),
        data.get("new-name"),  # type: ignore[arg-type]
    )
    return no_content()


def delete_project(request: Request, _body: Any) -> Response:
    services(request).catalog.delete_project(context(request), _project_from(request))
    return no_content()


# -- warehouses ------------------------------------------------------------------------------
def create_warehouse(request: Request, body: Any) -> Response:
    data = require_object(body, "CreateWarehouseRequest")
    svc = services(request)
    warehouse_id = svc.catalog.create_warehouse(
        context(request),
        project_id=_project_from(request, data),
        name=data.get("warehouse-name"),  # type: ignore[arg-type]  # validated by the command
        storage_profile=data.get("storage-profile"),
        storage_credential=data.get("storage-credential"),
        delete_profile=data.get("delete-profile"),
        check_access=not svc.settings.skip_storage_validation,
    )
    return json_response({"warehouse-id": str(warehouse_id)})


def update_storage(request: Request, body: Any) -> Response:
    """Lakekeeper's update-storage-profile: new settings for the same location, optionally
    with a new credential (the current one is kept otherwise)."""
    data = require_object(body, "UpdateWarehouseStorageRequest")
    warehouse = get_warehouse_row(request)
    svc = services(request)
    svc.catalog.update_storage(
        context(request),
        UUID(warehouse["id"]),
        storage_profile=data.get("storage-profile"),
        storage_credential=data.get("storage-credential"),
        check_access=not svc.settings.skip_storage_validation,
    )
    return no_content()


def update_storage_credential(request: Request, body: Any) -> Response:
    data = require_object(body, "UpdateWarehouseCredentialRequest")
    warehouse = get_warehouse_row(request)
    svc = services(request)
    svc.catalog.update_storage_credential(
        context(request),
        UUID(warehouse["id"]),
        data.get("new-storage-credential"),
        check_access=not svc.settings.skip_storage_validation,
    )
    return no_content()


def get_warehouse_row(request: Request) -> dict[str, Any]:
    """The `{warehouse_id}` of the path, from the read model; 404 when it does not exist."""
    wid = parse_uuid(request.path_params["warehouse_id"], "warehouse id")
    found = services(request).queries.warehouse(str(wid))
    if found is None:
        raise NoSuchWarehouseError(f"Warehouse does not exist: {wid}")
    return found


def list_warehouses(request: Request, _body: Any) -> Response:
    warehouses = services(request).queries.warehouses(str(_project_from(request)))
    return json_response({"warehouses": [_public(w) for w in warehouses]})


def _public(warehouse: dict[str, Any], protected: bool = False) -> dict[str, Any]:
    return {**warehouse, "protected": protected}


def get_warehouse(request: Request, _body: Any) -> Response:
    warehouse = get_warehouse_row(request)
    catalog = services(request).catalog
    protected, _ = catalog.protection(UUID(warehouse["id"]), "warehouse", UUID(warehouse["id"]))
    return json_response(_public(warehouse, protected))


def rename_warehouse(request: Request, body: Any) -> Response:
    data = require_object(body, "RenameWarehouseRequest")
    warehouse = get_warehouse_row(request)
    services(request).catalog.rename_warehouse(
        context(request),
        UUID(warehouse["id"]),
        data.get("new-name"),  # type: ignore[arg-type]
    )
    return no_content()


def delete_warehouse(request: Request, _body: Any) -> Response:
    warehouse = get_warehouse_row(request)
    services(request).catalog.delete_warehouse(context(request), UUID(warehouse["id"]))
    return no_content()


# -- delete profile and protection -------------------------------------------------------------
def update_delete_profile(request: Request, body: Any) -> Response:
    data = require_object(body, "UpdateWarehouseDeleteProfileRequest")
    warehouse = get_warehouse_row(request)
    services(request).catalog.change_delete_profile(
        context(request), UUID(warehouse["id"]), data.get("delete-profile")
    )
    return no_content()


def _protection_target(request: Request) -> tuple[UUID, str, UUID]:
    warehouse_id = parse_uuid(request.path_params["warehouse_id"], "warehouse id")
    for kind in ("table", "view", "namespace"):
        raw = request.path_params.get(f"{kind}_id")
        if raw is not None:
            return warehouse_id, kind, parse_uuid(raw, f"{kind} id")
    return warehouse_id, "warehouse", warehouse_id


def get_protection(request: Request, _body: Any) -> Response:
    warehouse_id, kind, entity_id = _protection_target(request)
    protected, updated_at = services(request).catalog.protection(warehouse_id, kind, entity_id)
    return json_response({"protected": protected, "updated-at": updated_at.isoformat()})


def set_protection(request: Request, body: Any) -> Response:
    data = require_object(body, "SetProtectionRequest")
    protected = data.get("protected")
    if not isinstance(protected, bool):
        raise BadRequestError("protected must be true or false")
    warehouse_id, kind, entity_id = _protection_target(request)
    result, updated_at = services(request).catalog.set_protection(
        context(request), warehouse_id, kind, entity_id, protected
    )
    return json_response({"protected": result, "updated-at": updated_at.isoformat()})


def drop_namespace_by_id(request: Request, _body: Any) -> Response:
    """Cascade drop by id (`?recursive=true` drops everything inside first)."""
    svc = services(request)
    warehouse_id = parse_uuid(request.path_params["warehouse_id"], "warehouse id")
    ns_id = parse_uuid(request.path_params["namespace_id"], "namespace id")
    name = svc.catalog.namespace_name(warehouse_id, ns_id)
    recursive = (request.query_params.get("recursive") or "false").lower() == "true"
    purge = (request.query_params.get("purge") or "false").lower() == "true"
    if recursive:
        drop_recursively(svc, context(request), warehouse_id, name, purge=purge)
    else:
        svc.catalog.drop_namespace(context(request), warehouse_id, name)
    return no_content()

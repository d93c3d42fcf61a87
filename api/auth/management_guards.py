"""The right each management operation needs (by operation id). Every operation is listed:
`SELF` marks the ones whose handlers check themselves (the permission and role routes, which
need the object and the body together; the user routes, where a user may read themself) or
that any authenticated caller may use (who am I, bootstrap — refused once an admin exists)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from uuid import UUID

from starlette.requests import Request

from icelog.api.auth.authorizer import SERVER, missing
from icelog.api.auth.guards import Guard, require
from icelog.api.edge import Operation
from icelog.domain.identifiers import NIL_UUID
from icelog.domain.permissions import Kind, ObjectRef


def _uuid(request: Request, param: str) -> str:
    from icelog.api.http import parse_uuid, path_param  # noqa: PLC0415

    return str(parse_uuid(path_param(request, param), param.replace("_", " ")))


def _project(request: Request, body: Any) -> ObjectRef:
    """The project of the path, else the body's, else `x-project-id` (nil: default)."""
    if "project_id" in request.path_params:
        return ObjectRef("project", _uuid(request, "project_id"))
    requested = getattr(body, "project_id", None)
    if requested is not None:
        return ObjectRef("project", str(requested))
    header = request.headers.get("x-project-id")
    try:
        return ObjectRef("project", str(UUID(header)) if header else str(NIL_UUID))
    except ValueError:
        raise missing(ObjectRef("project", header or "")) from None


def project_of(request: Request) -> ObjectRef:
    """The project a request names (path, else `x-project-id`, else the default)."""
    return _project(request, None)


def on_server(action: str) -> Guard:
    def guard(request: Request, body: Any, query: Any) -> None:
        require(request, SERVER, action)

    return guard


def on_project(action: str) -> Guard:
    def guard(request: Request, body: Any, query: Any) -> None:
        require(request, _project(request, body), action)

    return guard


def on(kind: Kind, param: str, action: str) -> Guard:
    def guard(request: Request, body: Any, query: Any) -> None:
        require(request, ObjectRef(kind, _uuid(request, param)), action)

    return guard


def on_events(request: Request, body: Any, query: Any) -> None:
    """The log of one warehouse for whoever may describe it (`list_everything`: the log
    names everything in it, so a grant inside it is not enough); all of it for the
    server's admin (auditors are given `admin` or `operator`)."""
    warehouse = getattr(query, "warehouse_id", None)
    if warehouse is not None:
        require(request, ObjectRef("warehouse", str(warehouse)), "list_everything")
    else:
        require(request, SERVER, "read_assignments")


SELF: Guard | None = None
WAREHOUSE: tuple[Kind, str] = ("warehouse", "warehouse_id")
NAMESPACE: tuple[Kind, str] = ("namespace", "namespace_id")
_TABULAR: tuple[Kind, ...] = ("table", "view")
_PROTECTED: tuple[Kind, ...] = ("warehouse", "namespace", *_TABULAR)

GUARDS: dict[str, Guard | None] = {
    "getServerInfo": SELF,
    "bootstrap": SELF,
    "whoami": SELF,
    "listUsers": SELF,
    "createUser": SELF,
    "getUser": SELF,
    "updateUser": on_server("update_users"),
    "deleteUser": on_server("delete_users"),
    "createRole": SELF,
    "listRoles": SELF,
    "getRole": SELF,
    "updateRole": SELF,
    "deleteRole": SELF,
    "checkPermission": SELF,
    "getNamespaceId": on(*WAREHOUSE, "get_metadata"),
    "createProject": on_server("create_project"),
    "listProjects": SELF,
    "getProject": on_project("list_warehouses"),
    "getProjectById": on_project("list_warehouses"),
    "deleteProject": on_project("delete"),
    "deleteProjectById": on_project("delete"),
    "renameProject": on_project("rename"),
    "renameProjectById": on_project("rename"),
    "createWarehouse": on_project("create_warehouse"),
    "listWarehouses": SELF,
    "getWarehouse": on(*WAREHOUSE, "get_metadata"),
    "deleteWarehouse": on(*WAREHOUSE, "delete"),
    "renameWarehouse": on(*WAREHOUSE, "rename"),
    "updateStorageProfile": on(*WAREHOUSE, "modify_storage"),
    "updateStorageCredential": on(*WAREHOUSE, "modify_storage_credential"),
    "updateDeleteProfile": on(*WAREHOUSE, "modify_storage"),
    "dropNamespaceById": on(*NAMESPACE, "delete"),
    "createFunction": on(*NAMESPACE, "create_function"),
    "replaceFunction": on(*NAMESPACE, "replace_function"),
    "dropFunction": on(*NAMESPACE, "drop_function"),
    # Each kind's protection: read with its metadata, changed by `set_protection`.
    **{
        f"{verb}{kind.capitalize()}Protection": on(kind, f"{kind}_id", action)
        for kind in _PROTECTED
        for verb, action in (("get", "get_metadata"), ("set", "set_protection"))
    },
    "listDeletedTabulars": on(*WAREHOUSE, "list_deleted_tabulars"),
    "undropTabulars": on(*WAREHOUSE, "control_all_tasks"),
    "undropTabularsDeprecated": on(*WAREHOUSE, "control_all_tasks"),
    "listTasks": on(*WAREHOUSE, "get_all_tasks"),
    "getTask": on(*WAREHOUSE, "get_all_tasks"),
    "listEvents": on_events,
    "getCatalogAsOf": on_server("read_assignments"),
    **{
        f"get{kind.capitalize()}History": on(kind, f"{kind}_id", "get_metadata")
        for kind in _TABULAR
    },
}
_PERMISSION_ROUTES = ("Assignments", "Access")


def guarded(operations: list[Operation]) -> list[Operation]:
    """The operations with their guards; an operation missing from GUARDS is an error."""
    found = []
    for op in operations:
        if op.operation_id.endswith(_PERMISSION_ROUTES):
            found.append(op)  # their handlers check (api/routes/permissions.py)
            continue
        if op.operation_id not in GUARDS:
            raise KeyError(f"no guard declared for management operation {op.operation_id}")
        found.append(replace(op, guard=GUARDS[op.operation_id]))
    return found

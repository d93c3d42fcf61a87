"""The management API's operations (`/management/v1`), shaped like Lakekeeper's; its OpenAPI
document is generated from them (api/openapi.py `management_document`)."""

from __future__ import annotations

from typing import Any

from icelog.api.auth.management_guards import guarded
from icelog.api.edge import Operation
from icelog.api.event_log import as_of, list_events, tabular_history
from icelog.api.models import audit, lifecycle
from icelog.api.models import functions as fn
from icelog.api.models import management as m
from icelog.api.models import permissions as perm
from icelog.api.models import users as user_models
from icelog.api.routes import functions, permissions, users
from icelog.api.routes import lifecycle as soft_delete
from icelog.api.routes import management as mgmt

PROJECT_HEADER: dict[str, Any] = {"$ref": "#/components/parameters/x-project-id"}
_STORAGE_ERRORS = (400, 404, 500, 503)

AS_OF = """Projects, warehouses, namespaces, tables and views as they were after the last event \
at or before `position` (or `time`), read from the catalog history. A page holds at most \
`page-size` namespaces, tables and views, in the order (warehouse id, namespace levels, kind, \
name, id), nested under their warehouses and namespaces; a namespace that started on an earlier \
page is repeated as a container with `"continued": true`. Every page lists all projects. Pass \
`next-page-token` as `page-token` (with the same other parameters) for the next page; it is \
null on the last. A page may hold fewer objects than `page-size` (it reads a bounded number of \
rows) and still have a next one. Later pages answer as of the position of the first."""


def _projects() -> list[Operation]:
    """The project routes, for the project of `x-project-id` and by id in the path."""
    found = []
    for path, suffix, which, headers in (
        ("/project", "", "the project of `x-project-id` (default: nil)", (PROJECT_HEADER,)),
        ("/project/{project_id}", "ById", "the project in the path", ()),
    ):
        found += [
            Operation(
                "GET", path, mgmt.get_project, f"Get {which}", "project",
                response=m.GetProjectResponse, errors=(400, 404), headers=headers,
                operation_id=f"getProject{suffix}",
            ),
            Operation(
                "DELETE", path, mgmt.delete_project,
                f"Delete {which}; it must have no warehouses", "project",
                errors=(400, 404, 409), headers=headers, operation_id=f"deleteProject{suffix}",
            ),
            Operation(
                "POST", f"{path}/rename", mgmt.rename_project, "Rename a project", "project",
                body=m.RenameProjectRequest, errors=(400, 404, 409), headers=headers,
                operation_id=f"renameProject{suffix}",
            ),
        ]  # fmt: skip
    return found


def _protection() -> list[Operation]:
    """GET and POST of each entity kind's protection (Lakekeeper's shape)."""
    found = []
    for kind in ("warehouse", "table", "view", "namespace"):
        path = "/warehouse/{warehouse_id}" + (
            "" if kind == "warehouse" else f"/{kind}/{{{kind}_id}}"
        )
        found += [
            Operation(
                "GET", f"{path}/protection", mgmt.get_protection,
                f"Is the {kind} protected from being dropped?", "protection",
                response=m.ProtectionResponse, errors=(400, 404),
                operation_id=f"get{kind.capitalize()}Protection",
            ),
            Operation(
                "POST", f"{path}/protection", mgmt.set_protection,
                f"Protect the {kind} from being dropped, or remove the protection", "protection",
                body=m.SetProtectionRequest, response=m.ProtectionResponse, errors=(400, 404),
                operation_id=f"set{kind.capitalize()}Protection",
            ),
        ]  # fmt: skip
    return found


def _undrop(path: str, summary: str, operation_id: str, *, deprecated: bool = False) -> Operation:
    return Operation(
        "POST", path, soft_delete.undrop_tabulars, summary, "soft-delete",
        body=lifecycle.UndropTabularsRequest, errors=(400, 404, 409),
        operation_id=operation_id, deprecated=deprecated,
    )  # fmt: skip


def _function_write(
    method: str, path: str, handler: Any, body: Any, operation_id: str, summary: str
) -> Operation:
    """A write of a function: its whole new state in, its new metadata out."""
    return Operation(
        method, path, handler, summary, "function", body=body, response=fn.LoadFunctionResult,
        errors=(400, 404, 409), operation_id=operation_id,
    )  # fmt: skip


def _history(kind: str) -> Operation:
    return Operation(
        "GET", f"/warehouse/{{warehouse_id}}/{kind}/{{{kind}_id}}/history", tabular_history,
        f"Every event of one {kind}, in order", "audit",
        query=audit.PageQuery, response=audit.EventPage, errors=(400, 404),
        operation_id=f"get{kind.capitalize()}History",
    )  # fmt: skip


def _permissions() -> list[Operation]:
    """Assignments and my access, for each kind of object (Lakekeeper's paths)."""
    found = []
    for base, resolve in permissions.OBJECTS.items():
        what = base.removeprefix("/permissions/").split("/{")[0].replace("/", "-")
        parts = [p for p in base.split("/")[2:] if not p.startswith("{")]
        name = "".join(part.capitalize() for part in parts) + (
            "ById" if base.endswith("}") and parts[-1] == "project" else ""
        )
        found += [
            Operation(
                "GET", f"{base}/assignments", permissions.get_assignments(resolve),
                f"Who holds which relation on the {what}", "permissions",
                query=perm.AssignmentsQuery, response=perm.GetAssignmentsResponse,
                errors=(400, 403, 404), operation_id=f"get{name}Assignments",
            ),
            Operation(
                "POST", f"{base}/assignments", permissions.update_assignments(resolve),
                f"Grant and revoke relations on the {what} (deletes first)", "permissions",
                body=perm.UpdateAssignmentsRequest, errors=(400, 403, 404),
                operation_id=f"update{name}Assignments",
            ),
            Operation(
                "GET", f"{base}/access", permissions.get_access(resolve),
                f"The actions the caller (or the given principal) may do on the {what}",
                "permissions", query=perm.AccessQuery, response=perm.GetAccessResponse,
                errors=(400, 403, 404), operation_id=f"get{name}Access",
            ),
        ]  # fmt: skip
    return found


WAREHOUSE = "/warehouse/{warehouse_id}"
NAMESPACE = WAREHOUSE + "/namespace/{namespace_id}"

MANAGEMENT_OPERATIONS: list[Operation] = [
    # -- server
    Operation(
        "GET", "/info", mgmt.info, "Server version, bootstrap state and backend", "server",
        response=m.ServerInfo, errors=(), operation_id="getServerInfo",
    ),
    Operation(
        "POST", "/bootstrap", mgmt.bootstrap, "Bootstrap the server (once)", "server",
        body=m.BootstrapRequest, operation_id="bootstrap",
    ),
    # -- users
    Operation(
        "GET", "/whoami", users.whoami, "The calling user", "user",
        response=user_models.User, errors=(404,), operation_id="whoami",
    ),
    Operation(
        "GET", "/user", users.list_users, "List users, by name", "user",
        query=user_models.ListUsersQuery, response=user_models.ListUsersResponse,
        operation_id="listUsers",
    ),
    Operation(
        "POST", "/user", users.create_user,
        "Provision a user: the caller from their token (no id), or a user by id", "user",
        body=user_models.CreateUserRequest, response=user_models.User,
        operation_id="createUser",
    ),
    Operation(
        "GET", "/user/{user_id}", users.get_user, "Get a user", "user",
        response=user_models.User, errors=(404,), operation_id="getUser",
    ),
    Operation(
        "PUT", "/user/{user_id}", users.update_user, "Replace a user's name, e-mail, type",
        "user", body=user_models.UpdateUserRequest, errors=(400, 404),
        operation_id="updateUser",
    ),
    Operation(
        "DELETE", "/user/{user_id}", users.delete_user,
        "Delete a user (and every grant they held); a later authenticated call provisions "
        "them again. The server's last admin cannot be deleted (409)", "user",
        errors=(404, 409), operation_id="deleteUser",
    ),
    # -- roles and permissions
    Operation(
        "POST", "/role", permissions.create_role, "Create a role in a project", "role",
        body=perm.CreateRoleRequest, response=perm.RoleAnswer, errors=(400, 403, 404, 409),
        headers=(PROJECT_HEADER,), operation_id="createRole",
    ),
    Operation(
        "GET", "/role", permissions.list_roles, "List the roles of the project", "role",
        query=perm.ListRolesQuery, response=perm.ListRolesResponse, errors=(400, 403),
        headers=(PROJECT_HEADER,), operation_id="listRoles",
    ),
    Operation(
        "GET", "/role/{role_id}", permissions.get_role, "Get a role", "role",
        response=perm.RoleAnswer, errors=(400, 403, 404), operation_id="getRole",
    ),
    Operation(
        "POST", "/role/{role_id}", permissions.update_role, "Rename or describe a role", "role",
        body=perm.UpdateRoleRequest, response=perm.RoleAnswer, errors=(400, 403, 404, 409),
        operation_id="updateRole",
    ),
    Operation(
        "DELETE", "/role/{role_id}", permissions.delete_role,
        "Delete a role, its memberships and the grants it held", "role",
        errors=(400, 403, 404), operation_id="deleteRole",
    ),
    *_permissions(),
    Operation(
        "POST", "/permissions/check", permissions.check,
        "May the caller (or another identity) do an action on an object?", "permissions",
        body=perm.CheckRequest, response=perm.CheckResponse, errors=(400, 403, 404),
        operation_id="checkPermission",
    ),
    Operation(
        "GET", "/warehouse/{warehouse_id}/namespace-id", permissions.namespace_id_of,
        "The id of a namespace, by its name (for the permission routes)", "permissions",
        query=perm.NamespaceIdQuery, response=perm.NamespaceIdResponse, errors=(400, 404),
        operation_id="getNamespaceId",
    ),
    # -- projects
    Operation(
        "POST", "/project", mgmt.create_project, "Create a project", "project",
        body=m.CreateProjectRequest, response=m.CreateProjectResponse, errors=(400, 409),
        operation_id="createProject",
    ),
    Operation(
        "GET", "/project-list", mgmt.list_projects, "List every project", "project",
        response=m.ListProjectsResponse, errors=(), operation_id="listProjects",
    ),
    *_projects(),
    # -- warehouses
    Operation(
        "POST", "/warehouse", mgmt.create_warehouse, "Create a warehouse", "warehouse",
        body=m.CreateWarehouseRequest, response=m.CreateWarehouseResponse,
        errors=(400, 404, 409, 503), headers=(PROJECT_HEADER,), operation_id="createWarehouse",
    ),
    Operation(
        "GET", "/warehouse", mgmt.list_warehouses,
        "List the warehouses of the project of `x-project-id`", "warehouse",
        response=m.ListWarehousesResponse, headers=(PROJECT_HEADER,),
        operation_id="listWarehouses",
    ),
    Operation(
        "GET", WAREHOUSE, mgmt.get_warehouse, "Get a warehouse", "warehouse",
        response=m.GetWarehouseResponse, errors=(400, 404), operation_id="getWarehouse",
    ),
    Operation(
        "DELETE", WAREHOUSE, mgmt.delete_warehouse,
        "Delete a warehouse; it must have no namespaces", "warehouse",
        errors=(400, 404, 409), operation_id="deleteWarehouse",
    ),
    Operation(
        "POST", f"{WAREHOUSE}/rename", mgmt.rename_warehouse, "Rename a warehouse", "warehouse",
        body=m.RenameWarehouseRequest, errors=(400, 404, 409), operation_id="renameWarehouse",
    ),
    Operation(
        "POST", f"{WAREHOUSE}/storage", mgmt.update_storage,
        "New storage settings for the same storage location (same type and base-location), "
        "optionally with a new credential", "warehouse",
        body=m.UpdateWarehouseStorageRequest, errors=_STORAGE_ERRORS,
        operation_id="updateStorageProfile",
    ),
    Operation(
        "POST", f"{WAREHOUSE}/storage-credential", mgmt.update_storage_credential,
        "A new credential for the warehouse's storage (key rotation)", "warehouse",
        body=m.UpdateWarehouseCredentialRequest, errors=_STORAGE_ERRORS,
        operation_id="updateStorageCredential",
    ),
    Operation(
        "POST", f"{WAREHOUSE}/delete-profile", mgmt.update_delete_profile,
        "Change the warehouse's delete profile (hard or soft)", "warehouse",
        body=m.UpdateWarehouseDeleteProfileRequest, errors=(400, 404),
        operation_id="updateDeleteProfile",
    ),
    Operation(
        "DELETE", f"{WAREHOUSE}/namespace/{{namespace_id}}", mgmt.drop_namespace_by_id,
        "Drop a namespace by id; `recursive=true` drops everything inside", "warehouse",
        query=m.DropNamespaceQuery, errors=(400, 404, 409), operation_id="dropNamespaceById",
    ),
    *_protection(),
    # -- functions (Iceberg UDFs; the catalog API lists and loads them)
    _function_write(
        "POST", f"{NAMESPACE}/function", functions.create_function, fn.CreateFunctionRequest,
        "createFunction",
        "Create a function: its definitions (the catalog assigns the function-uuid, version "
        "ids and times), or a complete function metadata document to adopt",
    ),
    _function_write(
        "PUT", f"{NAMESPACE}/function/{{function}}", functions.replace_function,
        fn.ReplaceFunctionRequest, "replaceFunction",
        "Replace a function: new current versions of definitions, removals, rollbacks, doc, "
        "properties — one new metadata file",
    ),
    Operation(
        "DELETE", f"{NAMESPACE}/function/{{function}}", functions.drop_function,
        "Drop a function (its metadata files stay)", "function",
        errors=(400, 404), operation_id="dropFunction",
    ),
    # -- soft delete and tasks
    Operation(
        "GET", f"{WAREHOUSE}/deleted-tabulars", soft_delete.list_deleted_tabulars,
        "Soft-deleted tables and views, oldest drop first", "soft-delete",
        query=lifecycle.DeletedTabularsQuery, response=lifecycle.ListDeletedTabularsResponse,
        errors=(400, 404), operation_id="listDeletedTabulars",
    ),
    _undrop(
        f"{WAREHOUSE}/deleted-tabulars/undrop",
        "Restore soft-deleted tables and views (all or none)", "undropTabulars",
    ),
    _undrop(
        f"{WAREHOUSE}/deleted_tabulars/undrop",
        "Deprecated spelling of deleted-tabulars/undrop (Lakekeeper)", "undropTabularsDeprecated",
        deprecated=True,
    ),
    Operation(
        "POST", f"{WAREHOUSE}/task/list", soft_delete.list_tasks,
        "Tasks of the warehouse (expirations and purges), with their state", "tasks",
        body=lifecycle.ListTasksRequest, body_required=False, response=lifecycle.ListTasksResponse,
        errors=(400, 404), operation_id="listTasks",
    ),
    Operation(
        "GET", f"{WAREHOUSE}/task/by-id/{{task_id}}", soft_delete.get_task, "One task", "tasks",
        response=lifecycle.Task, errors=(400, 404), operation_id="getTask",
    ),
    # -- audit
    Operation(
        "GET", "/events", list_events, "The event log, paged by position, with filters", "audit",
        query=audit.EventsQuery, response=audit.EventPage, errors=(400, 404),
        operation_id="listEvents",
    ),
    Operation(
        "GET", "/as-of", as_of,
        "The catalog as of a log position or a time, one page at a time", "audit",
        query=audit.AsOfQuery, response=audit.CatalogAsOf, description=AS_OF,
        operation_id="getCatalogAsOf",
    ),
    _history("table"),
    _history("view"),
]  # fmt: skip
MANAGEMENT_OPERATIONS = guarded(MANAGEMENT_OPERATIONS)

"""The management API's operations (`/management/v1`), shaped like Lakekeeper's; its OpenAPI
document is generated from them (api/openapi.py)."""

from __future__ import annotations

from icelog.api.edge import Operation, legacy
from icelog.api.event_log import as_of, list_events, tabular_history
from icelog.api.routes import lifecycle, management

MANAGEMENT_OPERATIONS: list[Operation] = [
    legacy("GET", "/info", management.info),
    legacy("POST", "/bootstrap", management.bootstrap),
    legacy("POST", "/project", management.create_project),
    legacy("GET", "/project", management.get_project),
    legacy("DELETE", "/project", management.delete_project),
    legacy("POST", "/project/rename", management.rename_project),
    legacy("GET", "/project-list", management.list_projects),
    legacy("GET", "/project/{project_id}", management.get_project),
    legacy("DELETE", "/project/{project_id}", management.delete_project),
    legacy("POST", "/project/{project_id}/rename", management.rename_project),
    legacy("POST", "/warehouse", management.create_warehouse),
    legacy("GET", "/warehouse", management.list_warehouses),
    legacy("GET", "/warehouse/{warehouse_id}", management.get_warehouse),
    legacy("DELETE", "/warehouse/{warehouse_id}", management.delete_warehouse),
    legacy("POST", "/warehouse/{warehouse_id}/rename", management.rename_warehouse),
    legacy("POST", "/warehouse/{warehouse_id}/delete-profile", management.update_delete_profile),
    legacy("POST", "/warehouse/{warehouse_id}/storage", management.update_storage),
    legacy(
        "POST", "/warehouse/{warehouse_id}/storage-credential", management.update_storage_credential
    ),
    legacy(
        "DELETE",
        "/warehouse/{warehouse_id}/namespace/{namespace_id}",
        management.drop_namespace_by_id,
    ),
    legacy("GET", "/warehouse/{warehouse_id}/deleted-tabulars", lifecycle.list_deleted_tabulars),
    legacy("POST", "/warehouse/{warehouse_id}/deleted-tabulars/undrop", lifecycle.undrop_tabulars),
    legacy("POST", "/warehouse/{warehouse_id}/deleted_tabulars/undrop", lifecycle.undrop_tabulars),
    legacy("POST", "/warehouse/{warehouse_id}/task/list", lifecycle.list_tasks),
    legacy("GET", "/warehouse/{warehouse_id}/task/by-id/{task_id}", lifecycle.get_task),
    legacy("GET", "/events", list_events),
    legacy("GET", "/as-of", as_of),
    legacy("GET", "/warehouse/{warehouse_id}/table/{table_id}/history", tabular_history),
    legacy("GET", "/warehouse/{warehouse_id}/view/{view_id}/history", tabular_history),
    legacy("GET", "/warehouse/{warehouse_id}/protection", management.get_protection),
    legacy("POST", "/warehouse/{warehouse_id}/protection", management.set_protection),
    *(
        legacy(method, f"/warehouse/{{warehouse_id}}/{kind}/{{{kind}_id}}/protection", handler)
        for kind in ("table", "view", "namespace")
        for method, handler in (
            ("GET", management.get_protection),
            ("POST", management.set_protection),
        )
    ),
]

"""Management routes for soft-deleted tabulars and the task queue (Lakekeeper-shaped)."""

from __future__ import annotations

from uuid import UUID

from starlette.requests import Request

from icelog.api.http import context, parse_uuid
from icelog.api.models.lifecycle import (
    DeletedTabularsQuery,
    ListDeletedTabularsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Task,
    UndropTabularsRequest,
)
from icelog.api.routes import services
from icelog.api.routes.management import get_warehouse_row
from icelog.commands.catalog import UndropTarget
from icelog.domain.errors import NotFoundError
from icelog.domain.identifiers import reject_control_characters

MAX_PAGE_SIZE = 1000


def _warehouse_id(request: Request) -> str:
    return str(get_warehouse_row(request)["id"])


def list_deleted_tabulars(
    request: Request, query: DeletedTabularsQuery
) -> ListDeletedTabularsResponse:
    """Soft-deleted tables and views, paged (`pageToken`, `pageSize` default 100),
    optionally only those of one namespace (`namespaceId`)."""
    svc = services(request)
    warehouse_id = _warehouse_id(request)
    namespace = None
    if query.namespace_id is not None:
        namespace = svc.catalog.namespaces.namespace_name(UUID(warehouse_id), query.namespace_id)
    items, next_token = svc.queries.deleted_tabulars(
        warehouse_id, namespace, query.page_token, min(query.page_size, MAX_PAGE_SIZE)
    )
    return ListDeletedTabularsResponse.model_validate(
        {"tabulars": items, "next-page-token": next_token}
    )


def undrop_tabulars(request: Request, body: UndropTabularsRequest) -> None:
    """Restore soft-deleted tabulars (all or none). A target may carry `new-name` to come
    back under another name in its namespace when its old name was taken meanwhile."""
    targets = []
    for target in body.targets:
        if target.new_name is not None:
            reject_control_characters(target.new_name, "new-name")
        targets.append(
            UndropTarget(kind=target.type, tabular_id=target.id, new_name=target.new_name)
        )
    services(request).catalog.lifecycle.undrop_tabulars(
        context(request), UUID(_warehouse_id(request)), targets
    )


def list_tasks(request: Request, body: ListTasksRequest | None) -> ListTasksResponse:
    """Tasks of a warehouse, optionally filtered by `entity-id` and `status`."""
    wanted = body or ListTasksRequest()
    tasks = services(request).queries.tasks(
        _warehouse_id(request),
        entity_id=str(wanted.entity_id) if wanted.entity_id is not None else None,
        status=wanted.status,
    )
    return ListTasksResponse.model_validate({"tasks": tasks})


def get_task(request: Request) -> Task:
    warehouse_id = _warehouse_id(request)
    task_id = parse_uuid(request.path_params["task_id"], "task id")
    found = services(request).queries.task(str(task_id))
    if found is None or found["warehouse-id"] != warehouse_id:
        raise NotFoundError(f"Task does not exist: {task_id}")
    return Task.model_validate(found)

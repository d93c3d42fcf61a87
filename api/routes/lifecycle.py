"""Management routes for soft-deleted tabulars and the task queue (Lakekeeper-shaped)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from starlette.requests import Request
from starlette.responses import Response

from icelog.api.http import (
    context,
    json_response,
    no_content,
    page_params,
    parse_uuid,
    require_object,
)
from icelog.api.routes import services
from icelog.api.routes.management import get_warehouse_row
from icelog.commands.catalog import UndropTarget
from icelog.domain.errors import BadRequestError, NotFoundError
from icelog.domain.identifiers import reject_control_characters
from icelog.domain.task import CANCELLED, FAILED, PENDING, RUNNING, SUCCEEDED

TASK_STATES = (PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED)


def _warehouse_id(request: Request) -> str:
    return str(get_warehouse_row(request)["id"])


def list_deleted_tabulars(request: Request, _body: Any) -> Response:
    """Soft-deleted tables and views, paged (`pageToken`, `pageSize` default 100),
    optionally only those of one namespace (`namespaceId`)."""
    svc = services(request)
    warehouse_id = _warehouse_id(request)
    token, size = page_params(request)
    namespace = None
    raw_ns = request.query_params.get("namespaceId")
    if raw_ns:
        namespace = svc.catalog.namespace_name(
            UUID(warehouse_id), parse_uuid(raw_ns, "namespaceId")
        )
    items, next_token = svc.queries.deleted_tabulars(warehouse_id, namespace, token, size or 100)
    return json_response({"tabulars": items, "next-page-token": next_token})


def _target(item: Any) -> UndropTarget:
    if not isinstance(item, dict):
        raise BadRequestError('each target must be {"type": "table"|"view", "id": "<uuid>"}')
    kind = item.get("type")
    if kind not in ("table", "view"):
        raise BadRequestError('target type must be "table" or "view"')
    new_name = item.get("new-name")
    if new_name is not None:
        if not isinstance(new_name, str) or not new_name:
            raise BadRequestError("new-name must be a non-empty string")
        reject_control_characters(new_name, "new-name")
    return UndropTarget(
        kind=kind, tabular_id=parse_uuid(item.get("id"), "target id"), new_name=new_name
    )


def undrop_tabulars(request: Request, body: Any) -> Response:
    """Restore soft-deleted tabulars (all or none). A target may carry `new-name` to come
    back under another name in its namespace when its old name was taken meanwhile."""
    data = require_object(body, "UndropTabularsRequest")
    targets = data.get("targets")
    if not isinstance(targets, list) or not targets:
        raise BadRequestError("targets must be a non-empty array")
    svc = services(request)
    svc.catalog.undrop_tabulars(
        context(request), UUID(_warehouse_id(request)), [_target(t) for t in targets]
    )
    return no_content()


def list_tasks(request: Request, body: Any) -> Response:
    """Tasks of a warehouse, optionally filtered by `entity-id` and `status`."""
    data = require_object(body if body is not None else {}, "ListTasksRequest")
    warehouse_id = _warehouse_id(request)
    entity = data.get("entity-id")
    status = data.get("status")
    if status is not None and status not in TASK_STATES:
        raise BadRequestError(f"status must be one of {', '.join(TASK_STATES)}")
    tasks = services(request).queries.tasks(
        warehouse_id,
        entity_id=str(parse_uuid(entity, "entity-id")) if entity is not None else None,
        status=status,
    )
    return json_response({"tasks": tasks})


def get_task(request: Request, _body: Any) -> Response:
    warehouse_id = _warehouse_id(request)
    task_id = parse_uuid(request.path_params["task_id"], "task id")
    found = services(request).queries.task(str(task_id))
    if found is None or found["warehouse-id"] != warehouse_id:
        raise NotFoundError(f"Task does not exist: {task_id}")
    return json_response(found)

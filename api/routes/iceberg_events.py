"""`POST /v1/{prefix}/events` (apache/iceberg PR #12584): the warehouse's catalog changes in
log order, from the Iceberg events read model (projections/iceberg_events.py, ADR 0015).

The continuation token carries the position and the filters; a request may repeat the
filters with it, but not change them. A page looks at a bounded number of rows, so it may
hold fewer events than asked (even none) with a token further on: keep asking until a
page comes back empty to be caught up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import orjson
from starlette.requests import Request

from icelog.api.auth.guards import authorizer, may
from icelog.api.event_log import Indexer
from icelog.api.models.events import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, QueryEventsRequest
from icelog.api.routes import prefix, services
from icelog.domain.errors import BadRequestError, GoneError, NoSuchWarehouseError
from icelog.domain.permissions import ObjectRef
from icelog.projections.iceberg_events import (
    GRANT_OPERATIONS,
    BadToken,
    Cursor,
    EventsFilter,
    IcebergEventRow,
    IcebergEvents,
    Page,
)

CUSTOM_FILTERS = frozenset({"x-icelog.actor"})
DAY_MS = 86_400_000


async def query_events(request: Request, body: QueryEventsRequest) -> bytes:
    indexer: Indexer = request.app.state.indexer
    # Catch up first: whoever just wrote sees their own changes.
    await asyncio.to_thread(indexer.catch_up)
    return await asyncio.to_thread(_answer, request, indexer.iceberg, body)


def _answer(request: Request, store: IcebergEvents, body: QueryEventsRequest) -> bytes:
    svc = services(request)
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    days: float = svc.settings.events_retention_days
    warehouse = svc.primary.warehouse(warehouse_id)
    if warehouse is None:
        raise NoSuchWarehouseError(f"Warehouse does not exist: {warehouse_id}")
    project_id = str(warehouse["project-id"])
    streams = [warehouse_id, project_id]
    asked = _filter(body)
    cutoff = int(time.time() * 1000 - days * DAY_MS) if days > 0 else None
    if body.continuation_token is not None:
        cursor = _cursor(body.continuation_token, warehouse_id, asked)
        if cutoff is not None and store.cut_before(streams, cursor.position, cutoff):
            raise GoneError(
                "The continuation-token points before the retention window "
                f"({days:g} days): start again without it"
            )
    else:
        since = body.since_timestamp_ms
        start = store.start_after(streams, since) if since is not None else 0
        if cutoff is not None:
            if since is not None and since < cutoff and store.cut_before(streams, start, cutoff):
                raise GoneError(
                    f"since-timestamp-ms lies before the retention window ({days:g} days)"
                )
            start = max(start, store.start_after(streams, cutoff))
        cursor = Cursor(warehouse_id, start, asked)
    size = min(body.page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    page = store.page(
        streams, cursor.filter, cursor.position, size, _hidden(request, warehouse_id, project_id)
    )
    return _render(page, Cursor(warehouse_id, page.last_position, cursor.filter))


def _hidden(request: Request, warehouse_id: str, project_id: str) -> dict[str, Sequence[str]]:
    """Grants and revokes show who holds what: only to whoever may read the assignments of
    the warehouse (of the project, for the project's own grants), as the permissions API."""
    if not authorizer(request).enabled:
        return {}
    hidden: dict[str, Sequence[str]] = {}
    for stream, obj in (
        (warehouse_id, ObjectRef("warehouse", warehouse_id)),
        (project_id, ObjectRef("project", project_id)),
    ):
        if not may(request, obj, "read_assignments"):
            hidden[stream] = GRANT_OPERATIONS
    return hidden


def _filter(body: QueryEventsRequest) -> EventsFilter:
    custom = body.custom_filters or {}
    unknown = sorted(set(custom) - CUSTOM_FILTERS)
    if unknown:
        raise BadRequestError(
            f"Unknown custom-filters: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(CUSTOM_FILTERS))})"
        )
    return EventsFilter(
        operation_types=tuple(body.operation_types or ()),
        names=tuple(tuple(levels) for levels in body.catalog_objects_by_name or ()),
        uuids=tuple(str(u) for u in body.catalog_objects_by_uuid or ()),
        object_types=tuple(body.object_types or ()),
        actor=custom.get("x-icelog.actor"),
    )


def _cursor(token: str, warehouse_id: str, asked: EventsFilter) -> Cursor:
    try:
        cursor = Cursor.decode(token)
    except BadToken as exc:
        raise BadRequestError(f"Invalid continuation-token: {exc}") from None
    if cursor.warehouse_id != warehouse_id:
        raise BadRequestError("Invalid continuation-token: it belongs to another warehouse")
    if asked != EventsFilter() and asked != cursor.filter:
        raise BadRequestError(
            "The filters differ from the ones the continuation-token was made with: "
            "send the same filters, or none, or start again without the token"
        )
    return cursor


def _event(row: IcebergEventRow, count: int) -> dict[str, Any]:
    event: dict[str, Any] = {
        "event-id": row.event_id,
        "request-id": row.request_id,
        "request-event-count": count,
        "timestamp-ms": row.timestamp_ms,
    }
    if row.actor:
        event["actor"] = {"id": row.actor}
    event["operation"] = row.operation
    return event


def _render(page: Page, cursor: Cursor) -> bytes:
    return orjson.dumps(
        {
            "continuation-token": cursor.encode(),
            "events": [_event(row, count) for row, count in page.rows],
        }
    )

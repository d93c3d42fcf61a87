"""The event-log API's indexer and routes: `GET /management/v1/events` and per-table/view
history, served from the event index (projections/event_index.py)."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from starlette.requests import Request
from starlette.responses import Response

from api.http import json_response, parse_uuid
from api.publishing import LogAccess
from api.routes.management import get_warehouse_row
from api.services import Services
from domain.errors import BadRequestError
from projections.as_of import CatalogAsOf
from projections.event_index import EventFilter, EventIndex, IndexRow
from publishers.cloud_events import event_data
from publishers.context import ContextResolver

MAX_LIMIT = 1000


class Indexer:
    """Follows the log into the event index, in order, one batch at a time."""

    def __init__(self, services: Services) -> None:
        self.log = LogAccess(services)
        self.index = EventIndex(services.catalog.recorder.datastore)  # type: ignore[attr-defined]
        self.resolver = ContextResolver(self.log.load_at)
        self._lock = threading.Lock()  # one catch-up at a time per process

    def catch_up(self, batch: int = 2000) -> int:
        done = 0
        with self._lock:
            position = self.index.position()
            while True:
                found = self.log.read(position, batch)
                if not found:
                    return done
                rows = []
                for item in found:
                    event = item.event
                    context = self.resolver.resolve(event)
                    rows.append(
                        IndexRow(
                            position=item.position,
                            time=event.timestamp.isoformat(),
                            time_us=int(event.timestamp.timestamp() * 1_000_000),
                            type="io." + item.topic,
                            aggregate_id=str(event.originator_id),
                            version=event.originator_version,
                            actor=getattr(event, "actor", None),
                            request_id=getattr(event, "request_id", None) or None,
                            warehouse_id=_text(context.warehouse_id),
                            namespace=".".join(context.namespace) if context.namespace else None,
                            tabular_id=_text(context.tabular_id),
                            subject=context.subject,
                            data=event_data(event),
                        )
                    )
                self.index.write(rows)
                position = found[-1].position
                done += len(found)
                if done >= 5_000 and len(found) < batch:
                    self.index.analyze()  # a bulk catch-up changes the plans' picture

    def catalog_at(self, position: int | None, time_us: int | None) -> CatalogAsOf:
        """The catalog as of a log position, or as of a time (its last event by then)."""
        if time_us is not None:
            self.catch_up()
            position = self.index.position_at(time_us)
        target = position or 0
        model = CatalogAsOf()
        after = 0
        while after < target:
            batch = [i for i in self.log.read(after, 2000) if i.position <= target]
            if not batch:
                break
            for item in batch:
                model.apply(item.position, item.event)
            after = batch[-1].position
        return model


def _text(value: UUID | None) -> str | None:
    return str(value) if value is not None else None


MAX_POSITION = 2**63 - 1


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw or "")
    except ValueError:
        raise BadRequestError(f"{name} must be an integer") from None
    if value < 0:
        raise BadRequestError(f"{name} must not be negative")
    if value > MAX_POSITION:  # the databases store 64-bit integers
        raise BadRequestError(f"{name} must be at most {MAX_POSITION}")
    return value


def _time(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if not raw:
        return None
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        raise BadRequestError(
            f"{name} must be an ISO-8601 time, e.g. 2026-11-22T10:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1_000_000)


def _uuid(raw: str | None, name: str) -> str | None:
    """An optional id filter, normalised."""
    return None if raw in (None, "") else str(parse_uuid(raw, name))


def _limit(request: Request) -> int:
    return min(_int(request, "limit", 100), MAX_LIMIT) or 100


async def _page(request: Request, f: EventFilter, *, warehouse_id: str | None = None) -> Response:
    """One page of events; with `warehouse_id`, empty when they belong to another one."""
    indexer: Indexer = request.app.state.indexer
    # Catch up first: whoever just wrote sees their own events.
    await asyncio.to_thread(indexer.catch_up)
    found = await asyncio.to_thread(indexer.index.query, f)
    if warehouse_id is not None and found and found[0]["warehouse-id"] != warehouse_id:
        found = []
    next_after = found[-1]["position"] if len(found) == f.limit else None
    return json_response({"events": found, "next-after": next_after})


async def list_events(request: Request, _body: Any) -> Response:
    q = request.query_params
    f = EventFilter(
        after=_int(request, "after", 0),
        limit=_limit(request),
        warehouse_id=_uuid(q.get("warehouse-id"), "warehouse-id"),
        namespace=q.get("namespace") or None,
        tabular_id=_uuid(q.get("tabular-id"), "tabular-id"),
        aggregate_id=_uuid(q.get("aggregate-id"), "aggregate-id"),
        type_prefix=q.get("type") or None,
        actor=q.get("actor") or None,
        since_us=_time(request, "since"),
        until_us=_time(request, "until"),
    )
    return await _page(request, f)


async def tabular_history(request: Request, _body: Any) -> Response:
    warehouse = await asyncio.to_thread(get_warehouse_row, request)
    kind = "table" if "table_id" in request.path_params else "view"
    entity = _uuid(request.path_params[f"{kind}_id"], f"{kind} id")
    # By aggregate alone (its own index); an id from another warehouse has no history here.
    f = EventFilter(
        after=_int(request, "after", 0),
        limit=_limit(request),
        aggregate_id=entity,
        type_prefix=f"io.icelog.{kind}.",
    )
    return await _page(request, f, warehouse_id=str(warehouse["id"]))


async def as_of(request: Request, _body: Any) -> Response:
    """`?position=N` or `?time=ISO-8601` (one of them), optionally `&warehouse-id=`."""
    position_raw = request.query_params.get("position")
    time_us = _time(request, "time")
    if (position_raw in (None, "")) == (time_us is None):
        raise BadRequestError("give exactly one of position or time")
    position = None if time_us is not None else _int(request, "position", 0)
    warehouse = _uuid(request.query_params.get("warehouse-id"), "warehouse-id")
    indexer: Indexer = request.app.state.indexer
    model = await asyncio.to_thread(indexer.catalog_at, position, time_us)
    return json_response(model.snapshot(warehouse))


def make_indexer(app_state: Any, svc: Services) -> Indexer:
    indexer = Indexer(svc)
    indexer.index.ensure_schema()
    app_state.indexer = indexer
    return indexer

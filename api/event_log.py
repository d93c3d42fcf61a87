"""The event-log API's indexer and routes: `GET /management/v1/events` and per-table/view
history, served from the event index (projections/event_index.py), and `GET
/management/v1/as-of`, served from the catalog history (projections/catalog_history.py)."""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from eventsourcing.postgres import PostgresRecorder
from eventsourcing.sqlite import SQLiteRecorder
from starlette.requests import Request

from icelog.api.http import parse_uuid
from icelog.api.models.audit import (
    MAX_POSITION,
    AsOfQuery,
    CatalogAsOf,
    EventPage,
    EventsQuery,
    PageQuery,
)
from icelog.api.publishing import LogAccess
from icelog.api.routes.management import get_warehouse_row
from icelog.api.services import Services
from icelog.domain.errors import BadRequestError
from icelog.projections.as_of import MAX_PAGE_SIZE, AsOfPage, PageToken, read_page
from icelog.projections.catalog_history import CatalogHistory
from icelog.projections.event_index import EventFilter, EventIndex, IndexRow
from icelog.projections.iceberg_events import IcebergEventRow, IcebergEvents
from icelog.projections.iceberg_operations import Mapped, Place, grant_operation, map_event
from icelog.publishers.cloud_events import EventContext, cloud_event_id, event_data
from icelog.publishers.context import ContextResolver
from icelog.publishers.relay import LoggedEvent


class Indexer:
    """Follows the log into the event index and the catalog history, in order, one batch
    at a time; both are written in one transaction per batch."""

    def __init__(self, services: Services) -> None:
        self.log = LogAccess(services)
        recorder = services.catalog.app.recorder
        assert isinstance(recorder, SQLiteRecorder | PostgresRecorder)
        datastore = recorder.datastore
        self.index = EventIndex(datastore)
        self.history = CatalogHistory(datastore)
        self.iceberg = IcebergEvents(datastore)
        self.resolver = ContextResolver(self.log.load_at)
        self._lock = threading.Lock()  # one catch-up at a time per process
        self._schema_ready = False
        # The request of the last event read, and the position its events began at: the
        # events of one request are appended together, so they are neighbours in the log.
        self._request: tuple[int, str, int] | None = None  # (position, request id, group)

    def ensure_schema(self) -> None:
        self.index.ensure_schema()
        self.history.ensure_schema()
        self.iceberg.ensure_schema()
        self._schema_ready = True

    def _ready(self) -> None:
        # Commands that built an Indexer before the history existed ensured the index only.
        if not self._schema_ready:
            self.ensure_schema()

    def position(self) -> int:
        """How far all are: a history rebuilt from scratch (or the Iceberg events, new in a
        database indexed before them) starts behind the index."""
        return min(self.index.position(), self.history.position(), self.iceberg.position())

    def catch_up(self, batch: int = 2000) -> int:
        done = 0
        with self._lock:
            self._ready()
            position = self.position()
            while True:
                found = self.log.read(position, batch)
                if not found:
                    return done
                if self._request is None or self._request[0] != position:
                    # Not where this process left off (a restart, another replica indexed
                    # meanwhile): find the request the previous event belongs to.
                    self._request = self._resume(found[0].position)
                rows: list[IndexRow] = []
                iceberg: list[IcebergEventRow] = []
                for item in found:
                    row, context = self._row(item)
                    rows.append(row)
                    mapped = self._iceberg_row(item, row, context)
                    if mapped is not None:
                        iceberg.append(mapped)
                events = [(item.position, item.event) for item in found]
                also = functools.partial(self.iceberg.write, iceberg, found[-1].position)
                self.history.write_batch(self.index, rows, events, also=also)
                position = found[-1].position
                done += len(found)
                if done >= 5_000 and len(found) < batch:
                    self.index.analyze()  # a bulk catch-up changes the plans' picture
                    self.history.analyze()

    def _row(self, item: LoggedEvent) -> tuple[IndexRow, EventContext]:
        event = item.event
        context = self.resolver.resolve(event)
        return IndexRow(
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
        ), context

    def _iceberg_row(
        self, item: LoggedEvent, row: IndexRow, context: EventContext
    ) -> IcebergEventRow | None:
        """The Iceberg events API's view of a logged event (projections/iceberg_operations)."""
        group = self._group(item.position, row.request_id or "")
        place = Place(
            aggregate_id=row.aggregate_id,
            warehouse_id=row.warehouse_id,
            namespace=context.namespace,
            name=context.name,
        )
        if item.topic.startswith("icelog.grants."):
            mapped = self._grant(item.topic, row.data)
        else:
            mapped = map_event(item.topic, row.data, place)
        if mapped is None:
            return None
        event_id = cloud_event_id(item.event.originator_id, row.version)
        return IcebergEventRow(
            position=item.position,
            stream=mapped.stream,
            object_type=mapped.object_type,
            object_uuid=mapped.object_uuid,
            path=mapped.path,
            from_path=mapped.from_path,
            operation_type=mapped.operation_type,
            event_id=event_id,
            # Background work (expiry, purge) has no request: the event stands alone.
            request_id=row.request_id or event_id,
            request_group=group,
            timestamp_ms=row.time_us // 1000,
            actor=row.actor,
            operation=mapped.operation,
        )

    def _grant(self, topic: str, data: dict[str, Any]) -> Mapped | None:
        kind, object_id = str(data.get("object-kind")), str(data.get("object-id"))
        warehouse, levels, name = self.resolver.place_of(kind, object_id)
        path = None if levels is None else (*levels, name) if name else levels
        project = object_id if kind == "project" else None
        return grant_operation(topic.split(".")[2], data, _text(warehouse), project, path)

    def _group(self, position: int, request_id: str) -> int:
        """The first position of the run of neighbouring events with this request id."""
        last = self._request
        same = last is not None and request_id != "" and last[1] == request_id
        group = last[2] if last is not None and same else position
        self._request = (position, request_id, group)
        return group

    def _resume(self, position: int) -> tuple[int, str, int]:
        """The request run of the indexed event before `position` (after a restart)."""
        before = self.index.request_run_before(position)
        return before if before is not None else (0, "", 0)

    def catalog_page(self, ask: AsOfRequest) -> dict[str, Any]:
        """One page of the catalog as of a log position or a time (its last event by
        then); a page token carries the position its first page resolved to."""
        self._ready()
        token = PageToken.decode(ask.page_token) if ask.page_token else None
        if token is not None and token.warehouse_id != ask.warehouse_id:
            raise BadRequestError("page-token belongs to another warehouse-id")
        position, time = self._moment(token.position if token is not None else ask.position, ask)
        return read_page(
            self.history,
            AsOfPage(
                position=position,
                time=time,
                warehouse_id=ask.warehouse_id,
                page_size=ask.page_size,
                after=token.after if token is not None else None,
            ),
        )

    def resolve(self, moment: tuple[int | None, int | None]) -> int:
        """The position of the last event at or before a (position, time_us)."""
        self._ready()
        ask = AsOfRequest(position=moment[0], time_us=moment[1], warehouse_id=None,
                          page_size=1, page_token=None)  # fmt: skip
        return self._moment(moment[0], ask)[0]

    def grants_at(
        self,
        moment: tuple[int | None, int | None],
        *,
        principal_ids: Sequence[str] = (),
        object_id: str = "",
    ) -> tuple[int, str | None, list[tuple[str, str, str, str, str]]]:
        """Grants held at a past (position, time_us): the moment it resolved to, and the
        grants (object kind, object id, relation, principal kind, principal id)."""
        self._ready()
        ask = AsOfRequest(position=moment[0], time_us=moment[1], warehouse_id=None,
                          page_size=1, page_token=None)  # fmt: skip
        position, time = self._moment(moment[0], ask)
        with self.history.reading() as cur:
            rows = self.history.grants_at(
                cur, position, principal_ids=principal_ids, object_id=object_id
            )
        return position, time, rows

    def existed_at(self, position: int, entity_id: str) -> bool:
        """Whether the object `entity_id` existed at `position` (resolved by `resolve`)."""
        self._ready()
        with self.history.reading() as cur:
            return self.history.existed_at(cur, position, entity_id)

    def _moment(self, target: int | None, ask: AsOfRequest) -> tuple[int, str | None]:
        """The last event at or before `target` (else at or before `ask.time_us`): its
        position and time, with the history caught up to it."""
        if target is not None:
            target = min(target, MAX_POSITION)  # the databases store 64-bit integers
        # Positions the history holds read as they are; later ones (or a time) need the
        # log's latest events first: whoever just wrote sees their own writes.
        if target is None or target > self.position():
            self.catch_up()
        if target is None:
            target = self.index.position_at(ask.time_us or 0)
        return self.index.moment(target)


@dataclass(frozen=True)
class AsOfRequest:
    """`position` or `time_us` (microseconds since the epoch); `page_token` as given out."""

    position: int | None
    time_us: int | None
    warehouse_id: str | None = None
    page_size: int = MAX_PAGE_SIZE
    page_token: str | None = None


def _text(value: UUID | None) -> str | None:
    return str(value) if value is not None else None


async def _page(request: Request, f: EventFilter, *, warehouse_id: str | None = None) -> EventPage:
    """One page of events; with `warehouse_id`, empty when they belong to another one."""
    indexer: Indexer = request.app.state.indexer
    # Catch up first: whoever just wrote sees their own events.
    await asyncio.to_thread(indexer.catch_up)
    found = await asyncio.to_thread(indexer.index.query, f)
    if warehouse_id is not None and found and found[0]["warehouse-id"] != warehouse_id:
        found = []
    last = found[-1]["position"] if len(found) == f.limit else None
    return EventPage.model_validate(
        {
            "events": found,
            "next-after": None if f.newest_first else last,
            "next-before": last if f.newest_first else None,
        }
    )


async def list_events(request: Request, query: EventsQuery) -> EventPage:
    f = EventFilter(
        after=query.after,
        limit=query.page_size,
        warehouse_id=_text(query.warehouse_id),
        namespace=query.namespace,
        tabular_id=_text(query.tabular_id),
        aggregate_id=_text(query.aggregate_id),
        type_prefix=query.type,
        actor=query.actor,
        since_us=query.since,
        until_us=query.until,
        before=query.before,
        newest_first=query.order == "desc",
    )
    return await _page(request, f)


async def tabular_history(request: Request, query: PageQuery) -> EventPage:
    warehouse = await asyncio.to_thread(get_warehouse_row, request)
    kind = "table" if "table_id" in request.path_params else "view"
    entity = parse_uuid(request.path_params[f"{kind}_id"], f"{kind} id")
    # By aggregate alone (its own index); an id from another warehouse has no history here.
    f = EventFilter(
        after=query.after,
        limit=query.page_size,
        aggregate_id=str(entity),
        type_prefix=f"io.icelog.{kind}.",
    )
    return await _page(request, f, warehouse_id=str(warehouse["id"]))


async def as_of(request: Request, query: AsOfQuery) -> CatalogAsOf:
    """`?position=N` or `?time=ISO-8601` (one of them), optionally `&warehouse-id=`,
    `&page-size=` (1 to 1000) and `&page-token=` (a previous page's `next-page-token`)."""
    if (query.position is None) == (query.time is None):
        raise BadRequestError("give exactly one of position or time")
    ask = AsOfRequest(
        position=query.position,
        time_us=query.time,
        warehouse_id=_text(query.warehouse_id),
        page_size=query.page_size,
        page_token=query.page_token,
    )
    indexer: Indexer = request.app.state.indexer
    return CatalogAsOf.model_validate(await asyncio.to_thread(indexer.catalog_page, ask))


def make_indexer(app_state: Any, svc: Services) -> Indexer:
    indexer = Indexer(svc)
    indexer.ensure_schema()
    app_state.indexer = indexer
    return indexer


def catalog_document(indexer: Indexer, ask: AsOfRequest) -> Iterator[str]:
    """The whole catalog as of a position as one JSON document, in pieces, page by page:
    what `icelog catalog at` prints. Only one page is held at a time; a namespace continued
    on the next page goes on in the same object."""
    writer = _DocumentWriter()
    while True:
        page = indexer.catalog_page(ask)
        yield from writer.page(page)
        if not page["next-page-token"]:
            break
        ask = replace(ask, page_token=page["next-page-token"])
    yield from writer.end()


class _DocumentWriter:
    """Writes pages as one document: the head once, then each warehouse, namespace, table
    and view as it comes, closing a container when the next one starts."""

    def __init__(self) -> None:
        self._started = False
        self._warehouse: str | None = None
        self._namespace: list[str] | None = None
        self._in_views = False
        self._first = True  # no item yet in the array last opened

    def page(self, page: dict[str, Any]) -> Iterator[str]:
        if not self._started:
            self._started = True
            head = {k: page[k] for k in ("position", "time", "projects")}
            yield _dumps(head)[:-1] + ',\n "warehouses": ['
        for warehouse in page["warehouses"]:
            yield from self._open_warehouse(warehouse)
            for namespace in warehouse["namespaces"]:
                yield from self._open_namespace(namespace)
                for table in namespace["tables"]:
                    yield self._item(table, 3)
                if namespace["views"] and not self._in_views:
                    yield '], "views": ['
                    self._in_views, self._first = True, True
                for view in namespace["views"]:
                    yield self._item(view, 3)

    def end(self) -> Iterator[str]:
        yield from self._close_warehouse()
        yield "\n ]}\n"

    def _open_warehouse(self, warehouse: dict[str, Any]) -> Iterator[str]:
        if warehouse["warehouse-id"] == self._warehouse:
            return
        yield from self._close_warehouse()
        head = {k: v for k, v in warehouse.items() if k != "namespaces"}
        yield self._separator(1) + _dumps(head)[:-1] + ', "namespaces": ['
        self._warehouse, self._first = warehouse["warehouse-id"], True

    def _open_namespace(self, namespace: dict[str, Any]) -> Iterator[str]:
        if namespace.get("continued") and namespace["namespace"] == self._namespace:
            return
        yield from self._close_namespace()
        head = {"namespace": namespace["namespace"], "properties": namespace["properties"]}
        yield self._separator(2) + _dumps(head)[:-1] + ', "tables": ['
        self._namespace, self._in_views, self._first = namespace["namespace"], False, True

    def _close_namespace(self) -> Iterator[str]:
        if self._namespace is None:
            return
        yield "]}" if self._in_views else '], "views": []}'
        self._namespace, self._first = None, False

    def _close_warehouse(self) -> Iterator[str]:
        if self._warehouse is None:
            return
        yield from self._close_namespace()
        yield "]}"
        self._warehouse, self._first = None, False

    def _item(self, item: dict[str, Any], depth: int) -> str:
        return self._separator(depth) + _dumps(item)

    def _separator(self, depth: int) -> str:
        comma = "" if self._first else ","
        self._first = False
        return comma + "\n" + " " * depth


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)

"""The event log, per-tabular history and the catalog as of a past moment
(`/management/v1/events`, `.../history`, `/management/v1/as-of`)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AfterValidator, BeforeValidator, Field, StrictStr, WithJsonSchema

from icelog.api.models.management import Answer, Filters
from icelog.projections.as_of import MAX_PAGE_SIZE

MAX_POSITION = 2**63 - 1  # the databases store 64-bit integers
MAX_LIMIT = 1000

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _plain_text(value: str) -> str:
    """No name, type or actor holds a control character, and PostgreSQL text cannot hold
    NUL at all."""
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return value


def _microseconds(value: Any) -> int:
    """An ISO-8601 time (UTC when it names no zone) as microseconds since the epoch."""
    if not isinstance(value, str):
        raise ValueError("must be an ISO-8601 time")
    _plain_text(value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("must be an ISO-8601 time, e.g. 2026-11-22T10:00:00Z") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1_000_000)


Text = Annotated[StrictStr, AfterValidator(_plain_text)]
Position = Annotated[int, Field(ge=0, le=MAX_POSITION)]
Time = Annotated[
    int, BeforeValidator(_microseconds), WithJsonSchema({"type": "string", "format": "date-time"})
]


class PageQuery(Filters):
    after: Position = Field(default=0, description="Start after this log position")
    limit: Position = Field(default=100, description="Page size (100; at most 1000)")

    @property
    def page_size(self) -> int:
        return min(self.limit, MAX_LIMIT) or 100


class EventsQuery(PageQuery):
    warehouse_id: UUID | None = Field(
        default=None, alias="warehouse-id", description="Only this warehouse"
    )
    namespace: Text | None = Field(
        default=None, description="Dotted namespace, nested ones included"
    )
    tabular_id: UUID | None = Field(
        default=None, alias="tabular-id", description="Only events about this table or view"
    )
    aggregate_id: UUID | None = Field(
        default=None, alias="aggregate-id", description="Only this aggregate's events"
    )
    type: Text | None = Field(default=None, description="Type prefix, e.g. io.icelog.table.")
    actor: Text | None = Field(default=None, description="Only this actor")
    since: Time | None = Field(default=None, description="From (inclusive)")
    until: Time | None = Field(default=None, description="To (exclusive)")
    before: Position | None = Field(
        default=None, description="Only events before this log position (exclusive)"
    )
    order: Literal["asc", "desc"] = Field(
        default="asc",
        description="`asc`: oldest first, continue with `next-after`; `desc`: newest first, "
        "continue with `next-before`",
    )


class LoggedEvent(Answer):
    position: int
    time: str
    type: str
    aggregate_id: str
    version: int
    actor: str | None
    request_id: str | None
    warehouse_id: str | None
    namespace: str | None
    tabular_id: str | None
    subject: str | None
    data: dict[str, Any]


class EventPage(Answer):
    events: list[LoggedEvent]
    next_after: int | None = Field(
        description="Pass as `after` for the next page; null on the last (and newest first)"
    )
    next_before: int | None = Field(
        default=None,
        description="Newest first (`order=desc`): pass as `before` for the next, older page; "
        "null on the last (and oldest first)",
    )


class AsOfQuery(Filters):
    """`position` or `time`, exactly one."""

    position: Position | None = Field(default=None, description="A log position")
    time: Time | None = Field(default=None, description="Or a time")
    warehouse_id: UUID | None = Field(
        default=None, alias="warehouse-id", description="Only this warehouse"
    )
    page_size: Annotated[int, Field(ge=1, le=MAX_PAGE_SIZE)] = Field(
        default=MAX_PAGE_SIZE,
        alias="page-size",
        description=f"Namespaces, tables and views per page at most ({MAX_PAGE_SIZE})",
    )
    page_token: StrictStr | None = Field(
        default=None, alias="page-token", description="The previous page's next-page-token"
    )


class AsOfTabular(Answer):
    name: str
    id: UUID
    metadata_location: str | None
    soft_deleted: bool = Field(default=False, description="Present (true) when soft-deleted")


class AsOfNamespace(Answer):
    namespace: list[str]
    properties: dict[str, str]
    tables: list[AsOfTabular]
    views: list[AsOfTabular]
    continued: bool = Field(
        default=False,
        description="Present (true) when the namespace started on an earlier page",
    )


class AsOfWarehouse(Answer):
    warehouse_id: UUID
    name: str
    project_id: UUID | None
    namespaces: list[AsOfNamespace]


class AsOfProject(Answer):
    project_id: UUID
    name: str


class CatalogAsOf(Answer):
    position: int
    time: str | None
    projects: list[AsOfProject]
    warehouses: list[AsOfWarehouse]
    next_page_token: str | None = Field(
        description="Pass as `page-token` (with the same other parameters) for the next "
        "page; null on the last"
    )

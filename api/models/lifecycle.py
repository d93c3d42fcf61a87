"""Soft-deleted tabulars, undrop and the task queue (`/management/v1/warehouse/{id}/...`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args
from uuid import UUID

from pydantic import Field, StrictStr

from icelog.api.edge import Body
from icelog.api.models.management import Answer, Filters, Timestamp
from icelog.domain.task import CANCELLED, FAILED, PENDING, RUNNING, SUCCEEDED

TabularKind = Literal["table", "view"]
TaskStatus = Literal["pending", "running", "succeeded", "failed", "cancelled"]
assert set(get_args(TaskStatus)) == {PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED}


class DeletedTabularsQuery(Filters):
    """Lakekeeper's paging: `pageSize` defaults to 100 (at most 1000 are sent)."""

    namespace_id: UUID | None = Field(
        default=None, alias="namespaceId", description="Only those of this namespace"
    )
    page_token: StrictStr | None = Field(
        default=None, alias="pageToken", description="The previous page's next-page-token"
    )
    page_size: Annotated[int, Field(ge=1)] = Field(
        default=100, alias="pageSize", description="Tabulars per page (100; at most 1000)"
    )


class DeletedTabular(Answer):
    id: UUID
    name: str
    namespace: list[str]
    typ: TabularKind
    warehouse_id: UUID
    created_at: Timestamp
    deleted_at: Timestamp
    expiration_date: Timestamp
    deletion_kind: Literal["default", "purge"]


class ListDeletedTabularsResponse(Answer):
    tabulars: list[DeletedTabular]
    next_page_token: str | None


class UndropTarget(Body):
    type: TabularKind
    id: UUID
    new_name: Annotated[StrictStr, Field(min_length=1)] | None = Field(
        default=None, description="Restore under this name (same namespace) instead"
    )


class UndropTabularsRequest(Body):
    targets: Annotated[list[UndropTarget], Field(min_length=1)]


class ListTasksRequest(Body):
    entity_id: UUID | None = None
    status: TaskStatus | None = None


class Task(Answer):
    task_id: UUID
    queue_name: Literal["tabular-expiration", "tabular-purge"]
    warehouse_id: UUID
    entity_kind: TabularKind
    entity_id: UUID
    status: TaskStatus
    attempt: int
    max_attempts: int
    due_at_ms: int
    worker: str | None
    last_error: str | None
    payload: dict[str, Any]
    created_at: Timestamp
    updated_at: Timestamp
    result: dict[str, Any] | None = Field(
        description="What a succeeded attempt reported (a purge: files deleted, missing, skipped)"
    )


class ListTasksResponse(Answer):
    tasks: list[Task]

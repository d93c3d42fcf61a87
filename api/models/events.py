"""The Iceberg events API's request (apache/iceberg PR #12584, `QueryEventsRequest`).

The answer is rendered from stored operations (projections/iceberg_events.py): the shapes
of its `events` are the proposal's `Event` and operation schemas, checked by the
conformance tests rather than re-validated per request.
"""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from pydantic import Field, StrictInt, StrictStr

from icelog.api.edge import OpenBody

MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 100

Level = Annotated[StrictStr, Field(min_length=1)]


class QueryEventsRequest(OpenBody):
    continuation_token: Annotated[StrictStr, Field(min_length=1)] | None = None
    page_size: Annotated[StrictInt, Field(ge=1, le=2**31 - 1)] | None = None
    since_timestamp_ms: Annotated[StrictInt, Field(ge=0, le=2**63 - 1)] | None = None
    operation_types: Annotated[list[Level], Field(max_length=100)] | None = None
    catalog_objects_by_name: (
        Annotated[list[Annotated[list[Level], Field(min_length=1)]], Field(max_length=100)] | None
    ) = None
    catalog_objects_by_uuid: Annotated[list[UUID], Field(max_length=1000)] | None = None
    object_types: (
        Annotated[list[Literal["namespace", "table", "view"]], Field(max_length=3)] | None
    ) = None
    custom_filters: Annotated[dict[StrictStr, StrictStr], Field(max_length=10)] | None = None

"""The Iceberg REST request envelopes and answers icelog serves (names as in the spec).

The models check the shape of what arrives; the domain checks its meaning: a schema, a
partition spec, a view version, requirements and updates travel as JSON objects and are
read by `domain/` with Iceberg Java's rules and messages. Unknown fields are ignored, as
the spec's objects allow them (clients newer than the spec add optional ones).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, StrictBool, StrictStr, field_validator

from icelog.api.edge import Body, OpenBody, Query

NonEmpty = Annotated[StrictStr, Field(min_length=1)]
Levels = Annotated[list[NonEmpty], Field(min_length=1)]
StringMap = dict[StrictStr, StrictStr]
JsonObject = dict[str, Any]


class Namespace(OpenBody):
    namespace: Levels


class CreateNamespaceRequest(OpenBody):
    namespace: Levels
    properties: StringMap | None = None


class CreateNamespaceResponse(Body):
    namespace: list[str]
    properties: StringMap


GetNamespaceResponse = CreateNamespaceResponse


class UpdateNamespacePropertiesRequest(OpenBody):
    removals: list[StrictStr] | None = None
    updates: StringMap | None = None


class UpdateNamespacePropertiesResponse(Body):
    updated: list[str]
    removed: list[str]
    missing: list[str] | None = None


class ListNamespacesResponse(Body):
    namespaces: list[list[str]]
    next_page_token: str | None = None


class TableIdentifier(OpenBody):
    namespace: Levels
    name: NonEmpty


class ListTablesResponse(Body):
    identifiers: list[TableIdentifier]
    next_page_token: str | None = None


class CreateTableRequest(OpenBody):
    name: NonEmpty
    location: StrictStr | None = None
    table_schema: JsonObject = Field(alias="schema")
    partition_spec: JsonObject | None = None
    write_order: JsonObject | None = None
    stage_create: StrictBool | None = None
    properties: StringMap | None = None


class RegisterTableRequest(OpenBody):
    name: NonEmpty
    metadata_location: NonEmpty
    overwrite: StrictBool = False


class RenameTableRequest(OpenBody):
    source: TableIdentifier
    destination: TableIdentifier


class CommitTableRequest(OpenBody):
    """updateTable (and replaceView): requirements and updates, read by the domain."""

    identifier: TableIdentifier | None = None
    requirements: list[JsonObject] | None = None
    updates: list[JsonObject] | None = None


class CommitViewRequest(OpenBody):
    """replaceView: requirements and the (required) updates, read by the domain."""

    identifier: TableIdentifier | None = None
    requirements: list[JsonObject] | None = None
    updates: list[JsonObject]


class ViewResult(Body):
    """LoadViewResult (views have no storage configuration: `config` is empty)."""

    metadata_location: str
    metadata: JsonObject
    config: StringMap


class TableChange(CommitTableRequest):
    identifier: TableIdentifier  # required in a transaction


class CommitTransactionRequest(OpenBody):
    table_changes: Annotated[list[TableChange], Field(min_length=1)]


class CreateViewRequest(OpenBody):
    name: NonEmpty
    location: StrictStr | None = None
    view_schema: JsonObject = Field(alias="schema")
    view_version: JsonObject
    properties: StringMap | None = None


class RegisterViewRequest(OpenBody):
    name: NonEmpty
    metadata_location: NonEmpty


class ReportMetricsRequest(OpenBody):
    """Accepted and not stored (telemetry): any report object."""

    report_type: StrictStr | None = None


class S3SignRequest(OpenBody):
    """The S3 signer spec's request, and the catalog spec's RemoteSignRequest (1.11+), which
    adds `properties` (passed back unchanged) and `provider` (icelog signs for S3 only)."""

    region: StrictStr
    uri: StrictStr
    method: StrictStr
    headers: dict[StrictStr, list[StrictStr]] = Field(default_factory=dict)
    properties: StringMap | None = None
    body: StrictStr | None = None
    provider: Literal["s3"] | None = None


class S3SignResponse(Body):
    uri: str
    headers: dict[str, list[str]]


class StorageCredential(Body):
    prefix: str
    config: StringMap


class LoadCredentialsResponse(Body):
    storage_credentials: list[StorageCredential]


class CatalogConfig(Body):
    defaults: StringMap
    overrides: StringMap
    endpoints: list[str]
    idempotency_key_lifetime: str


# -- query parameters -------------------------------------------------------------------------


def _flag(value: Any) -> bool:
    """`true` / `false` in any case, as Iceberg clients send them."""
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError("must be true or false")


Flag = Annotated[bool, BeforeValidator(_flag)]


class PageQuery(Query):
    """The spec's paging: absent = everything; a size is capped at 1,000."""

    page_token: Annotated[StrictStr, Field(min_length=1)] | None = Field(
        default=None, alias="pageToken"
    )
    page_size: Annotated[int, Field(ge=1)] | None = Field(default=None, alias="pageSize")

    @field_validator("page_token", "page_size", mode="before")
    @classmethod
    def _empty_is_absent(cls, value: Any) -> Any:
        return None if value == "" else value


class ListNamespacesQuery(PageQuery):
    parent: Annotated[StrictStr, Field(min_length=1)] | None = None


class LoadTableQuery(Query):
    snapshots: Literal["all", "refs"] = "all"


class DropTableQuery(Query):
    purge_requested: Flag = Field(default=False, alias="purgeRequested")


class DropNamespaceQuery(Query):
    """`recursive` (and `purge`): icelog's (and Lakekeeper's) cascade drop."""

    recursive: Flag = False
    purge: Flag = False


class ConfigQuery(Query):
    warehouse: StrictStr | None = None

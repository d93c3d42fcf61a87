"""Functions (Iceberg UDFs): the spec's `FunctionMetadata` and its parts (main's REST spec,
`format/udf-spec.md`), the catalog's list/load answers, and the management API's write
bodies (the spec has no write route; ADR 0017).

The models check shape; what a document means (definition ids derived from the parameter
types, unique ids and names, current versions that exist, the changes of a replace) is
checked in `domain/function_metadata.py` with its own messages.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr, model_validator

from icelog.api.edge import Body, OpenBody

NonEmpty = Annotated[StrictStr, Field(min_length=1)]
StringMap = dict[StrictStr, StrictStr]
FunctionDataType = Annotated[
    StrictStr | dict[str, Any],
    Field(
        description="A type string (`int`, `decimal(9,2)`, no spaces or quotes) or a nested "
        'type object: `{"type": "list", "element": T}`, `{"type": "map", "key": T, '
        '"value": T}`, `{"type": "struct", "fields": [{"name": n, "type": T}]}`'
    ),
]


class FunctionParameter(OpenBody):
    type: FunctionDataType
    name: NonEmpty
    doc: StrictStr | None = None


class FunctionSQLRepresentation(OpenBody):
    type: Literal["sql"]
    dialect: NonEmpty
    sql: StrictStr


class FunctionDefinitionVersion(OpenBody):
    version_id: StrictInt
    representations: list[FunctionSQLRepresentation]
    deterministic: StrictBool | None = None
    on_null_input: Literal["return-null", "call"] | None = None
    timestamp_ms: StrictInt


class FunctionDefinition(OpenBody):
    definition_id: StrictStr
    specific_name: StrictStr | None = None
    parameters: list[FunctionParameter]
    return_type: FunctionDataType
    return_nullable: StrictBool | None = None
    versions: list[FunctionDefinitionVersion]
    current_version_id: StrictInt
    function_type: Literal["udf", "udtf"]
    doc: StrictStr | None = None


class FunctionDefinitionVersionRef(OpenBody):
    definition_id: StrictStr
    version_id: StrictInt


class FunctionDefinitionLogEntry(OpenBody):
    timestamp_ms: StrictInt
    definition_versions: list[FunctionDefinitionVersionRef]


class FunctionMetadata(OpenBody):
    """Portable UDF metadata, format version 1: one self-contained document."""

    function_uuid: Annotated[StrictStr, Field(json_schema_extra={"format": "uuid"})]
    format_version: Annotated[StrictInt, Field(ge=1, le=1)]
    definitions: list[FunctionDefinition]
    definition_log: list[FunctionDefinitionLogEntry]
    location: StrictStr | None = None
    properties: StringMap | None = None
    secure: StrictBool | None = None
    doc: StrictStr | None = None


class LoadFunctionResult(Body):
    """A function's current document and the file it is in."""

    metadata_location: str
    metadata: FunctionMetadata


class ListFunctionsResponse(Body):
    """Function identifiers: the namespace levels, then the name."""

    identifiers: list[list[str]]
    next_page_token: str | None = None


# -- management writes ----------------------------------------------------------------------------
class FunctionDefinitionInput(Body):
    """A signature and the body of its new current version; the catalog derives the
    definition-id (given, it must be the derived one) and assigns version ids and times."""

    definition_id: StrictStr | None = Field(
        default=None, description="Optional: must equal the id the parameter types derive"
    )
    specific_name: NonEmpty | None = None
    parameters: list[FunctionParameter]
    return_type: FunctionDataType
    return_nullable: StrictBool | None = None
    function_type: Literal["udf", "udtf"] = "udf"
    doc: StrictStr | None = None
    representations: Annotated[list[FunctionSQLRepresentation], Field(min_length=1)]
    deterministic: StrictBool | None = None
    on_null_input: Literal["return-null", "call"] | None = None

    def as_change(self) -> dict[str, Any]:
        found = self.model_dump(by_alias=True, exclude_none=True)
        found["function-type"] = self.function_type
        return found


class CreateFunctionRequest(Body):
    """A new function: its `definitions` (each at version 1), or a complete `metadata`
    document to adopt (moved from another catalog; its `location` becomes the catalog's)."""

    name: NonEmpty
    definitions: Annotated[list[FunctionDefinitionInput], Field(min_length=1)] | None = None
    doc: StrictStr | None = None
    properties: StringMap | None = None
    secure: StrictBool | None = None
    metadata: FunctionMetadata | None = None

    @model_validator(mode="after")
    def _one_form(self) -> CreateFunctionRequest:
        if (self.metadata is None) == (self.definitions is None):
            raise ValueError("give either `definitions` or a complete `metadata`")
        if self.metadata is not None and (
            self.doc is not None or self.properties is not None or self.secure is not None
        ):
            raise ValueError("`doc`, `properties` and `secure` go inside `metadata`")
        return self


class ReplaceFunctionRequest(Body):
    """Changes to a function: each submitted definition becomes the current version of its
    signature; `doc` null removes the doc; `properties` replaces the whole map."""

    definitions: list[FunctionDefinitionInput] | None = None
    remove_definitions: list[StrictStr] | None = Field(
        default=None, description="Definition ids to remove"
    )
    set_current_versions: list[FunctionDefinitionVersionRef] | None = Field(
        default=None, description="Roll definitions back (or forward) to versions they keep"
    )
    doc: StrictStr | None = None
    properties: StringMap | None = None
    secure: StrictBool | None = None
    expected_metadata_location: NonEmpty | None = Field(
        default=None,
        description="Replace only if this is still the function's metadata location "
        "(409 CommitFailedException otherwise)",
    )

    def as_changes(self) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        if self.definitions:
            changes["definitions"] = [d.as_change() for d in self.definitions]
        if self.remove_definitions:
            changes["remove-definitions"] = list(self.remove_definitions)
        if self.set_current_versions:
            changes["set-current-versions"] = [
                r.model_dump(by_alias=True) for r in self.set_current_versions
            ]
        if "doc" in self.model_fields_set:
            changes["doc"] = self.doc
        if self.properties is not None:
            changes["properties"] = dict(self.properties)
        if self.secure is not None:
            changes["secure"] = self.secure
        return changes

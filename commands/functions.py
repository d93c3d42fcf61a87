"""Function (Iceberg UDF) commands: create, replace, drop (ADR 0017).

Each command writes the function's new metadata file (below the function's location, inside
the warehouse's storage, through the warehouse's FileIO) and appends its events in one
save: the name claim and the function (the append checks that its namespace exists, ADR 0018)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from icelog.commands.application import CatalogApplication, now_ms
from icelog.commands.known_outcome import append_written
from icelog.commands.lookups import get_namespace, get_warehouse
from icelog.commands.tabular import default_location
from icelog.domain.claims import NameClaim, claim
from icelog.domain.context import RequestContext
from icelog.domain.errors import (
    AlreadyExistsError,
    BadRequestError,
    CommitFailedError,
    CommitStateUnknownError,
    NoSuchFunctionError,
)
from icelog.domain.function import Function
from icelog.domain.function_metadata import (
    adopt_function_metadata,
    apply_function_changes,
    function_metadata_file_name,
    new_function_metadata,
)
from icelog.domain.identifiers import TabularName, function_claim_id
from icelog.domain.locations import Location
from icelog.domain.properties import reject_secret_properties
from icelog.domain.table_metadata import metadata_file_version


@dataclass(frozen=True)
class FunctionState:
    """What a function command answers with: the current document and where it lives."""

    function_id: UUID
    metadata_location: str
    metadata: dict[str, Any]


class FunctionCommands:
    def __init__(self, app: CatalogApplication) -> None:
        self.app = app

    # -- lookups ---------------------------------------------------------------------------
    def _function_claim(self, warehouse_id: UUID, name: TabularName) -> NameClaim | None:
        return self.app.get_or_none(function_claim_id(warehouse_id, name), NameClaim)

    def find_function(self, warehouse_id: UUID, name: TabularName) -> Function | None:
        held = self._function_claim(warehouse_id, name)
        if held is None or held.holder_id is None or held.kind != "function":
            return None
        function = self.app.get_or_none(held.holder_id, Function)
        return None if function is None or function.dropped else function

    def get_function(self, warehouse_id: UUID, name: TabularName) -> Function:
        function = self.find_function(warehouse_id, name)
        if function is None:
            raise NoSuchFunctionError(f"Function does not exist: {name.dotted}")
        return function

    def _new_function_file(self, location: str, version: int) -> str:
        directory = Location.parse(location, "function location").child("metadata")
        return str(directory.child(function_metadata_file_name(version, str(uuid4()))))

    # -- create ----------------------------------------------------------------------------
    def create_function(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: TabularName,
        *,
        definitions: list[dict[str, Any]] | None = None,
        doc: str | None = None,
        properties: dict[str, str] | None = None,
        secure: bool | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> FunctionState:
        """Create from submitted `definitions` (each at version 1; the catalog assigns the
        function-uuid, version ids, times and the log), or adopt a complete `metadata`
        document (moved from elsewhere: kept as it is but for its `location`)."""
        if not name.name:
            raise BadRequestError("Function name must not be empty")
        if (metadata is None) == (definitions is None):
            raise BadRequestError("Give either `definitions` or a complete `metadata`")
        function_id = uuid4()

        def attempt() -> FunctionState:
            warehouse = get_warehouse(self.app, warehouse_id)
            ns = get_namespace(self.app, warehouse_id, name.namespace)
            existing = self._function_claim(warehouse_id, name)
            if existing is not None and existing.is_held:
                raise AlreadyExistsError(f"Function already exists: {name.dotted}")
            location = str(default_location(warehouse, name, function_id))
            if metadata is not None:
                document = adopt_function_metadata(metadata, location)
            else:
                document = new_function_metadata(
                    function_uuid=str(function_id),
                    location=location,
                    definitions=definitions or [],
                    doc=doc,
                    properties=dict(properties or {}),
                    secure=secure,
                    now_ms=now_ms(),
                )
            reject_secret_properties(document.get("properties", {}), "Function")
            file_io = self.app.file_io(warehouse.storage_profile)
            md_location = self._new_function_file(location, 0)
            data = self.app.remember_metadata(md_location, document)
            self.app.write_metadata(file_io, md_location, data)
            function = Function.create(
                function_id=function_id,
                warehouse_id=warehouse_id,
                namespace_id=ns.id,
                namespace=name.namespace.as_list(),
                name=name.name,
                location=location,
                metadata_location=md_location,
                metadata=document,
                actor=ctx.actor,
                request_id=ctx.request_id,
            )
            name_claim = claim(
                existing,
                claim_id=function_claim_id(warehouse_id, name),
                kind="function",
                holder_id=function_id,
                name=name.dotted,
                actor=ctx.actor,
                request_id=ctx.request_id,
            )
            append_written(
                self.app, file_io, md_location, function, name_claim, function, hint=data
            )
            return FunctionState(function_id, md_location, document)

        return self.app.retrying(attempt)

    # -- replace ---------------------------------------------------------------------------
    def replace_function(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: TabularName,
        changes: dict[str, Any],
        *,
        expected_metadata_location: str | None = None,
    ) -> FunctionState:
        """Apply `changes` (see `apply_function_changes`) to the current document. With
        `expected_metadata_location`, only if the function is still there (409
        CommitFailedException otherwise); without it, a concurrent replace makes this one
        start over on top of the newer document."""
        reject_secret_properties(changes.get("properties") or {}, "Function")

        def attempt() -> FunctionState:
            function = self.get_function(warehouse_id, name)
            if (
                expected_metadata_location is not None
                and function.metadata_location != expected_metadata_location
            ):
                raise CommitFailedError(
                    f"Function {name.dotted} has changed: its metadata is at "
                    f"{function.metadata_location}, not {expected_metadata_location}"
                )
            file_io = self.app.file_io(self.app.storage_profile(warehouse_id))
            base = self.app.load_metadata(function.metadata_location, file_io)
            applied_at = now_ms()
            document = apply_function_changes(base, changes, now_ms=applied_at)
            if document is base:
                return FunctionState(function.id, function.metadata_location, base)
            version = metadata_file_version(function.metadata_location) + 1
            md_location = self._new_function_file(function.location, version)
            data = self.app.remember_metadata(md_location, document)
            self.app.write_metadata(file_io, md_location, data)
            function.replace(
                changes=changes,
                metadata_location=md_location,
                applied_at_ms=applied_at,
                actor=ctx.actor,
                request_id=ctx.request_id,
            )
            append_written(
                self.app, file_io, md_location, function, function,
                hint=data, unknown=CommitStateUnknownError,
            )  # fmt: skip
            return FunctionState(function.id, md_location, document)

        return self.app.retrying(attempt)

    # -- drop ------------------------------------------------------------------------------
    def drop_function(self, ctx: RequestContext, warehouse_id: UUID, name: TabularName) -> None:
        """The function leaves the catalog (its name is free again); its files stay."""

        def attempt() -> None:
            function = self.get_function(warehouse_id, name)
            name_claim = self._function_claim(warehouse_id, name)
            if name_claim is not None:
                name_claim.release(actor=ctx.actor, request_id=ctx.request_id)
            function.drop(actor=ctx.actor, request_id=ctx.request_id)
            self.app.save_all(function, name_claim)

        self.app.retrying(attempt)

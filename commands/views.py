"""View commands: create, replace, rename, drop, register. Views share the name claims
of tables (one identifier space), and their own metadata files (gzip, like Java's)."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from icelog.commands.base import now_ms
from icelog.commands.tables import TableCommands, TableState, metadata_dir
from icelog.domain.claims import NameClaim, claim
from icelog.domain.context import RequestContext
from icelog.domain.errors import (
    AlreadyExistsError,
    BadRequestError,
    CommitStateUnknownError,
    NoSuchViewError,
)
from icelog.domain.identifiers import TabularName, tabular_claim_id
from icelog.domain.locations import Location
from icelog.domain.metadata_state import Metadata
from icelog.domain.properties import reject_secret_properties
from icelog.domain.table_metadata import metadata_file_version
from icelog.domain.view import View
from icelog.domain.view_metadata import (
    apply_view_updates,
    check_view_requirements,
    new_view_metadata,
    view_metadata_file_name,
)


class ViewCommands(TableCommands):
    # -- lookups ---------------------------------------------------------------------------
    def find_view(self, warehouse_id: UUID, name: TabularName) -> View | None:
        held = self._claim(warehouse_id, name)
        if held is None or held.holder_id is None or held.kind != "view":
            return None
        view = self.get_or_none(held.holder_id, View)
        return None if view is None or view.dropped else view

    def get_view(self, warehouse_id: UUID, name: TabularName) -> View:
        view = self.find_view(warehouse_id, name)
        if view is None:
            raise NoSuchViewError(f"View does not exist: {name.dotted}")
        return view

    def _free_view_claim(self, warehouse_id: UUID, name: TabularName) -> NameClaim | None:
        existing = self._claim(warehouse_id, name)
        if existing is not None and existing.is_held:
            if existing.kind == "view":
                raise AlreadyExistsError(f"View already exists: {name.dotted}")
            raise AlreadyExistsError(f"Table with same name already exists: {name.dotted}")
        return existing

    @staticmethod
    def _view_claim(
        existing: NameClaim | None,
        warehouse_id: UUID,
        name: TabularName,
        view_id: UUID,
        ctx: RequestContext,
    ) -> NameClaim:
        return claim(
            existing,
            claim_id=tabular_claim_id(warehouse_id, name),
            kind="view",
            holder_id=view_id,
            name=name.dotted,
            actor=ctx.actor,
            request_id=ctx.request_id,
        )

    def _new_view_file(self, metadata: Metadata, version: int) -> str:
        return str(metadata_dir(metadata).child(view_metadata_file_name(version, str(uuid4()))))

    # -- create / register -----------------------------------------------------------------
    def create_view(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: TabularName,
        *,
        schema: dict[str, Any],
        view_version: dict[str, Any],
        location: str | None,
        properties: dict[str, str],
    ) -> TableState:
        if not name.name:
            raise BadRequestError("View name must not be empty")
        reject_secret_properties(properties, "View")
        view_id = uuid4()

        def attempt() -> TableState:
            warehouse = self.get_warehouse(warehouse_id)
            ns = self.get_namespace(warehouse_id, name.namespace)
            existing = self._free_view_claim(warehouse_id, name)
            view_location = self._new_location(warehouse, name, location, view_id)
            metadata = new_view_metadata(
                view_uuid=str(view_id),
                location=view_location,
                schema=schema,
                view_version=view_version,
                properties=properties,
                now_ms=now_ms(),
            )
            file_io = self.file_io(warehouse.storage_profile)
            md_location = self._new_view_file(metadata, 0)
            data = self.remember_metadata(md_location, metadata)
            self.write_metadata(file_io, md_location, data)
            view = View.create(
                view_id=view_id,
                warehouse_id=warehouse_id,
                namespace_id=ns.id,
                namespace=name.namespace.as_list(),
                name=name.name,
                location=view_location,
                metadata_location=md_location,
                metadata=metadata,
                actor=ctx.actor,
                request_id=ctx.request_id,
            )
            name_claim = self._view_claim(existing, warehouse_id, name, view_id, ctx)
            self._save_or_forget(file_io, md_location, name_claim, view, hint=data)
            return TableState(view_id, md_location, metadata)

        return self.retrying(attempt)

    def register_view(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: TabularName,
        metadata_location: str,
    ) -> TableState:
        if not name.name:
            raise BadRequestError("View name must not be empty")
        view_id = uuid4()

        def attempt() -> TableState:
            warehouse = self.get_warehouse(warehouse_id)
            ns = self.get_namespace(warehouse_id, name.namespace)
            existing = self._free_view_claim(warehouse_id, name)
            file_io = self.file_io(warehouse.storage_profile)
            metadata = self.load_registered(warehouse, metadata_location, file_io, "view")
            self._check_location(warehouse, metadata["location"])
            view = View.create(
                registered=True,
                view_id=view_id,
                warehouse_id=warehouse_id,
                namespace_id=ns.id,
                namespace=name.namespace.as_list(),
                name=name.name,
                location=str(Location.parse(metadata["location"], "view location")),
                metadata_location=metadata_location,
                metadata=metadata,
                actor=ctx.actor,
                request_id=ctx.request_id,
            )
            name_claim = self._view_claim(existing, warehouse_id, name, view_id, ctx)
            hint = self.remember_metadata(metadata_location, metadata)
            self.append_known(
                None,
                [],
                (view, metadata_location),
                name_claim,
                view,
                hints={metadata_location: hint},
            )
            return TableState(view_id, metadata_location, metadata)

        return self.retrying(attempt)

    # -- replace ---------------------------------------------------------------------------
    def replace_view(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: TabularName,
        requirements: list[dict[str, Any]],
        updates: list[dict[str, Any]],
    ) -> TableState:
        """Checked against the current view; a concurrent replace makes it start over on
        top of the newer version (server-side retry, as the RCK expects)."""

        def attempt() -> TableState:
            file_io = self.file_io(self.storage_profile(warehouse_id))
            view = self.get_view(warehouse_id, name)
            base = self.table_metadata(view, file_io)
            check_view_requirements(base, requirements)
            applied_at = now_ms()
            metadata = apply_view_updates(base, updates, now_ms=applied_at)
            if metadata is base:
                return TableState(view.id, view.metadata_location, base)
            reject_secret_properties(metadata.get("properties", {}), "View")
            if metadata["location"] != base["location"]:
                self._check_location(self.get_warehouse(warehouse_id), metadata["location"])
            version = metadata_file_version(view.metadata_location) + 1
            md_location = self._new_view_file(metadata, version)
            data = self.remember_metadata(md_location, metadata)
            self.write_metadata(file_io, md_location, data)
            view.replace(
                requirements=requirements,
                updates=updates,
                metadata_location=md_location,
                applied_at_ms=applied_at,
                actor=ctx.actor,
                request_id=ctx.request_id,
            )
            self._save_or_forget(
                file_io, md_location, view, hint=data, unknown=CommitStateUnknownError
            )
            return TableState(view.id, md_location, metadata)

        return self.retrying(attempt)

    # -- rename --------------------------------------------------------------------------
    def rename_view(
        self, ctx: RequestContext, warehouse_id: UUID, source: TabularName, dest: TabularName
    ) -> None:
        if not dest.name:
            raise BadRequestError("View name must not be empty")

        def attempt() -> None:
            self.get_warehouse(warehouse_id)
            view = self.get_view(warehouse_id, source)
            dest_ns = self.get_namespace(warehouse_id, dest.namespace)
            target = self._claim(warehouse_id, dest)
            if target is not None and target.is_held:
                kind = "View" if target.kind == "view" else "Table"
                raise AlreadyExistsError(
                    f"Cannot rename {source.dotted} to {dest.dotted}. {kind} already exists"
                )
            new_claim = self._view_claim(target, warehouse_id, dest, view.id, ctx)
            self.move_tabular(ctx, warehouse_id, view, source, dest, dest_ns, new_claim)

        self.retrying(attempt)

"""View commands: create, replace, rename, register. Views share the name claims of
tables (one identifier space), their locations, rename and commit path (TabularCore),
and have their own metadata files (gzip, like Java's). Drops are lifecycle's."""

from __future__ import annotations

import functools
from typing import Any
from uuid import UUID, uuid4

from icelog.commands.application import now_ms
from icelog.commands.lookups import get_warehouse
from icelog.commands.tabular import TabularCore
from icelog.commands.tabular_values import (
    Change,
    NewPlace,
    Staged,
    TableState,
    metadata_dir,
    stage_written,
)
from icelog.domain.context import RequestContext
from icelog.domain.identifiers import TabularName
from icelog.domain.metadata_state import Metadata
from icelog.domain.ports import FileIO
from icelog.domain.properties import reject_secret_properties
from icelog.domain.table_metadata import metadata_file_version
from icelog.domain.view import View
from icelog.domain.view_metadata import (
    apply_view_updates,
    check_view_requirements,
    new_view_metadata,
    view_metadata_file_name,
)


def _new_view_file(metadata: Metadata, version: int) -> str:
    return str(metadata_dir(metadata).child(view_metadata_file_name(version, str(uuid4()))))


class ViewCommands:
    def __init__(self, core: TabularCore) -> None:
        self.core = core
        self.app = core.app

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
        reject_secret_properties(properties, "View")

        def build(place: NewPlace, view_id: UUID, metadata: dict[str, Any]) -> TableState:
            create = functools.partial(View.create, view_id=view_id)
            md_location = _new_view_file(metadata, 0)
            return self.core.append_created(ctx, place, name, md_location, metadata, create)

        document = functools.partial(
            new_view_metadata, schema=schema, view_version=view_version, properties=properties
        )
        return self.core.create(
            "view", warehouse_id, name, location,
            namespace_known=True, document=document, build=build,
        )  # fmt: skip

    def register_view(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: TabularName,
        metadata_location: str,
    ) -> TableState:
        """A view's register: as a table's (its location is checked, but no files are
        refused under it: a view has none)."""
        return self.core.register(
            ctx, "view", warehouse_id, name, metadata_location, may_cover_files=True
        )

    # -- replace ---------------------------------------------------------------------------
    def replace_view(self, change: Change) -> TableState:
        """Checked against the current view; a concurrent replace makes it start over on
        top of the newer version (server-side retry, as the RCK expects). Takes turns and
        tries first on the view as this process last wrote it, as a table's commit."""
        ctx, warehouse_id, name, requirements, updates = change
        app = self.app

        def stage(view: View, file_io: FileIO) -> Staged | None:
            base = self.core.current_metadata(view, file_io)
            check_view_requirements(base, requirements)
            applied_at = now_ms()
            metadata = apply_view_updates(base, updates, now_ms=applied_at)
            if metadata is base:
                return None
            reject_secret_properties(metadata.get("properties", {}), "View")
            if metadata["location"] != base["location"]:
                self.core.check_location(get_warehouse(app, warehouse_id), metadata["location"])
            version = metadata_file_version(view.metadata_location) + 1
            md_location = _new_view_file(metadata, version)
            change = (requirements, updates, applied_at)
            return stage_written(app, file_io, view, ctx, change, base, metadata, md_location)

        return self.core.commit("view", warehouse_id, name, stage)

    # -- rename --------------------------------------------------------------------------

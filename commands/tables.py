"""Table commands: create (also by a create transaction), commit, multi-table
transactions, rename, register. Drops are lifecycle's (commands/lifecycle.py)."""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import Any
from uuid import RFC_4122, UUID, uuid4

from eventsourcing.application import AggregateNotFoundError

from icelog.commands.application import WarehouseStorage, now_ms
from icelog.commands.known_outcome import append_known
from icelog.commands.lookups import get_warehouse
from icelog.commands.tabular import TabularCore, default_location, take_turns
from icelog.commands.tabular_values import (
    Change,
    NewPlace,
    Staged,
    TableState,
    inside,
    metadata_dir,
    stage_written,
)
from icelog.domain.context import RequestContext
from icelog.domain.errors import (
    AlreadyExistsError,
    BadRequestError,
    CatalogError,
    CommitFailedError,
    CommitStateUnknownError,
)
from icelog.domain.identifiers import TabularName
from icelog.domain.locations import Location
from icelog.domain.ports import FileIO
from icelog.domain.properties import reject_secret_properties
from icelog.domain.requirements import check_requirements
from icelog.domain.table import Table
from icelog.domain.table_metadata import (
    apply_updates,
    is_create_requirements,
    metadata_file_name,
    metadata_file_version,
    new_table_metadata,
)
from icelog.domain.warehouse import Warehouse

log = logging.getLogger("icelog.commands")


class TableCommands:
    """The commit unit of the catalog. Every command appends its events in one save."""

    def __init__(self, core: TabularCore) -> None:
        self.core = core
        self.app = core.app

    # -- lookups ---------------------------------------------------------------------------
    def get_table(self, warehouse_id: UUID, name: TabularName) -> Table:
        return self.core.get(Table, warehouse_id, name)

    def table_metadata(self, table: Table, file_io: FileIO) -> dict[str, Any]:
        """The table's current document (see TabularCore.current_metadata)."""
        return self.core.current_metadata(table, file_io)

    # -- create ----------------------------------------------------------------------------
    def create_table(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: TabularName,
        *,
        schema: dict[str, Any],
        partition_spec: dict[str, Any] | None,
        sort_order: dict[str, Any] | None,
        location: str | None,
        properties: dict[str, str],
        stage: bool,
        may_cover_files: bool = True,
    ) -> TableState:
        """`may_cover_files`: whether a `location` that already holds files is accepted (the
        caller may modify the warehouse; `TabularCore.refuse_covering_files`)."""
        reject_secret_properties(properties, "Table")
        core = self.core

        def build(place: NewPlace, table_id: UUID, metadata: dict[str, Any]) -> TableState:
            if location:
                core.refuse_covering_files(
                    self.app.file_io(place.warehouse.storage_profile),
                    place.location,
                    may_cover_files=may_cover_files,
                )
            if stage:
                return TableState(table_id, None, metadata)
            return self._append_new_table(ctx, place, name, table_id, metadata, updates=[])

        document = functools.partial(
            new_table_metadata,
            schema=schema,
            partition_spec=partition_spec,
            sort_order=sort_order,
            properties=properties,
        )
        # A staged create reads the namespace: nothing appended would check it.
        return core.create(
            "table", warehouse_id, name, location,
            namespace_known=not stage, document=document, build=build,
        )  # fmt: skip

    def _append_new_table(
        self,
        ctx: RequestContext,
        place: NewPlace,
        name: TabularName,
        table_id: UUID,
        metadata: dict[str, Any],
        *,
        updates: list[dict[str, Any]],
    ) -> TableState:
        md_location = str(metadata_dir(metadata).child(metadata_file_name(0, str(uuid4()))))
        create = functools.partial(Table.create, table_id=table_id, updates=updates)
        return self.core.append_created(ctx, place, name, md_location, metadata, create)

    def _create_by_transaction(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: TabularName,
        updates: list[dict[str, Any]],
        *,
        may_cover_files: bool,
    ) -> TableState:
        """A create transaction (stage-create, then a commit with only assert-create). At
        the default location of the id it creates (where a staged create's writer may
        already have put its data files) no other table's files can lie: only another
        location is checked for files."""
        core = self.core

        def attempt() -> TableState:
            warehouse = get_warehouse(self.app, warehouse_id)
            ns_id = core.existing_namespace_id(warehouse_id, name.namespace, known=False)
            existing = core.read_claim(warehouse_id, name)
            if existing is not None and existing.is_held:
                if existing.kind == "view":
                    raise AlreadyExistsError(f"View with same name already exists: {name.dotted}")
                raise CommitFailedError("Requirement failed: table already exists")
            metadata = apply_updates(None, updates, now_ms=now_ms(), previous_location=None)
            reject_secret_properties(metadata.get("properties", {}), "Table")
            core.check_location(warehouse, metadata["location"])
            table_id = self._client_id_or_new(metadata.get("table-uuid"))
            if not _is_default_location(warehouse, name, table_id, metadata["location"]):
                core.refuse_covering_files(
                    self.app.file_io(warehouse.storage_profile),
                    metadata["location"],
                    may_cover_files=may_cover_files,
                )
            place = NewPlace(warehouse, ns_id, existing, metadata["location"])
            return self._append_new_table(ctx, place, name, table_id, metadata, updates=updates)

        return self.app.retrying(attempt)

    def _client_id_or_new(self, chosen: Any) -> UUID:
        """The table id a client chose (its `table-uuid`), when it is a random or time-based
        UUID no aggregate uses: the catalog's own derived ids (name claims, namespaces, keys)
        are version 5, and a client must not take one before the catalog does."""
        try:
            wanted = UUID(str(chosen))
        except ValueError:
            return uuid4()
        if wanted.version not in (4, 7) or wanted.variant != RFC_4122:
            return uuid4()
        try:
            self.app.repository.get(wanted)
        except AggregateNotFoundError:
            return wanted
        return uuid4()

    # -- commit ----------------------------------------------------------------------------
    def commit_table(self, change: Change, *, may_cover_files: bool = True) -> TableState:
        """Check requirements against the CURRENT table, apply, write, append.

        A concurrent commit makes the append fail on the aggregate version; the attempt
        then starts over against the newer table: if the requirements still hold the
        updates are re-applied on top (server-side rebase), otherwise 409.
        `may_cover_files`: whether a `set-location` onto files already in storage is
        accepted (`TabularCore.refuse_covering_files`).
        """
        ctx, warehouse_id, name, requirements, updates = change
        if is_create_requirements(requirements):
            return self._create_by_transaction(
                ctx, warehouse_id, name, updates, may_cover_files=may_cover_files
            )

        stage = functools.partial(
            self._stage_commit,
            ctx,
            warehouse_id,
            requirements,
            updates,
            may_cover_files=may_cover_files,
        )
        return self.core.commit("table", warehouse_id, name, stage, after=_after_commit)

    def _stage_commit(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        requirements: list[dict[str, Any]],
        updates: list[dict[str, Any]],
        table: Table,
        file_io: FileIO,
        *,
        may_cover_files: bool,
    ) -> Staged | None:
        """Check, apply, write the next metadata file and record the commit on `table`
        (not yet saved). None when the updates change nothing."""
        app = self.app
        base = self.core.current_metadata(table, file_io)
        check_requirements(base, requirements)
        applied_at = now_ms()
        metadata = apply_updates(
            base, updates, now_ms=applied_at, previous_location=table.metadata_location
        )
        if metadata is base:
            return None
        if metadata["location"] != base["location"]:
            self.core.check_location(get_warehouse(app, warehouse_id), metadata["location"])
            self.core.refuse_covering_files(
                file_io, metadata["location"], may_cover_files=may_cover_files
            )
        reject_secret_properties(metadata.get("properties", {}), "Table")
        version = metadata_file_version(table.metadata_location) + 1
        md_location = str(metadata_dir(metadata).child(metadata_file_name(version, str(uuid4()))))
        change = (requirements, updates, applied_at)
        return stage_written(app, file_io, table, ctx, change, base, metadata, md_location)

    def commit_transaction(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        changes: list[tuple[TabularName, list[dict[str, Any]], list[dict[str, Any]]]],
        *,
        may_cover_files: bool = True,
    ) -> None:
        """transactions/commit: every table moves, or none does.

        All changes are checked and applied against the current tables, then the commit
        events of every table are appended in ONE save. A failed requirement anywhere, or a
        concurrent commit to any of the tables, appends nothing (files written for the
        attempt are removed); a concurrent commit makes the whole transaction start over.
        Several changes to one table apply in order, each on top of the previous.
        """
        for _name, requirements, _updates in changes:
            if is_create_requirements(requirements):
                raise BadRequestError("assert-create is not supported in transactions/commit")
        app = self.app

        def attempt() -> None:
            file_io = app.file_io(app.storage_profile(warehouse_id))
            tables: dict[UUID, Table] = {}
            staged: list[Staged] = []
            staged_tables: list[Table] = []
            try:
                for name, requirements, updates in changes:
                    found = self.get_table(warehouse_id, name)
                    table = tables.setdefault(found.id, found)
                    step = self._stage_commit(
                        ctx, warehouse_id, requirements, updates, table, file_io,
                        may_cover_files=may_cover_files,
                    )  # fmt: skip
                    if step is not None:
                        staged.append(step)
                        staged_tables.append(table)
            except BaseException:
                # Nothing was appended: every file of this attempt is an orphan.
                self._forget_staged(file_io, staged, tables)
                raise
            if staged:
                # One table's last change names its file; the append is atomic, so one
                # table tells for all.
                last = {t.id: s for t, s in zip(staged_tables, staged, strict=True)}
                table_id, step = next(iter(last.items()))
                try:
                    append_known(
                        app,
                        file_io,
                        [s.location for s in staged],
                        (tables[table_id], step.location),
                        *tables.values(),
                        hints={s.location: s.data for s in staged},
                        unknown=CommitStateUnknownError,
                    )
                except BaseException:
                    for known in tables:
                        self.core.forget(known)
                    raise
            for table in tables.values():
                self.core.remember(table)

        with take_turns(warehouse_id, [name for name, _r, _u in changes]):
            app.retrying(attempt)

    def _forget_staged(
        self, file_io: FileIO, staged: list[Staged], tables: dict[UUID, Table]
    ) -> None:
        for step in staged:
            with contextlib.suppress(OSError, CatalogError):
                file_io.delete(step.location)
        for table_id in tables:
            self.core.forget(table_id)

    # -- rename ----------------------------------------------------------------------------
    # -- register --------------------------------------------------------------------------
    def register_table(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: TabularName,
        metadata_location: str,
        *,
        overwrite: bool = False,
        may_cover_files: bool = True,
    ) -> TableState:
        if overwrite:
            # 400, a status the spec documents for registerTable (406 is not among them).
            raise BadRequestError("registerTable with overwrite=true is not supported")
        return self.core.register(
            ctx, "table", warehouse_id, name, metadata_location, may_cover_files=may_cover_files
        )


def _is_default_location(
    warehouse: Warehouse | WarehouseStorage, name: TabularName, table_id: UUID, location: Any
) -> bool:
    default = default_location(warehouse, name, table_id)
    return str(Location.parse(location, "table location")) == str(default)


def _after_commit(staged: Staged, file_io: FileIO) -> None:
    try:  # best effort, after the commit landed: it must not turn it into an error
        _delete_expired_metadata_files(staged.base, staged.metadata, file_io)
    except Exception:
        log.warning("could not delete expired metadata files", exc_info=True)


def _delete_expired_metadata_files(
    base: dict[str, Any], metadata: dict[str, Any], file_io: FileIO
) -> None:
    """`write.metadata.delete-after-commit.enabled`: drop files that left metadata-log —
    only those inside the table's own location (a registered document's metadata-log
    may name anything)."""
    enabled = metadata.get("properties", {}).get("write.metadata.delete-after-commit.enabled")
    if str(enabled).lower() != "true":
        return
    table = Location.parse(metadata["location"], "table location")
    kept = {
        entry.get("metadata-file")
        for entry in metadata.get("metadata-log", [])
        if isinstance(entry, dict)
    }
    for entry in base.get("metadata-log", []):
        name = entry.get("metadata-file") if isinstance(entry, dict) else None
        if name in kept or not isinstance(name, str) or not inside(name, table):
            continue
        with contextlib.suppress(OSError, CatalogError):
            file_io.delete(name)

"""Table commands: create, commit, rename, drop (+purge), register."""

from __future__ import annotations

import contextlib
import copy
import logging
import time
from dataclasses import dataclass
from typing import Any
from uuid import RFC_4122, UUID, uuid4

import orjson
from eventsourcing.application import AggregateNotFoundError, project_aggregate

from icelog.commands.base import WarehouseStorage, now_ms
from icelog.commands.group_commit import ConcurrentChange
from icelog.commands.namespaces import NamespaceCommands
from icelog.commands.turns import TABLE_TURNS
from icelog.domain.claims import NameClaim, claim
from icelog.domain.context import RequestContext
from icelog.domain.errors import (
    AlreadyExistsError,
    BadRequestError,
    CatalogError,
    CommitFailedError,
    CommitStateUnknownError,
    LocationTakenError,
    NoSuchTableError,
    NothingAppendedError,
    ServiceUnavailableError,
)
from icelog.domain.idempotency import IdempotentReplay
from icelog.domain.identifiers import NamespaceName, TabularName, namespace_id, tabular_claim_id
from icelog.domain.locations import (
    Location,
    check_scheme_allowed,
    default_table_location,
    parse_inside,
)
from icelog.domain.metadata_check import check_table_metadata, check_view_metadata
from icelog.domain.namespace import Namespace
from icelog.domain.ports import FileIO, LocationIndex
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
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse

log = logging.getLogger("icelog.commands")
# Before deciding that an append which failed without a conflict did not land.
RECHECK_AFTER_S = 0.25


@dataclass(frozen=True)
class _Staged:
    """A commit applied and written, waiting to be appended."""

    location: str
    data: bytes
    base: dict[str, Any]
    metadata: dict[str, Any]


def _commit_turn(
    warehouse_id: UUID, names: list[TabularName]
) -> contextlib.AbstractContextManager[None]:
    return TABLE_TURNS.take((warehouse_id, n.namespace.key, n.name) for n in names)


class _NeedsFreshState(Exception):
    """An optimistic attempt could not prove its answer; redo it on fresh state."""


@dataclass(frozen=True)
class TableState:
    """What a table command answers with: the current metadata and where it lives."""

    table_id: UUID
    metadata_location: str | None
    metadata: dict[str, Any]
    # `metadata` as JSON, when the command already serialised it (a commit writes these
    # bytes as the metadata file): the answer reuses them instead of serialising again.
    document: bytes | None = None


WRITE_METADATA_PATH = "write.metadata.path"


def metadata_dir(metadata: dict[str, Any]) -> Location:
    """Where a table's or view's metadata files go: `<location>/metadata`, or the
    `write.metadata.path` property, which must lie inside the table's location (as
    Lakekeeper requires) — never elsewhere in the warehouse, never outside it."""
    location = Location.parse(metadata.get("location"), "table location")
    custom = metadata.get("properties", {}).get(WRITE_METADATA_PATH)
    if not custom:
        return location.child("metadata")
    return parse_inside(custom, location, WRITE_METADATA_PATH)


def _no_index(warehouse_id: str, location: str) -> str | None:
    return None


def inside(text: str, base: Location) -> bool:
    """Whether a location named by metadata lies inside `base` (False when it does not parse)."""
    try:
        return base.contains(Location.parse(text, encoded_separators=True))
    except BadRequestError:
        return False


class TableCommands(NamespaceCommands):
    """The commit unit of the catalog. Every command appends its events in one save."""

    location_index: LocationIndex = staticmethod(_no_index)  # replaced by the composition root

    def __init__(self, env: dict[str, str] | None = None) -> None:
        super().__init__(env=env)
        self._table_ids: dict[tuple[UUID, TabularName], UUID] = {}
        # Tables as this process last appended them (see commit_table); never mutated.
        self._recent_tables: dict[UUID, Table] = {}
        # Namespaces this process saw exist (see create_table).
        self._known_namespaces: set[tuple[UUID, NamespaceName]] = set()

    def _remember_table(self, table: Table) -> None:
        if len(self._recent_tables) > 10_000:
            self._recent_tables.clear()
        self._recent_tables[table.id] = table

    def _recent_table(self, warehouse_id: UUID, name: TabularName) -> Table | None:
        known = self._table_ids.get((warehouse_id, name))
        table = self._recent_tables.get(known) if known is not None else None
        if table is None or table.dropped or table.name != name.name:
            return None
        if tuple(table.namespace) != name.namespace.levels:
            return None
        return copy.deepcopy(table)

    def saving(self, aggregates: list[Any]) -> None:
        super().saving(aggregates)
        for aggregate in aggregates:
            # A namespace this process drops is no longer known to exist.
            if isinstance(aggregate, Namespace) and aggregate.dropped:
                key = (aggregate.warehouse_id, NamespaceName(tuple(aggregate.levels)))
                self._known_namespaces.discard(key)

    def existing_namespace_id(
        self, warehouse_id: UUID, name: NamespaceName, *, known: bool
    ) -> UUID:
        """The id of a namespace to create something in; 404 when it does not exist.

        With `known`, a namespace this process has seen exist is not read again: the
        append checks that it still exists (ADR 0018) and fails as a conflict when it
        was dropped meanwhile, and the command's next attempt — `known` False — reads it
        and answers 404. Nothing is written to a namespace to create in it, so creates
        in one namespace neither conflict nor take turns."""
        key = (warehouse_id, name)
        if known and key in self._known_namespaces:
            return namespace_id(warehouse_id, name)
        # Forgotten until read again: a namespace dropped elsewhere is not tried again.
        self._known_namespaces.discard(key)
        ns = self.get_namespace(warehouse_id, name)
        if len(self._known_namespaces) > 100_000:
            self._known_namespaces.clear()
        self._known_namespaces.add(key)
        return ns.id

    # -- lookups ---------------------------------------------------------------------------
    def _claim(self, warehouse_id: UUID, name: TabularName) -> NameClaim | None:
        """The name's claim, from its events alone: a repository read of a claim it has not
        cached asks for a snapshot first, one more round trip, and most claims read here
        are new names with neither (a claim seldom has the 100 events of a snapshot)."""
        events = list(self.events.get(tabular_claim_id(warehouse_id, name)))
        if not events:
            return None
        found = project_aggregate(None, events)
        return found if isinstance(found, NameClaim) else None

    def find_table(self, warehouse_id: UUID, name: TabularName) -> Table | None:
        # Fast path: the table this name led to last time, if it still has that name.
        # The aggregate itself is always loaded fresh, so a drop or rename is seen.
        known = self._table_ids.get((warehouse_id, name))
        if known is not None:
            table = self.get_or_none(known, Table)
            if (
                table is not None
                and not table.dropped
                and table.name == name.name
                and tuple(table.namespace) == name.namespace.levels
            ):
                return table
        held = self._claim(warehouse_id, name)
        if held is None or held.holder_id is None or held.kind != "table":
            return None
        table = self.get_or_none(held.holder_id, Table)
        if table is None or table.dropped:
            return None
        if len(self._table_ids) > 100_000:
            self._table_ids.clear()
        self._table_ids[(warehouse_id, name)] = table.id
        return table

    def get_table(self, warehouse_id: UUID, name: TabularName) -> Table:
        table = self.find_table(warehouse_id, name)
        if table is None:
            raise NoSuchTableError(f"Table does not exist: {name.dotted}")
        return table

    @staticmethod
    def _table_claim(
        existing: NameClaim | None,
        warehouse_id: UUID,
        name: TabularName,
        table_id: UUID,
        ctx: RequestContext,
    ) -> NameClaim:
        """Claim `name` for a table: a new claim, or the re-claim of a released one."""
        return claim(
            existing,
            claim_id=tabular_claim_id(warehouse_id, name),
            kind="table",
            holder_id=table_id,
            name=name.dotted,
            actor=ctx.actor,
            request_id=ctx.request_id,
        )

    def _free_claim(self, warehouse_id: UUID, name: TabularName) -> NameClaim | None:
        """The claim for a new table name: absent or released; 409 when held."""
        existing = self._claim(warehouse_id, name)
        if existing is not None and existing.is_held:
            if existing.kind == "view":
                raise AlreadyExistsError(f"View with same name already exists: {name.dotted}")
            raise AlreadyExistsError(f"Table already exists: {name.dotted}")
        return existing

    def _check_location(self, warehouse: Warehouse | WarehouseStorage, location: Any) -> Location:
        """A table or view location a client chose: it parses, lies strictly inside the
        warehouse and overlaps no other table or view."""
        parsed = Location.parse(location, "table location")
        check_scheme_allowed(warehouse.storage_profile, location)
        root = Location.parse(warehouse.base_location, "warehouse location")
        if not root.contains(parsed):
            raise BadRequestError(
                f"Location {location} is not inside the warehouse location {root}"
            )
        if parsed == root:
            raise BadRequestError("A table location cannot be the warehouse location itself")
        other = self.location_index(str(warehouse.id), str(parsed))
        if other is not None:
            # Which table or view holds it stays unsaid: the caller may not be allowed to see it.
            if other.endswith("(purge pending)"):
                raise LocationTakenError(
                    f"Location {location} overlaps with the location of a dropped table whose "
                    "files are still being purged; it is free once the purge has finished"
                )
            raise LocationTakenError(
                f"Location {location} overlaps with the location of another table or view"
            )
        return parsed

    @staticmethod
    def _refuse_covering_files(file_io: FileIO, location: Any, *, may_cover_files: bool) -> None:
        """A table placed over files already in storage (a dropped or unregistered table's,
        whose purge may not have run yet) would hand them to its owner: only a caller who
        may modify the warehouse (`may_cover_files`, decided where the caller's rights are
        known) places one there. One bounded listing, only for the others."""
        if may_cover_files:
            return
        if file_io.holds_files(str(location)):
            # Whose files they are stays unsaid, as for an overlap.
            raise LocationTakenError(
                f"Location {location} already holds files: placing a table over existing "
                "files needs modify on the warehouse"
            )

    def _new_location(
        self,
        warehouse: Warehouse | WarehouseStorage,
        name: TabularName,
        requested: str | None,
        tabular_id: UUID,
    ) -> str:
        """A new table's or view's location: the requested one if it is free and inside the
        warehouse, else `<warehouse>/<namespace>/<name>-<id>`."""
        if requested:
            return str(self._check_location(warehouse, requested))
        root = Location.parse(warehouse.base_location, "warehouse location")
        return str(default_table_location(root, name.namespace, name.name, tabular_id))

    def _write_first_file(
        self, file_io: FileIO, metadata: dict[str, Any], version: int = 0
    ) -> tuple[str, bytes]:
        location = str(metadata_dir(metadata).child(metadata_file_name(version, str(uuid4()))))
        data = self.remember_metadata(location, metadata)
        self.write_metadata(file_io, location, data)
        return location, data

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
        caller may modify the warehouse; `_refuse_covering_files`)."""
        if not name.name:
            raise BadRequestError("Table name must not be empty")
        reject_secret_properties(properties, "Table")
        table_id = uuid4()
        first = True

        def attempt() -> TableState:
            nonlocal first
            # The warehouse is read only on a retry or for a location the client chose (see
            # `warehouse_storage`); the name's claim is always read: a taken name answers
            # 409 without a failed append. The namespace is read only when not known to
            # exist, or on a retry.
            warehouse = self.warehouse_storage(warehouse_id, fresh=not first or bool(location))
            ns_id = self.existing_namespace_id(
                warehouse_id, name.namespace, known=first and not stage
            )
            first = False
            existing = self._free_claim(warehouse_id, name)
            table_location = self._new_location(warehouse, name, location, table_id)
            if location:
                self._refuse_covering_files(
                    self.file_io(warehouse.storage_profile),
                    table_location,
                    may_cover_files=may_cover_files,
                )
            metadata = new_table_metadata(
                table_uuid=str(table_id),
                location=table_location,
                schema=schema,
                partition_spec=partition_spec,
                sort_order=sort_order,
                properties=properties,
                now_ms=now_ms(),
            )
            if stage:
                return TableState(table_id, None, metadata)
            return self._append_new_table(
                ctx, warehouse, ns_id, existing, name, table_id, metadata, updates=[]
            )

        return self.retrying(attempt)

    def _append_new_table(
        self,
        ctx: RequestContext,
        warehouse: Warehouse | WarehouseStorage,
        ns_id: UUID,
        existing: NameClaim | None,
        name: TabularName,
        table_id: UUID,
        metadata: dict[str, Any],
        *,
        updates: list[dict[str, Any]],
    ) -> TableState:
        """Write the first metadata file, then claim the name and create the table — one
        append (the file is removed if the append loses a race)."""
        file_io = self.file_io(warehouse.storage_profile)
        md_location, data = self._write_first_file(file_io, metadata)
        name_claim = self._table_claim(existing, warehouse.id, name, table_id, ctx)
        table = Table.create(
            table_id=table_id,
            warehouse_id=warehouse.id,
            namespace_id=ns_id,
            namespace=name.namespace.as_list(),
            name=name.name,
            location=str(Location.parse(metadata["location"], "table location")),
            metadata_location=md_location,
            metadata=metadata,
            updates=updates,
            actor=ctx.actor,
            request_id=ctx.request_id,
        )
        self._save_or_forget(file_io, md_location, name_claim, table, hint=data)
        return TableState(table_id, md_location, metadata)

    def _save_or_forget(
        self,
        file_io: FileIO,
        md_location: str,
        *aggregates: Any,
        hint: bytes,
        unknown: type[CatalogError] = ServiceUnavailableError,
    ) -> None:
        """Append a command that wrote the metadata file `md_location`; see `append_known`."""
        probe = next(a for a in aggregates if isinstance(a, (Table, View)))
        self.append_known(
            file_io,
            [md_location],
            (probe, md_location),
            *aggregates,
            hints={md_location: hint},
            unknown=unknown,
        )

    def append_known(
        self,
        file_io: FileIO | None,
        written: list[str],
        probe: tuple[Any, str],
        *aggregates: Any,
        hints: dict[str, bytes],
        unknown: type[CatalogError] = ServiceUnavailableError,
    ) -> None:
        """Append, and decide what to do with the files written for it from the append's
        KNOWN outcome (issue 16): the files are deleted only when the append certainly did
        not happen.

        - It landed: done — also when the save failed after the database committed (a
          connection lost on COMMIT, an error after the insert), found by reading the log.
        - A conflict, or a failure after which the log shows the events are not there: the
          files are removed and the error raised (a conflict makes the command start over).
        - The log cannot be read: nobody knows. The files stay — a metadata file the log
          names must never be deleted — and `unknown` is raised (a 5xx: the client must not
          clean up, and reloads to see the outcome).

        `probe` is (an aggregate of the append, the metadata location its new event names):
        with the event's request id, unique to this attempt.
        """
        try:
            self.save_all(*aggregates, hints=hints)
            return
        except (ConcurrentChange, IdempotentReplay, NothingAppendedError) as exc:
            failure: BaseException = exc
            landed: bool | None = (
                self._landed_or_unknown(*probe) if isinstance(exc, ConcurrentChange) else False
            )
        except BaseException as exc:
            failure = exc
            landed = self._landed_or_unknown(*probe)
            if landed is False:
                # A connection lost during COMMIT: the database may still be finishing it,
                # and a read from another connection not see it yet. Look once more.
                time.sleep(RECHECK_AFTER_S)
                landed = self._landed_or_unknown(*probe)
        if landed:
            return
        if landed is None:
            raise unknown(
                "The outcome of this change is unknown (the database did not confirm it): "
                "reload to see whether it was applied"
            ) from failure
        if file_io is not None:
            for location in written:
                with contextlib.suppress(OSError, CatalogError):
                    file_io.delete(location)
        raise failure

    def _landed_or_unknown(self, aggregate: Any, md_location: str) -> bool | None:
        try:
            return self._landed(aggregate, md_location)
        except Exception:
            log.warning("could not read the log to resolve an append's outcome", exc_info=True)
            return None

    def _landed(self, aggregate: Any, md_location: str) -> bool:
        """Whether the event this process tried to append as `aggregate`'s current version
        is in the log (compared by the metadata file it names: unique per attempt, or — for
        a register — on a table id that is new per attempt)."""
        version = aggregate.version
        stored = self.recorder.select_events(aggregate.id, gt=version - 1, lte=version)
        if not stored:
            return False
        event = self.mapper.to_domain_event(stored[0])
        return getattr(event, "metadata_location", None) == md_location

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

        def attempt() -> TableState:
            warehouse = self.get_warehouse(warehouse_id)
            ns_id = self.existing_namespace_id(warehouse_id, name.namespace, known=False)
            existing = self._claim(warehouse_id, name)
            if existing is not None and existing.is_held:
                if existing.kind == "view":
                    raise AlreadyExistsError(f"View with same name already exists: {name.dotted}")
                raise CommitFailedError("Requirement failed: table already exists")
            metadata = apply_updates(None, updates, now_ms=now_ms(), previous_location=None)
            reject_secret_properties(metadata.get("properties", {}), "Table")
            self._check_location(warehouse, metadata["location"])
            table_id = self._client_id_or_new(metadata.get("table-uuid"))
            if not self._is_default_location(warehouse, name, table_id, metadata["location"]):
                self._refuse_covering_files(
                    self.file_io(warehouse.storage_profile),
                    metadata["location"],
                    may_cover_files=may_cover_files,
                )
            return self._append_new_table(
                ctx, warehouse, ns_id, existing, name, table_id, metadata, updates=updates
            )

        return self.retrying(attempt)

    @staticmethod
    def _is_default_location(
        warehouse: Warehouse | WarehouseStorage, name: TabularName, table_id: UUID, location: Any
    ) -> bool:
        root = Location.parse(warehouse.base_location, "warehouse location")
        default = default_table_location(root, name.namespace, name.name, table_id)
        return str(Location.parse(location, "table location")) == str(default)

    # -- commit ----------------------------------------------------------------------------
    def commit_table(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: TabularName,
        requirements: list[dict[str, Any]],
        updates: list[dict[str, Any]],
        *,
        may_cover_files: bool = True,
    ) -> TableState:
        """Check requirements against the CURRENT table, apply, write, append.

        A concurrent commit makes the append fail on the aggregate version; the attempt
        then starts over against the newer table: if the requirements still hold the
        updates are re-applied on top (server-side rebase), otherwise 409.
        `may_cover_files`: whether a `set-location` onto files already in storage is
        accepted (`_refuse_covering_files`).
        """
        if is_create_requirements(requirements):
            return self._create_by_transaction(
                ctx, warehouse_id, name, updates, may_cover_files=may_cover_files
            )

        def attempt() -> TableState:
            # First try on the table as this process last wrote it, without asking the
            # database for newer events: if another replica committed meanwhile, the append
            # conflicts on the version and the retry starts from fresh state. An answer that
            # does NOT append (a failed requirement, a no-op, a 400) is only given after
            # re-checking against fresh state.
            recent = self._recent_table(warehouse_id, name)
            if recent is not None:
                try:
                    return one(recent, optimistic=True)
                except _NeedsFreshState:
                    self._recent_tables.pop(recent.id, None)
            return one(self.get_table(warehouse_id, name), optimistic=False)

        def one(table: Table, *, optimistic: bool) -> TableState:
            file_io = self.file_io(self.storage_profile(warehouse_id))
            try:
                staged = self._stage_commit(
                    ctx,
                    warehouse_id,
                    table,
                    requirements,
                    updates,
                    file_io,
                    may_cover_files=may_cover_files,
                )
            except CatalogError:
                if optimistic:
                    raise _NeedsFreshState from None
                raise
            if staged is None:
                if optimistic:
                    raise _NeedsFreshState
                return TableState(
                    table.id, table.metadata_location, self.table_metadata(table, file_io)
                )
            try:
                self._save_or_forget(
                    file_io,
                    staged.location,
                    table,
                    hint=staged.data,
                    unknown=CommitStateUnknownError,
                )
            except ConcurrentChange:
                self._recent_tables.pop(table.id, None)
                raise
            self._remember_table(table)
            try:  # best effort, after the commit landed: it must not turn it into an error
                self._delete_expired_metadata_files(staged.base, staged.metadata, file_io)
            except Exception:
                log.warning("could not delete expired metadata files", exc_info=True)
            return TableState(table.id, staged.location, staged.metadata, staged.data)

        with _commit_turn(warehouse_id, [name]):
            return self.retrying(attempt)

    def table_metadata(self, tabular: Table | View, file_io: FileIO) -> dict[str, Any]:
        """A table's or view's current document: its metadata file, which the catalog wrote
        and never changes — except a registered one's first, the client's file, whose content
        is taken from the log (what was registered), not from the file as it is now."""
        location = tabular.metadata_location
        if location != getattr(tabular, "registered_location", None):
            return self.load_metadata(location, file_io)
        cached = self.metadata_cache.get(location)
        if cached is not None:
            return cached
        first = self.mapper.to_domain_event(self.recorder.select_events(tabular.id, lte=1)[0])
        assert isinstance(first, (Table.Registered, View.Registered))
        self.remember_metadata(location, first.metadata)
        return first.metadata

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
            self.repository.get(wanted)
        except AggregateNotFoundError:
            return wanted
        return uuid4()

    def _stage_commit(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        table: Table,
        requirements: list[dict[str, Any]],
        updates: list[dict[str, Any]],
        file_io: FileIO,
        *,
        may_cover_files: bool,
    ) -> _Staged | None:
        """Check, apply, write the next metadata file and record the commit on `table`
        (not yet saved). None when the updates change nothing."""
        base = self.table_metadata(table, file_io)
        check_requirements(base, requirements)
        applied_at = now_ms()
        metadata = apply_updates(
            base, updates, now_ms=applied_at, previous_location=table.metadata_location
        )
        if metadata is base:
            return None
        if metadata["location"] != base["location"]:
            self._check_location(self.get_warehouse(warehouse_id), metadata["location"])
            self._refuse_covering_files(
                file_io, metadata["location"], may_cover_files=may_cover_files
            )
        reject_secret_properties(metadata.get("properties", {}), "Table")
        version = metadata_file_version(table.metadata_location) + 1
        md_location = str(metadata_dir(metadata).child(metadata_file_name(version, str(uuid4()))))
        data = self.remember_metadata(md_location, metadata)
        self.write_metadata(file_io, md_location, data)
        table.commit(
            requirements=requirements,
            updates=updates,
            metadata_location=md_location,
            applied_at_ms=applied_at,
            actor=ctx.actor,
            request_id=ctx.request_id,
        )
        return _Staged(md_location, data, base, metadata)

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

        def attempt() -> None:
            file_io = self.file_io(self.storage_profile(warehouse_id))
            tables: dict[UUID, Table] = {}
            staged: list[_Staged] = []
            staged_tables: list[Table] = []
            try:
                for name, requirements, updates in changes:
                    found = self.get_table(warehouse_id, name)
                    table = tables.setdefault(found.id, found)
                    step = self._stage_commit(
                        ctx,
                        warehouse_id,
                        table,
                        requirements,
                        updates,
                        file_io,
                        may_cover_files=may_cover_files,
                    )
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
                    self.append_known(
                        file_io,
                        [s.location for s in staged],
                        (tables[table_id], step.location),
                        *tables.values(),
                        hints={s.location: s.data for s in staged},
                        unknown=CommitStateUnknownError,
                    )
                except BaseException:
                    for known in tables:
                        self._recent_tables.pop(known, None)
                    raise
            for table in tables.values():
                self._remember_table(table)

        with _commit_turn(warehouse_id, [name for name, _r, _u in changes]):
            self.retrying(attempt)

    def _forget_staged(
        self, file_io: FileIO, staged: list[_Staged], tables: dict[UUID, Table]
    ) -> None:
        for step in staged:
            with contextlib.suppress(OSError, CatalogError):
                file_io.delete(step.location)
        for table_id in tables:
            self._recent_tables.pop(table_id, None)

    @staticmethod
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

    # -- rename ----------------------------------------------------------------------------
    def rename_table(
        self, ctx: RequestContext, warehouse_id: UUID, source: TabularName, dest: TabularName
    ) -> None:
        if not dest.name:
            raise BadRequestError("Table name must not be empty")

        def attempt() -> None:
            self.get_warehouse(warehouse_id)
            table = self.get_table(warehouse_id, source)
            dest_ns = self.get_namespace(warehouse_id, dest.namespace)
            target = self._claim(warehouse_id, dest)
            if target is not None and target.is_held:
                if target.kind == "view":
                    raise AlreadyExistsError(
                        f"Cannot rename {source.dotted} to {dest.dotted}. View already exists"
                    )
                raise AlreadyExistsError(f"Table already exists: {dest.dotted}")
            new_claim = self._table_claim(target, warehouse_id, dest, table.id, ctx)
            self.move_tabular(ctx, warehouse_id, table, source, dest, dest_ns, new_claim)

        self.retrying(attempt)

    def move_tabular(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        tabular: Table | View,
        source: TabularName,
        dest: TabularName,
        dest_ns: Namespace,
        new_claim: NameClaim,
    ) -> None:
        """The rename of a table or view (checked by the caller): release the old name, hold
        the new one and rename — one append (which checks that `dest_ns` still exists)."""
        old_claim = self._claim(warehouse_id, source)
        if old_claim is not None:
            old_claim.release(actor=ctx.actor, request_id=ctx.request_id)
        tabular.rename(
            namespace_id=dest_ns.id,
            namespace=dest.namespace.as_list(),
            name=dest.name,
            actor=ctx.actor,
            request_id=ctx.request_id,
        )
        self.save_all(old_claim, new_claim, tabular)

    # -- register --------------------------------------------------------------------------
    def load_registered(
        self, warehouse: Warehouse, metadata_location: str, file_io: FileIO, kind: str
    ) -> dict[str, Any]:
        """The metadata file a register request names: inside the warehouse (400 otherwise),
        then read with one answer for every reason it cannot be used (404)."""
        check_scheme_allowed(warehouse.storage_profile, metadata_location)
        root = Location.parse(warehouse.base_location, "warehouse location")
        parse_inside(metadata_location, root, "metadata location")

        def is_kind(metadata: dict[str, Any]) -> bool:
            if not isinstance(metadata.get("location"), str):
                return False
            if kind == "view":
                return "view-uuid" in metadata
            return "format-version" in metadata and "view-uuid" not in metadata

        metadata = self.load_client_metadata(metadata_location, file_io, is_kind)
        # Found and of the right kind: what is wrong with it now is said (400), as for a
        # commit — every later load and commit of the table reads it.
        if kind == "view":
            check_view_metadata(metadata)
        else:
            check_table_metadata(metadata)
        return metadata

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
        if not name.name:
            raise BadRequestError("Table name must not be empty")
        table_id = uuid4()

        def attempt() -> TableState:
            warehouse = self.get_warehouse(warehouse_id)
            ns = self.get_namespace(warehouse_id, name.namespace)
            existing = self._free_claim(warehouse_id, name)
            file_io = self.file_io(warehouse.storage_profile)
            metadata = self.load_registered(warehouse, metadata_location, file_io, "table")
            self._check_location(warehouse, metadata["location"])
            self._refuse_covering_files(
                file_io, metadata["location"], may_cover_files=may_cover_files
            )
            name_claim = self._table_claim(existing, warehouse_id, name, table_id, ctx)
            table = Table.register(
                table_id=table_id,
                warehouse_id=warehouse_id,
                namespace_id=ns.id,
                namespace=name.namespace.as_list(),
                name=name.name,
                location=str(Location.parse(metadata["location"], "table location")),
                metadata_location=metadata_location,
                metadata=metadata,
                actor=ctx.actor,
                request_id=ctx.request_id,
            )
            self.append_known(
                None,
                [],
                (table, metadata_location),
                name_claim,
                table,
                hints={metadata_location: orjson.dumps(metadata)},
            )
            return TableState(table_id, metadata_location, metadata)

        return self.retrying(attempt)

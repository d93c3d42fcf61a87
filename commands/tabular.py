"""The core tables and views share: one name space (their name claims), where they may
live, their current metadata document, rename, register's file check, and one way to
commit a new metadata file (turns, an optimistic first attempt, the known-outcome append).
The table and view command groups (commands/tables.py, commands/views.py) hold one."""

from __future__ import annotations

import contextlib
import copy
import itertools
from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID, uuid4

from eventsourcing.application import project_aggregate

from icelog.commands.application import CatalogApplication, WarehouseStorage, now_ms
from icelog.commands.group_commit import ConcurrentChange
from icelog.commands.known_outcome import append_known, append_written
from icelog.commands.lookups import KnownNamespaces, get_namespace, get_warehouse
from icelog.commands.ports import ReadPorts
from icelog.commands.storage import kind_for
from icelog.commands.tabular_values import (
    NeedsFreshState,
    NewPlace,
    Stage,
    Staged,
    TableState,
    claim_name,
    new_tabular_fields,
)
from icelog.commands.turns import TABULAR_TURNS
from icelog.domain.claims import NameClaim
from icelog.domain.context import RequestContext
from icelog.domain.errors import (
    AlreadyExistsError,
    BadRequestError,
    CatalogError,
    CommitStateUnknownError,
    LocationTakenError,
)
from icelog.domain.identifiers import NamespaceName, TabularName, namespace_id, tabular_claim_id
from icelog.domain.locations import (
    Location,
    check_scheme_allowed,
    default_table_location,
    parse_inside,
)
from icelog.domain.metadata_check import check_table_metadata, check_view_metadata
from icelog.domain.namespace import Namespace
from icelog.domain.ports import FileIO
from icelog.domain.storage_layout import StorageLayout
from icelog.domain.table import Table
from icelog.domain.tabular import Tabular
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse

KINDS: dict[str, type[Table] | type[View]] = {"table": Table, "view": View}
T = TypeVar("T", bound=Tabular)


def default_location(
    warehouse: Warehouse | WarehouseStorage, name: TabularName, tabular_id: UUID
) -> Location:
    """Where a new table, view or function goes when its create names no location: as the
    warehouse's `storage-layout` places it (`domain/storage_layout.py`), else
    `<warehouse>/<namespace levels>/<name>-<id>`."""
    root = Location.parse(warehouse.base_location, "warehouse location")
    return default_table_location(
        root,
        name.namespace,
        name.name,
        tabular_id,
        layout=StorageLayout.of(warehouse.storage_profile),
        warehouse_id=warehouse.id,
    )


class TabularCore:
    """What table and view commands share, with the state a process keeps between
    requests: ids by name, tabulars as this process last appended them, namespaces
    known to exist."""

    def __init__(
        self, app: CatalogApplication, ports: ReadPorts, known_namespaces: KnownNamespaces
    ) -> None:
        self.app = app
        self.ports = ports
        self._known_namespaces = known_namespaces
        self._ids: dict[tuple[UUID, TabularName], UUID] = {}
        # Tabulars as this process last appended them (see `commit`); never mutated.
        self._recent: dict[UUID, Tabular] = {}

    # -- names -------------------------------------------------------------------------------
    def read_claim(self, warehouse_id: UUID, name: TabularName) -> NameClaim | None:
        """The name's claim, from its events alone: a repository read of a claim it has not
        cached asks for a snapshot first, one more round trip, and most claims read here
        are new names with neither (a claim seldom has the 100 events of a snapshot)."""
        events = list(self.app.events.get(tabular_claim_id(warehouse_id, name)))
        if not events:
            return None
        found = project_aggregate(None, events)
        return found if isinstance(found, NameClaim) else None

    def free_claim(self, warehouse_id: UUID, name: TabularName, kind: str) -> NameClaim | None:
        """The claim for a new table or view name: absent or released; 409 when held."""
        existing = self.read_claim(warehouse_id, name)
        if existing is not None and existing.is_held:
            if existing.kind == kind:
                raise AlreadyExistsError(f"{kind.capitalize()} already exists: {name.dotted}")
            other = "View" if existing.kind == "view" else "Table"
            raise AlreadyExistsError(f"{other} with same name already exists: {name.dotted}")
        return existing

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
        self._known_namespaces.forget(key)
        ns = get_namespace(self.app, warehouse_id, name)
        self._known_namespaces.add(key)
        return ns.id

    # -- lookups -----------------------------------------------------------------------------
    def find(self, cls: type[T], warehouse_id: UUID, name: TabularName) -> T | None:
        """The live table or view (`cls`) of that name, None when the name holds none."""
        kind = cls.KIND.lower()  # the claim's kind: table, view
        # Fast path: the tabular this name led to last time, if it still has that name.
        # The aggregate itself is always loaded fresh, so a drop or rename is seen.
        known = self._ids.get((warehouse_id, name))
        if known is not None:
            found = self.app.get_or_none(known, cls)
            if found is not None and _named(found, name):
                return found
        held = self.read_claim(warehouse_id, name)
        if held is None or held.holder_id is None or held.kind != kind:
            return None
        tabular = self.app.get_or_none(held.holder_id, cls)
        if tabular is None or tabular.dropped:
            return None
        if len(self._ids) > 100_000:
            self._ids.clear()
        self._ids[(warehouse_id, name)] = tabular.id
        return tabular

    def get(self, cls: type[T], warehouse_id: UUID, name: TabularName) -> T:
        """As `find`; the kind's not-found error (404) when the name holds none."""
        found = self.find(cls, warehouse_id, name)
        if found is None:
            raise cls.NOT_FOUND(f"{cls.KIND} does not exist: {name.dotted}")
        return found

    # -- locations ---------------------------------------------------------------------------
    def check_location(self, warehouse: Warehouse | WarehouseStorage, location: Any) -> Location:
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
        kind_for(warehouse.storage_profile).check_location(warehouse.storage_profile, str(parsed))
        other = self.ports.location_index(str(warehouse.id), str(parsed))
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
    def refuse_covering_files(file_io: FileIO, location: Any, *, may_cover_files: bool) -> None:
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

    def place_new(
        self,
        kind: str,
        warehouse_id: UUID,
        name: TabularName,
        requested: str | None,
        tabular_id: UUID,
        *,
        retry: bool,
        namespace_known: bool,
    ) -> NewPlace:
        """One create attempt's place: the warehouse from the storage profile cache unless
        this is a retry or the client chose the location (see `warehouse_storage`); the
        namespace not read again once known to exist; the name's claim always read, so a
        taken name answers 409 without a failed append (the append checks the rest again,
        ADR 0018)."""
        warehouse = self.app.warehouse_storage(warehouse_id, fresh=retry or bool(requested))
        ns_id = self.existing_namespace_id(warehouse_id, name.namespace, known=namespace_known)
        claim = self.free_claim(warehouse_id, name, kind)
        return NewPlace(
            warehouse, ns_id, claim, self.new_location(warehouse, name, requested, tabular_id)
        )

    def create(
        self,
        kind: str,
        warehouse_id: UUID,
        name: TabularName,
        requested: str | None,
        *,
        namespace_known: bool,
        document: Callable[..., dict[str, Any]],
        build: Callable[[NewPlace, UUID, dict[str, Any]], TableState],
    ) -> TableState:
        """A new table's or view's create. Each attempt finds its place (`place_new`) and
        makes the first document there (`document`, given the new id, the location and the
        time); `build` appends it (`append_created`). An attempt that loses a race is tried
        again, reading the warehouse and the namespace afresh; without `namespace_known`
        the namespace is read even on the first attempt."""
        if not name.name:
            raise BadRequestError(f"{kind.capitalize()} name must not be empty")
        tabular_id = uuid4()
        attempts = itertools.count()

        def attempt() -> TableState:
            retry = next(attempts) > 0
            place = self.place_new(
                kind, warehouse_id, name, requested, tabular_id,
                retry=retry, namespace_known=namespace_known and not retry,
            )  # fmt: skip
            metadata = document(uuid=str(tabular_id), location=place.location, now_ms=now_ms())
            return build(place, tabular_id, metadata)

        return self.app.retrying(attempt)

    def append_created(
        self,
        ctx: RequestContext,
        place: NewPlace,
        name: TabularName,
        metadata_location: str,
        metadata: dict[str, Any],
        new: Callable[..., Tabular],
    ) -> TableState:
        """Write a new table's or view's first metadata file, then claim the name and create
        it (`new`, given its first event's fields) in one append; the file is removed if the
        append loses a race."""
        app, warehouse_id = self.app, place.warehouse.id
        file_io = app.file_io(place.warehouse.storage_profile)
        data = app.remember_metadata(metadata_location, metadata)
        app.write_metadata(file_io, metadata_location, data)
        tabular = new(
            **new_tabular_fields(
                ctx,
                warehouse_id,
                place.namespace_id,
                name,
                location=str(Location.parse(metadata["location"], "table location")),
                metadata_location=metadata_location,
                metadata=metadata,
            )
        )
        kind = tabular.KIND.lower()
        name_claim = claim_name(place.claim, warehouse_id, name, kind, tabular.id, ctx)
        append_written(app, file_io, metadata_location, tabular, name_claim, tabular, hint=data)
        return TableState(tabular.id, metadata_location, metadata)

    def new_location(
        self,
        warehouse: Warehouse | WarehouseStorage,
        name: TabularName,
        requested: str | None,
        tabular_id: UUID,
    ) -> str:
        """A new table's or view's location: the requested one if it is free and inside the
        warehouse, else where the warehouse's layout places it (`default_location`)."""
        if requested:
            return str(self.check_location(warehouse, requested))
        return str(default_location(warehouse, name, tabular_id))

    # -- metadata ----------------------------------------------------------------------------
    def current_metadata(self, tabular: Tabular, file_io: FileIO) -> dict[str, Any]:
        """A table's or view's current document: its metadata file, which the catalog wrote
        and never changes — except a registered one's first, the client's file, whose content
        is taken from the log (what was registered), not from the file as it is now."""
        app = self.app
        location = tabular.metadata_location
        if location != getattr(tabular, "registered_location", None):
            return app.load_metadata(location, file_io)
        cached = app.metadata_cache.get(location)
        if cached is not None:
            return cached
        first = app.mapper.to_domain_event(app.recorder.select_events(tabular.id, lte=1)[0])
        assert isinstance(first, (Table.Registered, View.Registered))
        app.remember_metadata(location, first.metadata)
        return first.metadata

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

        metadata = self.app.load_client_metadata(metadata_location, file_io, is_kind)
        # Found and of the right kind: what is wrong with it now is said (400), as for a
        # commit — every later load and commit of the table reads it.
        if kind == "view":
            check_view_metadata(metadata)
        else:
            check_table_metadata(metadata)
        return metadata

    # -- register ----------------------------------------------------------------------------
    def register(
        self,
        ctx: RequestContext,
        kind: str,
        warehouse_id: UUID,
        name: TabularName,
        metadata_location: str,
        *,
        may_cover_files: bool,
    ) -> TableState:
        """A table or view whose metadata file a client wrote: the file is checked (see
        `load_registered`), and its location as a location the client chose. One append:
        the name's claim and the tabular (which keeps the document: see
        `current_metadata`)."""
        if not name.name:
            raise BadRequestError(f"{kind.capitalize()} name must not be empty")
        tabular_id = uuid4()
        app = self.app

        def attempt() -> TableState:
            warehouse = get_warehouse(app, warehouse_id)
            ns = get_namespace(app, warehouse_id, name.namespace)
            existing = self.free_claim(warehouse_id, name, kind)
            file_io = app.file_io(warehouse.storage_profile)
            metadata = self.load_registered(warehouse, metadata_location, file_io, kind)
            self.check_location(warehouse, metadata["location"])
            self.refuse_covering_files(
                file_io, metadata["location"], may_cover_files=may_cover_files
            )
            name_claim = claim_name(existing, warehouse_id, name, kind, tabular_id, ctx)
            fields = new_tabular_fields(
                ctx,
                warehouse_id,
                ns.id,
                name,
                location=str(Location.parse(metadata["location"], f"{kind} location")),
                metadata_location=metadata_location,
                metadata=metadata,
            )
            tabular: Tabular = (
                Table.register(table_id=tabular_id, **fields)
                if kind == "table"
                else View.create(registered=True, view_id=tabular_id, **fields)
            )
            hint = app.remember_metadata(metadata_location, metadata)
            append_known(
                app,
                None,
                [],
                (tabular, metadata_location),
                name_claim,
                tabular,
                hints={metadata_location: hint},
            )
            return TableState(tabular_id, metadata_location, metadata)

        return app.retrying(attempt)

    # -- rename ------------------------------------------------------------------------------
    def rename(
        self,
        ctx: RequestContext,
        kind: str,
        warehouse_id: UUID,
        source: TabularName,
        dest: TabularName,
    ) -> None:
        """Release the old name, hold the new one and rename — one append (which checks
        that the destination namespace still exists)."""
        if not dest.name:
            raise BadRequestError(f"{kind.capitalize()} name must not be empty")

        def attempt() -> None:
            get_warehouse(self.app, warehouse_id)
            tabular = self.get(KINDS[kind], warehouse_id, source)
            dest_ns = get_namespace(self.app, warehouse_id, dest.namespace)
            target = self.read_claim(warehouse_id, dest)
            if target is not None and target.is_held:
                holder = "View" if target.kind == "view" else "Table"
                if kind == "table" and holder == "Table":
                    raise AlreadyExistsError(f"Table already exists: {dest.dotted}")
                raise AlreadyExistsError(
                    f"Cannot rename {source.dotted} to {dest.dotted}. {holder} already exists"
                )
            new_claim = claim_name(target, warehouse_id, dest, kind, tabular.id, ctx)
            self._move(ctx, warehouse_id, tabular, source, dest, dest_ns, new_claim)

        self.app.retrying(attempt)

    def _move(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        tabular: Tabular,
        source: TabularName,
        dest: TabularName,
        dest_ns: Namespace,
        new_claim: NameClaim,
    ) -> None:
        old_claim = self.read_claim(warehouse_id, source)
        if old_claim is not None:
            old_claim.release(actor=ctx.actor, request_id=ctx.request_id)
        tabular.rename(
            namespace_id=dest_ns.id,
            namespace=dest.namespace.as_list(),
            name=dest.name,
            actor=ctx.actor,
            request_id=ctx.request_id,
        )
        self.app.save_all(old_claim, new_claim, tabular)

    # -- commits -----------------------------------------------------------------------------
    def remember(self, tabular: Tabular) -> None:
        if len(self._recent) > 10_000:
            self._recent.clear()
        self._recent[tabular.id] = tabular

    def forget(self, tabular_id: UUID) -> None:
        self._recent.pop(tabular_id, None)

    def _recent_one(self, kind: str, warehouse_id: UUID, name: TabularName) -> Tabular | None:
        known = self._ids.get((warehouse_id, name))
        found = self._recent.get(known) if known is not None else None
        if found is None or not isinstance(found, KINDS[kind]) or not _named(found, name):
            return None
        return copy.deepcopy(found)

    def commit(
        self,
        kind: str,
        warehouse_id: UUID,
        name: TabularName,
        stage: Stage,
        *,
        after: Callable[[Staged, FileIO], None] | None = None,
    ) -> TableState:
        """Stage a change on the CURRENT table or view and append it; a concurrent change
        makes the attempt start over on the newer one (server-side rebase, or 409 from
        `stage`). `after` runs once the change landed (best effort)."""
        app = self.app

        def attempt() -> TableState:
            # First try on the tabular as this process last wrote it, without asking the
            # database for newer events: if another replica committed meanwhile, the append
            # conflicts on the version and the retry starts from fresh state. An answer that
            # does NOT append (a failed requirement, a no-op, a 400) is only given after
            # re-checking against fresh state.
            recent = self._recent_one(kind, warehouse_id, name)
            if recent is not None:
                try:
                    return one(recent, optimistic=True)
                except NeedsFreshState:
                    self.forget(recent.id)
            return one(self.get(KINDS[kind], warehouse_id, name), optimistic=False)

        def one(tabular: Tabular, *, optimistic: bool) -> TableState:
            file_io = app.file_io(app.storage_profile(warehouse_id))
            try:
                staged = stage(tabular, file_io)
            except CatalogError:
                if optimistic:
                    raise NeedsFreshState from None
                raise
            if staged is None:
                if optimistic:
                    raise NeedsFreshState
                metadata = self.current_metadata(tabular, file_io)
                return TableState(tabular.id, tabular.metadata_location, metadata)
            try:
                append_written(
                    app,
                    file_io,
                    staged.location,
                    tabular,
                    tabular,
                    hint=staged.data,
                    unknown=CommitStateUnknownError,
                )
            except ConcurrentChange:
                self.forget(tabular.id)
                raise
            self.remember(tabular)
            if after is not None:
                after(staged, file_io)
            return TableState(tabular.id, staged.location, staged.metadata, staged.data)

        with take_turns(warehouse_id, [name]):
            return app.retrying(attempt)


def take_turns(
    warehouse_id: UUID, names: list[TabularName]
) -> contextlib.AbstractContextManager[None]:
    """Changes to one table or view run one at a time within a process (commands/turns.py)."""
    return TABULAR_TURNS.take((warehouse_id, n.namespace.key, n.name) for n in names)


def _named(tabular: Tabular, name: TabularName) -> bool:
    """Whether a live tabular still has `name`."""
    return (
        not tabular.dropped
        and tabular.name == name.name
        and tuple(tabular.namespace) == name.namespace.levels
    )

"""Drop, soft delete, undrop and expiry of tables and views.

A warehouse's delete profile decides what a drop does. `hard`: the tabular is gone at
once (a requested purge is scheduled as a task, out of the request). `soft`: the
tabular is set aside with its metadata and files, its name freed, and an expiration
task is scheduled in the same append; undrop brings it back until the task runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from icelog.commands.application import CatalogApplication, now_ms
from icelog.commands.lookups import get_namespace, get_warehouse
from icelog.commands.tabular import KINDS, TabularCore
from icelog.commands.tabular_values import claim_name
from icelog.domain.claims import NameClaim
from icelog.domain.context import RequestContext
from icelog.domain.errors import (
    AlreadyExistsError,
    BadRequestError,
    CommitFailedError,
    ConflictError,
    NotFoundError,
)
from icelog.domain.identifiers import NamespaceName, TabularName
from icelog.domain.namespace import Namespace
from icelog.domain.protection import ensure_unprotected
from icelog.domain.table import Table
from icelog.domain.task import EXPIRATION_QUEUE, PURGE_QUEUE, Task
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse


@dataclass(frozen=True)
class UndropTarget:
    kind: str  # "table" or "view"
    tabular_id: UUID
    new_name: str | None = None


def soft_expiration(warehouse: Warehouse) -> int | None:
    """Seconds a drop is kept in a soft-delete warehouse; None when drops are hard."""
    profile = warehouse.delete_profile or {}
    if profile.get("type") != "soft":
        return None
    return int(profile.get("expiration-seconds", 0))


_PROTECTABLE: dict[str, type[Table] | type[View] | type[Namespace] | type[Warehouse]] = {
    "table": Table,
    "view": View,
    "namespace": Namespace,
    "warehouse": Warehouse,
}


class LifecycleCommands:
    """Drops, undrops and expiry of tables and views, and the protection that refuses them."""

    # Called with a task's due time when one is scheduled, so that local workers wake up
    # at once. A no-op until the composition root has workers to wake: they poll anyway,
    # so nothing is lost without it, only latency.
    on_task_scheduled: Callable[[int], None] = staticmethod(lambda _due: None)

    def __init__(
        self, app: CatalogApplication, core: TabularCore, *, task_max_attempts: int
    ) -> None:
        """`task_max_attempts`: how often a scheduled task is tried (settings)."""
        self.app = app
        self.core = core
        self.task_max_attempts = task_max_attempts

    # -- protection ------------------------------------------------------------------------
    def _protectable(
        self, warehouse_id: UUID, kind: str, entity_id: UUID
    ) -> Table | View | Namespace | Warehouse:
        entity = self.app.get_or_none(entity_id, _PROTECTABLE[kind])
        gone = (
            entity is None or getattr(entity, "dropped", False) or getattr(entity, "deleted", False)
        )
        if entity is not None and not isinstance(entity, Warehouse):
            gone = gone or entity.warehouse_id != warehouse_id
        if gone or entity is None:
            raise NotFoundError(f"{kind.capitalize()} does not exist: {entity_id}")
        return entity

    def protection(self, warehouse_id: UUID, kind: str, entity_id: UUID) -> tuple[bool, datetime]:
        entity = self._protectable(warehouse_id, kind, entity_id)
        return entity.is_protected, entity.modified_on

    def set_protection(
        self, ctx: RequestContext, warehouse_id: UUID, kind: str, entity_id: UUID, protected: bool
    ) -> tuple[bool, datetime]:
        def attempt() -> tuple[bool, datetime]:
            entity = self._protectable(warehouse_id, kind, entity_id)
            if entity.is_protected != protected:
                entity.set_protection(protected, actor=ctx.actor, request_id=ctx.request_id)
                self.app.save_all(entity)
            return entity.is_protected, entity.modified_on

        return self.app.retrying(attempt)

    def tabular_protected(self, warehouse_id: UUID, name: TabularName, kind: str) -> bool:
        found = self.core.find(KINDS[kind], warehouse_id, name)
        return found is not None and found.is_protected

    # -- drop ------------------------------------------------------------------------------
    def drop_table(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: TabularName,
        *,
        purge: bool,
        final: bool = False,
    ) -> None:
        """Drop a table: soft or hard as the warehouse says, or hard when `final`
        (a recursive namespace drop)."""

        def attempt() -> int | None:
            warehouse = get_warehouse(self.app, warehouse_id)
            table = self.core.get(Table, warehouse_id, name)
            ensure_unprotected(table.is_protected, f"Table {name.dotted}")
            return self._drop(ctx, warehouse, table, "table", name, purge=purge, final=final)

        self.notify_scheduled(self.app.retrying(attempt))

    def unregister_table(
        self, ctx: RequestContext, warehouse_id: UUID, name: TabularName, *, expected_location: str
    ) -> str:
        """unregisterTable: the table leaves the catalog at once, whatever the warehouse's
        delete profile, and no file is touched — if its metadata is still at
        `expected_location` (what the caller will hand back), else `CommitFailedError`.
        Returns that location."""

        def attempt() -> str:
            table = self.core.get(Table, warehouse_id, name)
            assert isinstance(table, Table)
            ensure_unprotected(table.is_protected, f"Table {name.dotted}")
            if table.metadata_location != expected_location:
                raise CommitFailedError(f"Table {name.dotted} changed while unregistering")
            name_claim = self.core.read_claim(warehouse_id, name)
            if name_claim is not None:
                name_claim.release(actor=ctx.actor, request_id=ctx.request_id)
            location = str(table.metadata_location)
            table.unregister(actor=ctx.actor, request_id=ctx.request_id)
            self.app.save_all(table, name_claim)
            return location

        found: str = self.app.retrying(attempt)
        return found

    def drop_view(
        self, ctx: RequestContext, warehouse_id: UUID, name: TabularName, *, final: bool = False
    ) -> None:
        def attempt() -> int | None:
            warehouse = get_warehouse(self.app, warehouse_id)
            view = self.core.get(View, warehouse_id, name)
            ensure_unprotected(view.is_protected, f"View {name.dotted}")
            return self._drop(ctx, warehouse, view, "view", name, purge=False, final=final)

        self.notify_scheduled(self.app.retrying(attempt))

    def _drop(
        self,
        ctx: RequestContext,
        warehouse: Warehouse,
        tabular: Table | View,
        kind: str,
        name: TabularName,
        *,
        purge: bool,
        final: bool,
    ) -> int | None:
        """One append: the drop, the freed name and the task that follows (expiration, or
        an immediate purge). Returns the task's due time."""
        name_claim = self.core.read_claim(warehouse.id, name)
        if name_claim is not None:
            name_claim.release(actor=ctx.actor, request_id=ctx.request_id)
        seconds = None if final else soft_expiration(warehouse)
        task: Task | None = None
        if seconds is not None:
            deleted_at = now_ms()
            task = self._schedule(
                ctx,
                EXPIRATION_QUEUE,
                tabular,
                kind,
                due_at_ms=deleted_at + seconds * 1000,
                payload={},
            )
            extra = {"purge_requested": purge} if kind == "table" else {}
            tabular.soft_drop(
                deleted_at_ms=deleted_at,
                expiration_seconds=seconds,
                expiration_task_id=task.id,
                actor=ctx.actor,
                request_id=ctx.request_id,
                **extra,
            )
        elif isinstance(tabular, Table):
            if purge:
                task = self._purge_task(ctx, tabular)
            tabular.drop(purge_requested=purge, actor=ctx.actor, request_id=ctx.request_id)
        else:
            tabular.drop(actor=ctx.actor, request_id=ctx.request_id)
        self.app.save_all(tabular, name_claim, task)
        return task.due_at_ms if task is not None else None

    def _schedule(
        self,
        ctx: RequestContext,
        queue: str,
        tabular: Table | View,
        kind: str,
        *,
        due_at_ms: int,
        payload: dict[str, Any],
    ) -> Task:
        """A task caused by the tabular's NEXT event (the one the caller triggers now)."""
        return Task.schedule(
            queue=queue,
            warehouse_id=tabular.warehouse_id,
            entity_kind=kind,
            entity_id=tabular.id,
            entity_version=tabular.version + 1,
            due_at_ms=due_at_ms,
            max_attempts=self.task_max_attempts,
            payload=payload,
            actor=ctx.actor,
            request_id=ctx.request_id,
        )

    def _purge_task(self, ctx: RequestContext, table: Table) -> Task:
        # The payload pins what to purge: the table's last metadata and location.
        return self._schedule(
            ctx,
            PURGE_QUEUE,
            table,
            "table",
            due_at_ms=now_ms(),
            payload={"metadata-location": table.metadata_location, "location": table.location},
        )

    def notify_scheduled(self, due_at_ms: int | None) -> None:
        if due_at_ms is not None:
            self.on_task_scheduled(due_at_ms)

    # -- final removal of soft-deleted tabulars ---------------------------------------------
    def expire_now(
        self, ctx: RequestContext, warehouse_id: UUID, tabular_id: UUID, *, purge: bool
    ) -> None:
        """A recursive namespace drop removes soft-deleted tabulars for good, now (and
        purges them when asked to, or when their own drop asked to)."""

        def attempt() -> int | None:
            try:
                tabular = self._deleted_tabular(warehouse_id, tabular_id)
            except NotFoundError:
                return None  # expired or undropped meanwhile: nothing left to do here
            task = self.task(tabular.pending_expiration)
            return self.expire(ctx, tabular, task, reason="dropped", purge=purge)

        self.notify_scheduled(self.app.retrying(attempt))

    def expire(
        self,
        ctx: RequestContext,
        tabular: Table | View,
        expiration: Task | None,
        *,
        reason: str,
        purge: bool,
    ) -> int | None:
        kind = "table" if isinstance(tabular, Table) else "view"
        purge_task = None
        if isinstance(tabular, Table) and (purge or getattr(tabular, "purge_requested", False)):
            purge_task = self._purge_task(ctx, tabular)
        tabular.expire(
            reason=reason,
            purge_task_id=purge_task.id if purge_task else None,
            actor=ctx.actor,
            request_id=ctx.request_id,
        )
        if expiration is not None and reason != "expired":
            expiration.cancel(reason=f"{kind} {reason}", actor=ctx.actor, request_id=ctx.request_id)
        self.app.save_all(tabular, expiration, purge_task)
        return purge_task.due_at_ms if purge_task is not None else None

    # -- undrop ----------------------------------------------------------------------------
    def _deleted_tabular(self, warehouse_id: UUID, tabular_id: UUID) -> Table | View:
        found: Table | View | None = self.app.get_or_none(tabular_id, Table)
        if found is None:
            found = self.app.get_or_none(tabular_id, View)
        if found is None or found.warehouse_id != warehouse_id or not found.is_soft_deleted:
            raise NotFoundError(f"No soft-deleted table or view with id {tabular_id}")
        return found

    def task(self, task_id_: UUID | None) -> Task | None:
        return self.app.get_or_none(task_id_, Task) if task_id_ is not None else None

    def undrop_tabulars(
        self, ctx: RequestContext, warehouse_id: UUID, targets: list[UndropTarget]
    ) -> None:
        """Restore soft-deleted tabulars, all or none, in one append."""
        if not targets:
            raise BadRequestError("targets must name at least one table or view")

        def attempt() -> None:
            warehouse = get_warehouse(self.app, warehouse_id)
            file_io = self.app.file_io(warehouse.storage_profile)
            loaded: dict[UUID, Aggregate] = {}  # one object per aggregate in this append
            # Each namespace read once, for its 404; the append checks that it still
            # exists (ADR 0018).
            namespaces: dict[NamespaceName, UUID] = {}
            taken: set[TabularName] = set()
            for target in targets:
                tabular = self._deleted_tabular(warehouse_id, target.tabular_id)
                kind = "table" if isinstance(tabular, Table) else "view"
                if kind != target.kind:
                    raise NotFoundError(
                        f"No soft-deleted {target.kind} with id {target.tabular_id}"
                    )
                ns_name = NamespaceName(tuple(tabular.namespace))
                dest = TabularName(ns_name, target.new_name or tabular.name)
                name_claim = self._undrop_claim(warehouse_id, dest, tabular, kind, ctx, taken)
                if not file_io.exists(tabular.metadata_location):
                    raise ConflictError(
                        f"Cannot undrop {kind} {dest.dotted}: its metadata file "
                        f"{tabular.metadata_location} is gone (were its files deleted by a "
                        "client, e.g. Spark's DROP TABLE ... PURGE?)"
                    )
                if ns_name not in namespaces:
                    namespaces[ns_name] = get_namespace(self.app, warehouse_id, ns_name).id
                expiration = self.task(tabular.pending_expiration)
                tabular.undrop(
                    namespace_id=namespaces[ns_name],
                    namespace=ns_name.as_list(),
                    name=dest.name,
                    actor=ctx.actor,
                    request_id=ctx.request_id,
                )
                if expiration is not None:
                    expiration.cancel(
                        reason=f"{kind} undropped", actor=ctx.actor, request_id=ctx.request_id
                    )
                    loaded[expiration.id] = expiration
                loaded[tabular.id] = tabular
                loaded[name_claim.id] = name_claim
            self.app.save_all(*loaded.values())

        self.app.retrying(attempt)

    def _undrop_claim(
        self,
        warehouse_id: UUID,
        dest: TabularName,
        tabular: Table | View,
        kind: str,
        ctx: RequestContext,
        taken: set[TabularName],
    ) -> NameClaim:
        existing = self.core.read_claim(warehouse_id, dest)
        if dest in taken or (existing is not None and existing.is_held):
            holder = existing.kind if existing is not None and existing.kind else kind
            raise AlreadyExistsError(
                f"Cannot undrop {kind} {tabular.id}: a {holder} named {dest.dotted} exists; "
                'undrop it under another name with "new-name"'
            )
        taken.add(dest)
        return claim_name(existing, warehouse_id, dest, kind, tabular.id, ctx)

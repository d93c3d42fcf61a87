"""Drop, soft delete, undrop and expiry of tables and views.

A warehouse's delete profile decides what a drop does. `hard`: the tabular is gone at
once (a requested purge is scheduled as a task, out of the request). `soft`: the
tabular is set aside with its metadata and files, its name freed, and an expiration
task is scheduled in the same append; undrop brings it back until the task runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from icelog.commands.base import now_ms
from icelog.commands.protection import ProtectionCommands
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


class LifecycleCommands(ProtectionCommands):
    # Set by the composition root from settings.
    task_max_attempts: int = 5
    # Called with a task's due time when one is scheduled, so local workers wake up.
    on_task_scheduled: Callable[[int], None] = staticmethod(lambda _due: None)

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
            warehouse = self.get_warehouse(warehouse_id)
            table = self.get_table(warehouse_id, name)
            ensure_unprotected(table.is_protected, f"Table {name.dotted}")
            return self._drop(ctx, warehouse, table, "table", name, purge=purge, final=final)

        self._scheduled(self.retrying(attempt))

    def unregister_table(
        self, ctx: RequestContext, warehouse_id: UUID, name: TabularName, *, expected_location: str
    ) -> str:
        """unregisterTable: the table leaves the catalog at once, whatever the warehouse's
        delete profile, and no file is touched — if its metadata is still at
        `expected_location` (what the caller will hand back), else `CommitFailedError`.
        Returns that location."""

        def attempt() -> str:
            table = self.get_table(warehouse_id, name)
            ensure_unprotected(table.is_protected, f"Table {name.dotted}")
            if table.metadata_location != expected_location:
                raise CommitFailedError(f"Table {name.dotted} changed while unregistering")
            name_claim = self._claim(warehouse_id, name)
            if name_claim is not None:
                name_claim.release(actor=ctx.actor, request_id=ctx.request_id)
            location = str(table.metadata_location)
            table.unregister(actor=ctx.actor, request_id=ctx.request_id)
            self.save_all(table, name_claim)
            return location

        found: str = self.retrying(attempt)
        return found

    def drop_view(
        self, ctx: RequestContext, warehouse_id: UUID, name: TabularName, *, final: bool = False
    ) -> None:
        def attempt() -> int | None:
            warehouse = self.get_warehouse(warehouse_id)
            view = self.get_view(warehouse_id, name)
            ensure_unprotected(view.is_protected, f"View {name.dotted}")
            return self._drop(ctx, warehouse, view, "view", name, purge=False, final=final)

        self._scheduled(self.retrying(attempt))

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
        name_claim = self._claim(warehouse.id, name)
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
        self.save_all(tabular, name_claim, task)
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

    def _scheduled(self, due_at_ms: int | None) -> None:
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
            task = self._get_task(tabular.pending_expiration)
            return self._expire(ctx, tabular, task, reason="dropped", purge=purge)

        self._scheduled(self.retrying(attempt))

    def _expire(
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
        self.save_all(tabular, expiration, purge_task)
        return purge_task.due_at_ms if purge_task is not None else None

    # -- undrop ----------------------------------------------------------------------------
    def _deleted_tabular(self, warehouse_id: UUID, tabular_id: UUID) -> Table | View:
        found: Table | View | None = self.get_or_none(tabular_id, Table)
        if found is None:
            found = self.get_or_none(tabular_id, View)
        if found is None or found.warehouse_id != warehouse_id or not found.is_soft_deleted:
            raise NotFoundError(f"No soft-deleted table or view with id {tabular_id}")
        return found

    def _get_task(self, task_id_: UUID | None) -> Task | None:
        return self.get_or_none(task_id_, Task) if task_id_ is not None else None

    def undrop_tabulars(
        self, ctx: RequestContext, warehouse_id: UUID, targets: list[UndropTarget]
    ) -> None:
        """Restore soft-deleted tabulars, all or none, in one append."""
        if not targets:
            raise BadRequestError("targets must name at least one table or view")

        def attempt() -> None:
            warehouse = self.get_warehouse(warehouse_id)
            file_io = self.file_io(warehouse.storage_profile)
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
                    namespaces[ns_name] = self.get_namespace(warehouse_id, ns_name).id
                expiration = self._get_task(tabular.pending_expiration)
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
            self.save_all(*loaded.values())

        self.retrying(attempt)

    def _undrop_claim(
        self,
        warehouse_id: UUID,
        dest: TabularName,
        tabular: Table | View,
        kind: str,
        ctx: RequestContext,
        taken: set[TabularName],
    ) -> NameClaim:
        existing = self._claim(warehouse_id, dest)
        if dest in taken or (existing is not None and existing.is_held):
            holder = existing.kind if existing is not None and existing.kind else kind
            raise AlreadyExistsError(
                f"Cannot undrop {kind} {tabular.id}: a {holder} named {dest.dotted} exists; "
                'undrop it under another name with "new-name"'
            )
        taken.add(dest)
        if kind == "table":
            return self._table_claim(existing, warehouse_id, dest, tabular.id, ctx)
        return self._view_claim(existing, warehouse_id, dest, tabular.id, ctx)

"""Running one task: expiration of a soft-dropped tabular, or purge of a table's files.

A worker that holds a task's lease starts an attempt (an event; the Task's version
check makes the start exclusive), does the work, and records the outcome (another
event, in the same append as the work's own events). Work is written to be safely
repeatable: an attempt that dies half-way is simply run again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

from icelog.commands.application import CatalogApplication, now_ms
from icelog.commands.group_commit import ConcurrentChange
from icelog.commands.lifecycle import LifecycleCommands
from icelog.commands.ports import ReadPorts
from icelog.commands.storage.purge import PurgePlan, reachable_files
from icelog.domain.context import RequestContext
from icelog.domain.errors import BadRequestError, NotFoundError
from icelog.domain.locations import Location
from icelog.domain.ports import FileIO, OutsideStorageError
from icelog.domain.table import Table
from icelog.domain.task import EXPIRATION_QUEUE, PURGE_QUEUE, RUNNING, Task, TaskStateError
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse

# Called now and then during long work; returns False when the lease was lost.
Heartbeat = Callable[[], bool]


class LeaseLost(Exception):
    """Another worker has taken the task over: stop without recording anything."""


class _Beat:
    """Renews the lease at most once a second; raises LeaseLost once it is gone."""

    def __init__(self, heartbeat: Heartbeat) -> None:
        self._heartbeat = heartbeat
        self._last = time.monotonic()

    def __call__(self) -> None:
        if time.monotonic() - self._last < 1.0:
            return
        if not self._heartbeat():
            raise LeaseLost
        self._last = time.monotonic()


class TaskCommands:
    """Running the tasks drops schedule: expiration and purge."""

    def __init__(
        self,
        app: CatalogApplication,
        lifecycle: LifecycleCommands,
        ports: ReadPorts,
        *,
        task_backoff_ms: int,
        purge_delete_rate: float,
    ) -> None:
        """Settings: `task_backoff_ms` before a failed task's next attempt;
        `purge_delete_rate` files per second (0: as fast as storage allows)."""
        self.app = app
        self.lifecycle = lifecycle
        self.ports = ports
        self.task_backoff_ms = task_backoff_ms
        self.purge_delete_rate = purge_delete_rate

    @staticmethod
    def _ctx(task: Task) -> RequestContext:
        return RequestContext(actor="system:task-worker", request_id=f"task:{task.id}")

    # -- attempts --------------------------------------------------------------------------
    def start_task(self, task_id: UUID, worker: str) -> Task | None:
        """Record that `worker` starts the task's next attempt; None when the task is not
        (or no longer) open, or another worker started it first."""
        task = self.app.get_or_none(task_id, Task)
        if task is None or not task.is_open:
            return None
        ctx = self._ctx(task)
        try:
            task.start_attempt(
                worker=worker, now_ms=now_ms(), actor=ctx.actor, request_id=ctx.request_id
            )
            self.app.save_all(task)
        except (TaskStateError, ConcurrentChange):
            return None
        return task

    def run_task(self, task_id: UUID, worker: str, heartbeat: Heartbeat) -> str | None:
        """Run a started attempt to its outcome; returns the outcome's status."""
        task = self.app.get_or_none(task_id, Task)
        if task is None or task.status != RUNNING or task.worker != worker:
            return None
        try:
            if task.queue == EXPIRATION_QUEUE:
                self._run_expiration(task_id, worker)
            elif task.queue == PURGE_QUEUE:
                self._run_purge(task_id, worker, heartbeat)
            else:  # pragma: no cover - Task.schedule refuses unknown queues
                raise ValueError(f"unknown queue {task.queue}")
        except LeaseLost:
            return None
        except Exception as exc:
            return self._record_failure(task_id, worker, exc)
        return "succeeded"

    def _current(self, task_id: UUID, worker: str) -> Task:
        """The task, reloaded: still running on this worker, or LeaseLost."""
        task = self.app.get_or_none(task_id, Task)
        if task is None or task.status != RUNNING or task.worker != worker:
            raise LeaseLost
        return task

    def _record_failure(self, task_id: UUID, worker: str, exc: Exception) -> str | None:
        # Messages come from our own code and storage adapters, which never put
        # credentials into exceptions.
        error = f"{type(exc).__name__}: {exc}"

        def attempt() -> str:
            task = self._current(task_id, worker)
            ctx = self._ctx(task)
            task.fail(
                worker=worker,
                error=error,
                now_ms=now_ms(),
                backoff_ms=self.task_backoff_ms,
                actor=ctx.actor,
                request_id=ctx.request_id,
            )
            self.app.save_all(task)
            return task.status

        try:
            return self.app.retrying(attempt)
        except LeaseLost:
            return None

    # -- expiration ------------------------------------------------------------------------
    def _run_expiration(self, task_id: UUID, worker: str) -> None:
        def attempt() -> int | None:
            task = self._current(task_id, worker)
            ctx = self._ctx(task)
            cls: type[Table] | type[View] = Table if task.entity_kind == "table" else View
            tabular = self.app.get_or_none(task.entity_id, cls)
            if (
                tabular is None
                or not tabular.is_soft_deleted
                or tabular.pending_expiration != task.id
            ):
                # Undropped (which cancels this task) or removed otherwise meanwhile.
                task.succeed(
                    worker=worker,
                    result={"expired": False},
                    actor=ctx.actor,
                    request_id=ctx.request_id,
                )
                self.app.save_all(task)
                return None
            task.succeed(
                worker=worker,
                result={"expired": True},
                actor=ctx.actor,
                request_id=ctx.request_id,
            )
            return self.lifecycle.expire(ctx, tabular, task, reason="expired", purge=False)

        self.lifecycle.notify_scheduled(self.app.retrying(attempt))

    # -- purge -----------------------------------------------------------------------------
    def _run_purge(self, task_id: UUID, worker: str, heartbeat: Heartbeat) -> None:
        task = self._current(task_id, worker)
        warehouse = self.app.get_or_none(task.warehouse_id, Warehouse)
        if warehouse is None or warehouse.deleted:
            raise NotFoundError(f"Warehouse {task.warehouse_id} no longer exists")
        file_io = self.app.file_io(warehouse.storage_profile)
        location = str(task.payload["metadata-location"])
        try:
            metadata: dict[str, Any] = self.app.load_metadata(location, file_io)
        except NotFoundError:
            # Deleted last by an earlier attempt (or by the client): nothing left to find.
            metadata = {"metadata-log": []}
        except OutsideStorageError:
            metadata = {"metadata-log": []}  # a legacy location: skipped below, with why
        beat = _Beat(heartbeat)
        written = self._written_metadata(task.entity_id)
        # Where the table was when it was dropped: its last metadata's location, which a
        # commit checked (inside the warehouse, overlapping no other table); the payload's
        # copy of the aggregate's location when the metadata is gone.
        scope = _table_location(metadata.get("location")) or _table_location(
            task.payload.get("location")
        )
        if scope is not None and scope == file_io.root:
            scope = None  # a legacy location: the warehouse itself is never purged
        others = self._other_locations(task.warehouse_id, scope)
        plan = reachable_files(
            metadata,
            location,
            file_io,
            beat,
            also_metadata=written,
            table_location=scope,
            other_locations=others,
        )
        deleted, missing = self._delete(plan, file_io, beat)

        def record() -> None:
            current = self._current(task_id, worker)
            ctx = self._ctx(current)
            table = self.app.get_or_none(current.entity_id, Table)
            if table is not None and not table.purged:
                table.mark_purged(
                    deleted_files=deleted,
                    missing_files=missing,
                    actor=ctx.actor,
                    request_id=ctx.request_id,
                )
            current.succeed(
                worker=worker,
                result={
                    "deleted-files": deleted,
                    "missing-files": missing,
                    **plan.skipped_summary(),
                },
                actor=ctx.actor,
                request_id=ctx.request_id,
            )
            self.app.save_all(table, current)

        self.app.retrying(record)

    def _other_locations(self, warehouse_id: UUID, scope: Location | None) -> list[Location]:
        """Tables and views whose locations overlap the purged one's: their files stay."""
        if scope is None:
            return []
        found = []
        for text in self.ports.locations_overlapping(str(warehouse_id), str(scope)):
            other = _table_location(text)
            if other is not None:
                found.append(other)
        return found

    def _written_metadata(self, table_id: UUID) -> list[str]:
        """Every metadata file this catalog wrote for the table, from its events."""
        return [
            event.metadata_location
            for event in self.app.events.get(table_id)
            if isinstance(event, (Table.Created, Table.Committed))
        ]

    def _delete(self, plan: PurgePlan, file_io: FileIO, beat: _Beat) -> tuple[int, int]:
        """Delete in the order given (leaves first, metadata last), at most
        `purge_delete_rate` files per second, keeping the lease alive. A file the storage
        refuses to delete is skipped with the reason."""
        deleted = missing = 0
        started = time.monotonic()
        for n, path in enumerate(plan.paths):
            if self.purge_delete_rate > 0:
                due = started + n / self.purge_delete_rate
                # In slices, renewing the lease between them: one wait longer than the
                # lease (a rate below one file per lease) let another worker take the task
                # over at every attempt, so a slow purge never finished.
                while (wait := due - time.monotonic()) > 0:
                    time.sleep(min(wait, 1.0))
                    beat()
            beat()
            try:
                gone = file_io.delete(path)
            except OutsideStorageError as exc:
                plan.skip(path, exc.message)
                continue
            if gone:
                deleted += 1
            else:
                missing += 1
        return deleted, missing


def _table_location(text: Any) -> Location | None:
    """The purged table's location from the task's payload; None (nothing is deleted)
    when it does not parse — a location stored before the strict rules."""
    try:
        return Location.parse(text, "table location", encoded_separators=True)
    except BadRequestError:
        return None

"""Background tasks (expiration of soft-dropped tabulars, purge of their files).

A task is an aggregate, so its whole life is in the log: when it was scheduled and
why, every attempt (who ran it, how it ended), and its final outcome. The queue that
workers poll is a projection of these events; claiming a task is appending the next
attempt, which the event store's version check makes exclusive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from icelog.domain.attributed import AttributedEvent, fixed
from icelog.domain.errors import ConflictError
from icelog.domain.identifiers import ICELOG_NAMESPACE

EXPIRATION_QUEUE = "tabular-expiration"
PURGE_QUEUE = "tabular-purge"
QUEUES = (EXPIRATION_QUEUE, PURGE_QUEUE)

PENDING = "pending"
RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
OPEN_STATES = (PENDING, RUNNING)


def task_id(queue: str, entity_id: UUID, entity_version: int) -> UUID:
    """A task's id, derived from what caused it (the entity's event at `entity_version`),
    so a retried command schedules the same task instead of a second one."""
    return uuid5(ICELOG_NAMESPACE, f"task:{queue}:{entity_id}:{entity_version}")


class TaskStateError(ConflictError):
    error_type = "TaskStateException"


class Task(Aggregate):
    TOPIC = "icelog.task"

    class Event(AttributedEvent):
        TOPIC = "icelog.task.event.v1"

    class Scheduled(Event, Aggregate.Created):
        """A task was scheduled, in the same append as its cause: queue `tabular-expiration` by a
        soft drop (due when the drop expires), queue `tabular-purge` by a drop with purge (due at
        once).

        Data fields:
            queue: `tabular-expiration` or `tabular-purge`.
            warehouse-id: The warehouse of the table or view.
            entity-kind: `table` or `view`.
            entity-id: The table or view it works on.
            due-at-ms: When it is due (epoch ms).
            max-attempts: How many attempts it gets (ICELOG_TASK_MAX_ATTEMPTS).
            payload: What the work needs that the entity may no longer say; for a purge the table's
                last `metadata-location` and `location`. Never secrets.
        """

        TOPIC = "icelog.task.scheduled.v1"
        queue: str
        warehouse_id: UUID
        entity_kind: str
        entity_id: UUID
        due_at_ms: int
        max_attempts: int
        payload: dict[str, Any]

        COPIES = (
            "queue",
            "warehouse_id",
            "entity_kind",
            "entity_id",
            "due_at_ms",
            "max_attempts",
            "payload",
        )
        SETS = fixed(status=PENDING, attempt=0, worker=None)

    class AttemptStarted(Event):
        """A worker took the task for attempt number `attempt`. Only one worker can: the start is an
        append the event store lets only one worker make.
        """

        TOPIC = "icelog.task.attempt-started.v1"
        attempt: int
        worker: str

        COPIES = ("attempt", "worker")
        SETS = fixed(status=RUNNING)

    class AttemptAbandoned(Event):
        """The attempt's worker stopped without an outcome (killed, or it lost its database) and its
        lease ran out; appended by the worker that takes the task over, just before its own
        `attempt-started`.

        Data fields:
            attempt: The abandoned attempt's number.
            worker: The worker that went away.
        """

        TOPIC = "icelog.task.attempt-abandoned.v1"
        attempt: int
        worker: str

        SETS = fixed(status=PENDING, worker=None)

    class AttemptFailed(Event):
        """The attempt failed with `error`. It is retried at `retry-at-ms` (back-off
        ICELOG_TASK_RETRY_BACKOFF_SECONDS, doubled per attempt) or, when `final`
        (ICELOG_TASK_MAX_ATTEMPTS used up), the task has failed for good.

        Data fields:
            error: `<exception type>: <message>` (at most 2,000 characters).
            retry-at-ms: When it is due again (epoch ms); unchanged when `final`.
            final: True when no attempt is left: the task has failed for good.
        """

        TOPIC = "icelog.task.attempt-failed.v1"
        attempt: int
        worker: str
        error: str
        retry_at_ms: int
        final: bool

        def apply(self, aggregate: Any) -> None:
            aggregate.status = FAILED if self.final else PENDING
            aggregate.due_at_ms = self.retry_at_ms
            aggregate.worker = None

    class Succeeded(Event):
        """The attempt finished the work. Appended together with what the work changed
        (`table.expired`/`view.expired`, `table.purged`).

        Data fields:
            result: Expiration: `{"expired": true}` (`false` when the tabular was undropped
                meanwhile); purge: `{"deleted-files": N, "missing-files": N}`.
        """

        TOPIC = "icelog.task.succeeded.v1"
        attempt: int
        worker: str
        result: dict[str, Any]

        SETS = fixed(status=SUCCEEDED, worker=None)

    class Cancelled(Event):
        """The task is no longer needed: its table or view was undropped, or a recursive namespace
        drop removed it first (`reason`).

        Data fields:
            reason: `table undropped`, `view undropped`, `table dropped`, `view dropped`.
        """

        TOPIC = "icelog.task.cancelled.v1"
        reason: str

        SETS = fixed(status=CANCELLED, worker=None)

    if TYPE_CHECKING:
        queue: str
        warehouse_id: UUID
        entity_kind: str
        entity_id: UUID
        due_at_ms: int
        max_attempts: int
        payload: dict[str, Any]
        status: str
        attempt: int
        worker: str | None

    @classmethod
    def schedule(
        cls,
        *,
        queue: str,
        warehouse_id: UUID,
        entity_kind: str,
        entity_id: UUID,
        entity_version: int,
        due_at_ms: int,
        max_attempts: int,
        payload: dict[str, Any],
        actor: str,
        request_id: str,
    ) -> Task:
        if queue not in QUEUES:
            raise ValueError(f"unknown task queue {queue!r}")
        return cls._create(
            cls.Scheduled,
            id=task_id(queue, entity_id, entity_version),
            queue=queue,
            warehouse_id=warehouse_id,
            entity_kind=entity_kind,
            entity_id=entity_id,
            due_at_ms=due_at_ms,
            max_attempts=max(1, max_attempts),
            payload=payload,
            actor=actor,
            request_id=request_id,
        )

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_STATES

    def start_attempt(self, *, worker: str, now_ms: int, actor: str, request_id: str) -> None:
        """Take the task. A running attempt is taken over only by the caller that found its
        lease expired (the claim); it is recorded as abandoned first."""
        if not self.is_open:
            raise TaskStateError(f"Task {self.id} is {self.status}")
        if self.status == PENDING and self.due_at_ms > now_ms:
            raise TaskStateError(f"Task {self.id} is not due yet")
        if self.status == RUNNING:
            self.trigger_event(
                self.AttemptAbandoned,
                attempt=self.attempt,
                worker=self.worker or "",
                actor=actor,
                request_id=request_id,
            )
        self.trigger_event(
            self.AttemptStarted,
            attempt=self.attempt + 1,
            worker=worker,
            actor=actor,
            request_id=request_id,
        )

    def _ensure_running(self, worker: str) -> None:
        if self.status != RUNNING or self.worker != worker:
            raise TaskStateError(f"Task {self.id} is not running on worker {worker}")

    def succeed(self, *, worker: str, result: dict[str, Any], actor: str, request_id: str) -> None:
        self._ensure_running(worker)
        self.trigger_event(
            self.Succeeded,
            attempt=self.attempt,
            worker=worker,
            result=result,
            actor=actor,
            request_id=request_id,
        )

    def fail(
        self,
        *,
        worker: str,
        error: str,
        now_ms: int,
        backoff_ms: int,
        actor: str,
        request_id: str,
    ) -> None:
        """Record a failed attempt: retried after `backoff_ms` doubled per attempt made,
        or final once `max_attempts` are used."""
        self._ensure_running(worker)
        final = self.attempt >= self.max_attempts
        delay = backoff_ms * (2 ** (self.attempt - 1))
        self.trigger_event(
            self.AttemptFailed,
            attempt=self.attempt,
            worker=worker,
            error=error[:2000],
            retry_at_ms=self.due_at_ms if final else now_ms + delay,
            final=final,
            actor=actor,
            request_id=request_id,
        )

    def cancel(self, *, reason: str, actor: str, request_id: str) -> None:
        if self.is_open:
            self.trigger_event(self.Cancelled, reason=reason, actor=actor, request_id=request_id)

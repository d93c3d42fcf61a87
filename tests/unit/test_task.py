"""The Task aggregate's rules (pure domain logic)."""

from __future__ import annotations

from uuid import uuid4

import pytest

from icelog.domain.task import (
    CANCELLED,
    FAILED,
    PENDING,
    PURGE_QUEUE,
    RUNNING,
    SUCCEEDED,
    Task,
    TaskStateError,
    task_id,
)

WHO = {"actor": "t", "request_id": "r"}


def new_task(due: int = 1_000, max_attempts: int = 3) -> Task:
    return Task.schedule(
        queue=PURGE_QUEUE,
        warehouse_id=uuid4(),
        entity_kind="table",
        entity_id=uuid4(),
        entity_version=4,
        due_at_ms=due,
        max_attempts=max_attempts,
        payload={"metadata-location": "file:///m.json"},
        **WHO,
    )


def test_ids_derive_from_the_cause() -> None:
    entity = uuid4()
    assert task_id(PURGE_QUEUE, entity, 3) == task_id(PURGE_QUEUE, entity, 3)
    assert task_id(PURGE_QUEUE, entity, 3) != task_id(PURGE_QUEUE, entity, 4)
    with pytest.raises(ValueError, match="unknown task queue"):
        Task.schedule(
            queue="nope",
            warehouse_id=uuid4(),
            entity_kind="table",
            entity_id=entity,
            entity_version=1,
            due_at_ms=0,
            max_attempts=1,
            payload={},
            **WHO,
        )


def test_not_started_before_due_and_only_by_the_running_worker_finished() -> None:
    task = new_task(due=1_000)
    with pytest.raises(TaskStateError, match="not due"):
        task.start_attempt(worker="a", now_ms=999, **WHO)
    task.start_attempt(worker="a", now_ms=1_000, **WHO)
    assert (task.status, task.attempt, task.worker) == (RUNNING, 1, "a")
    with pytest.raises(TaskStateError):
        task.succeed(worker="b", result={}, **WHO)
    task.succeed(worker="a", result={"deleted-files": 3}, **WHO)
    assert task.status == SUCCEEDED
    with pytest.raises(TaskStateError):
        task.start_attempt(worker="a", now_ms=2_000, **WHO)


def test_failures_back_off_exponentially_then_give_up() -> None:
    task = new_task(due=0, max_attempts=3)
    retry_delays = []
    for attempt in (1, 2):
        task.start_attempt(worker="w", now_ms=task.due_at_ms, **WHO)
        started = task.due_at_ms
        task.fail(worker="w", error="boom", now_ms=started, backoff_ms=100, **WHO)
        assert task.status == PENDING and task.attempt == attempt
        retry_delays.append(task.due_at_ms - started)
    assert retry_delays == [100, 200]
    task.start_attempt(worker="w", now_ms=task.due_at_ms, **WHO)
    task.fail(worker="w", error="x" * 5000, now_ms=task.due_at_ms, backoff_ms=100, **WHO)
    assert task.status == FAILED
    failed = [e for e in task.collect_events() if isinstance(e, Task.AttemptFailed)]
    assert [e.final for e in failed] == [False, False, True]
    assert len(failed[-1].error) == 2000, "errors are bounded"


def test_takeover_records_the_abandoned_attempt() -> None:
    task = new_task(due=0)
    task.start_attempt(worker="dead", now_ms=0, **WHO)
    task.start_attempt(worker="alive", now_ms=10, **WHO)
    kinds = [type(e).__name__ for e in task.collect_events()]
    assert kinds == ["Scheduled", "AttemptStarted", "AttemptAbandoned", "AttemptStarted"]
    assert (task.attempt, task.worker) == (2, "alive")


def test_cancel_only_open_tasks() -> None:
    task = new_task()
    task.cancel(reason="table undropped", **WHO)
    assert task.status == CANCELLED
    task.cancel(reason="again", **WHO)
    assert sum(isinstance(e, Task.Cancelled) for e in task.collect_events()) == 1

"""Read queries of the task queue (expirations and purges)."""

from __future__ import annotations

from typing import Any

import orjson

from icelog.projections.query_base import QueryBase


class TaskQueries(QueryBase):
    """Tasks of a warehouse."""

    # -- tasks -----------------------------------------------------------------------------
    _TASK = (
        "SELECT id, queue, warehouse_id, entity_kind, entity_id, status, attempt, "
        "max_attempts, due_at_ms, worker, last_error, payload, created_at, updated_at, result "
        "FROM icelog_tasks"
    )

    @staticmethod
    def _task(r: tuple[Any, ...]) -> dict[str, Any]:
        return {
            "task-id": r[0],
            "queue-name": r[1],
            "warehouse-id": r[2],
            "entity-kind": r[3],
            "entity-id": r[4],
            "status": r[5],
            "attempt": r[6],
            "max-attempts": r[7],
            "due-at-ms": r[8],
            "worker": r[9],
            "last-error": r[10],
            "payload": orjson.loads(r[11]),
            "created-at": r[12],
            "updated-at": r[13],
            # What a succeeded attempt reported (a purge: files deleted, missing, skipped).
            "result": orjson.loads(r[14]) if r[14] is not None else None,
        }

    def tasks(
        self, warehouse_id: str, *, entity_id: str | None = None, status: str | None = None
    ) -> list[dict[str, Any]]:
        sql = self._TASK + " WHERE warehouse_id = ?"
        params: tuple[Any, ...] = (warehouse_id,)
        if entity_id is not None:
            sql += " AND entity_id = ?"
            params = (*params, entity_id)
        if status is not None:
            sql += " AND status = ?"
            params = (*params, status)
        return [self._task(r) for r in self.rows(sql + " ORDER BY created_at, id", params)]

    def task(self, task_id: str) -> dict[str, Any] | None:
        r = self.row(self._TASK + " WHERE id = ?", (task_id,))
        return self._task(r) if r else None

    def open_task_count(self, warehouse_id: str) -> int:
        r = self.row(
            "SELECT count(*) FROM icelog_tasks WHERE warehouse_id = ? "
            "AND status IN ('pending', 'running')",
            (warehouse_id,),
        )
        return int(r[0]) if r else 0

"""Leases: which worker may run which due task, until when.

Several worker processes poll one task table. A claim is ONE statement that picks due
tasks nobody holds and writes a lease for each: on PostgreSQL the candidates are
locked `FOR UPDATE SKIP LOCKED`, so concurrent claimers pass over each other's rows
instead of queueing; on SQLite a write statement holds the database's single write
lock from its first step, which serialises claims the same way. The conditional
upsert then refuses a lease that another claimer renewed meanwhile.

A lease is not the task's record: the worker next appends the attempt to the Task
aggregate, whose version check is the final guard against a double start.
"""

from __future__ import annotations

from icelog.projections.sql import SqlStore

_CLAIM = (
    "INSERT INTO icelog_task_leases (task_id, worker, lease_until_ms) "
    "SELECT t.id, ?, ? FROM icelog_tasks t "
    "LEFT JOIN icelog_task_leases l ON l.task_id = t.id "
    "WHERE t.status IN ('pending', 'running') AND t.due_at_ms <= ? "
    "AND (l.lease_until_ms IS NULL OR l.lease_until_ms < ?) "
    "ORDER BY t.due_at_ms, t.id LIMIT ?{lock} "
    "ON CONFLICT (task_id) DO UPDATE SET worker = excluded.worker, "
    "lease_until_ms = excluded.lease_until_ms "
    "WHERE icelog_task_leases.lease_until_ms < ? "
    "RETURNING task_id"
)


class TaskLeases(SqlStore):
    def claim(self, worker: str, *, now_ms: int, lease_ms: int, limit: int) -> list[str]:
        """Lease up to `limit` due tasks that no live lease holds; returns their ids."""
        lock = " FOR UPDATE OF t SKIP LOCKED" if self.dialect == "postgres" else ""
        until = now_ms + lease_ms
        rows = self._run(_CLAIM.format(lock=lock), (worker, until, now_ms, now_ms, limit, now_ms))
        return [str(r[0]) for r in rows]

    def renew(self, task_id: str, worker: str, *, until_ms: int) -> bool:
        """Extend a lease this worker still holds; False when it was lost."""
        rows = self._run(
            "UPDATE icelog_task_leases SET lease_until_ms = ? "
            "WHERE task_id = ? AND worker = ? RETURNING task_id",
            (until_ms, task_id, worker),
        )
        return bool(rows)

    def release(self, task_id: str, worker: str) -> None:
        self._run(
            "DELETE FROM icelog_task_leases WHERE task_id = ? AND worker = ?",
            (task_id, worker),
            fetch=False,
        )

    def next_due_ms(self) -> int | None:
        """When the earliest open task falls due (to sleep no longer than needed)."""
        rows = self._run(
            "SELECT min(due_at_ms) FROM icelog_tasks WHERE status IN ('pending', 'running')", ()
        )
        value = rows[0][0] if rows else None
        return int(value) if value is not None else None

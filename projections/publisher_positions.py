"""Each sink's durable position in the log, and the lease that makes one relay publish.

Several relay processes may run for one sink (for availability); the one holding the
sink's lease publishes, the others wait. Advancing the position is fenced by the lease:
a relay that lost its lease (it stalled past the lease time and another took over)
cannot move the position, and stops.
"""

from __future__ import annotations

from icelog.projections.sql import SqlStore

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS icelog_publisher_positions ("
    "sink TEXT PRIMARY KEY, position BIGINT NOT NULL, owner TEXT NOT NULL, "
    "lease_until_ms BIGINT NOT NULL, updated_at_ms BIGINT NOT NULL)"
)


class PositionStore(SqlStore):
    def ensure_schema(self) -> None:
        self._run(SCHEMA, (), fetch=False)

    def acquire(self, sink: str, owner: str, *, now_ms: int, lease_ms: int) -> int | None:
        """Take or renew the sink's lease; the position to continue from, or None while
        another relay holds it."""
        rows = self._run(
            "INSERT INTO icelog_publisher_positions "
            "(sink, position, owner, lease_until_ms, updated_at_ms) VALUES (?, 0, ?, ?, ?) "
            "ON CONFLICT (sink) DO UPDATE SET owner = excluded.owner, "
            "lease_until_ms = excluded.lease_until_ms "
            "WHERE icelog_publisher_positions.owner = excluded.owner "
            "OR icelog_publisher_positions.lease_until_ms < ? "
            "RETURNING position",
            (sink, owner, now_ms + lease_ms, now_ms, now_ms),
        )
        return int(rows[0][0]) if rows else None

    def advance(self, sink: str, owner: str, position: int, *, now_ms: int, lease_ms: int) -> bool:
        """Record that everything up to `position` was acknowledged; False when this relay
        no longer holds the lease (then it must stop)."""
        rows = self._run(
            "UPDATE icelog_publisher_positions SET position = ?, lease_until_ms = ?, "
            "updated_at_ms = ? WHERE sink = ? AND owner = ? AND position <= ? RETURNING sink",
            (position, now_ms + lease_ms, now_ms, sink, owner, position),
        )
        return bool(rows)

    def release(self, sink: str, owner: str) -> None:
        self._run(
            "UPDATE icelog_publisher_positions SET lease_until_ms = 0 WHERE sink = ? AND owner = ?",
            (sink, owner),
            fetch=False,
        )

    def positions(self) -> dict[str, int]:
        rows = self._run("SELECT sink, position FROM icelog_publisher_positions", ())
        return {str(r[0]): int(r[1]) for r in rows}

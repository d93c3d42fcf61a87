"""Soft deletion of tables and views: drop, undrop, expire.

A soft drop keeps the tabular (its metadata, its files, its place in the namespace)
until it expires; its name is free meanwhile. Undrop restores it, under its old name
or a new one. Expiry makes the drop final. Each step is an event of the tabular, so
the log shows when and by whom a table was dropped, restored or let go.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from icelog.domain.errors import ConflictError


class NotSoftDeletedError(ConflictError):
    error_type = "NotSoftDeletedException"


def apply_soft_dropped(aggregate: Any, event: Any) -> None:
    aggregate.dropped = True
    aggregate.soft_deleted = True
    aggregate.deleted_at_ms = event.deleted_at_ms
    aggregate.expires_at_ms = event.expires_at_ms
    aggregate.purge_requested = bool(getattr(event, "purge_requested", False))
    aggregate.expiration_task_id = event.expiration_task_id


def apply_undropped(aggregate: Any, event: Any) -> None:
    aggregate.dropped = False
    aggregate.soft_deleted = False
    aggregate.namespace_id = event.namespace_id
    aggregate.namespace = list(event.namespace)
    aggregate.name = event.name
    aggregate.expiration_task_id = None


def apply_expired(aggregate: Any, event: Any) -> None:
    aggregate.soft_deleted = False
    aggregate.expiration_task_id = None


class SoftDeletable:
    """Mixin for Table and View; each defines its own SoftDropped / Undropped / Expired
    event classes (with their own topics)."""

    SoftDropped: Any
    Undropped: Any
    Expired: Any
    trigger_event: Any
    namespace: list[str]
    name: str

    @property
    def is_soft_deleted(self) -> bool:
        # Aggregates (and snapshots) from before soft deletion existed have no attribute.
        return bool(getattr(self, "soft_deleted", False))

    @property
    def pending_expiration(self) -> UUID | None:
        found = getattr(self, "expiration_task_id", None)
        return found if isinstance(found, UUID) else None

    def soft_drop(
        self,
        *,
        deleted_at_ms: int,
        expiration_seconds: int,
        expiration_task_id: UUID,
        actor: str,
        request_id: str,
        **extra: Any,
    ) -> None:
        self.trigger_event(
            self.SoftDropped,
            deleted_at_ms=deleted_at_ms,
            expiration_seconds=expiration_seconds,
            expires_at_ms=deleted_at_ms + expiration_seconds * 1000,
            expiration_task_id=expiration_task_id,
            actor=actor,
            request_id=request_id,
            **extra,
        )

    def undrop(
        self, *, namespace_id: UUID, namespace: list[str], name: str, actor: str, request_id: str
    ) -> None:
        if not self.is_soft_deleted:
            raise NotSoftDeletedError(f"{'.'.join([*self.namespace, self.name])} is not dropped")
        self.trigger_event(
            self.Undropped,
            from_namespace=list(self.namespace),
            from_name=self.name,
            namespace_id=namespace_id,
            namespace=namespace,
            name=name,
            actor=actor,
            request_id=request_id,
        )

    def expire(
        self, *, reason: str, purge_task_id: UUID | None, actor: str, request_id: str
    ) -> None:
        """Make a soft drop final: `reason` is "expired" (its delay passed) or "dropped"
        (a recursive drop of its namespace removed it early); `purge_task_id` names the
        purge that follows, if one was requested."""
        if not self.is_soft_deleted:
            raise NotSoftDeletedError(f"{'.'.join([*self.namespace, self.name])} is not dropped")
        self.trigger_event(
            self.Expired,
            reason=reason,
            purge_task_id=purge_task_id,
            actor=actor,
            request_id=request_id,
        )

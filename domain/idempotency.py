"""Idempotency keys: the first final outcome of a mutating request, kept for replay.

The aggregate id is derived from the key, so every replica finds the same record, and two
replicas recording one key collide on the event version instead of both winning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from domain.identifiers import ICELOG_NAMESPACE


def idempotency_id(key: str) -> UUID:
    return uuid5(ICELOG_NAMESPACE, f"idempotency:{key.lower()}")


class IdempotencyRecord(Aggregate):
    """What a request carrying an Idempotency-Key answered. Large table/view results are
    kept as their (immutable) metadata location, not the document, so the log stays small."""

    TOPIC = "icelog.idempotency-key"

    class Event(Aggregate.Event):
        TOPIC = "icelog.idempotency-key.event.v1"
        actor: str
        request_id: str

    class Recorded(Event, Aggregate.Created):
        """First outcome of `key`; `body` is the response without `metadata` when
        `metadata_location` is set (the document is re-read from there on replay)."""

        TOPIC = "icelog.idempotency-key.recorded.v1"
        key: str
        method: str
        path: str
        status: int
        body: str
        metadata_location: str | None
        recorded_at_ms: int

        def apply(self, aggregate: Any) -> None:
            _set(aggregate, self)

    class Rerecorded(Event):
        """The key was used again after its lifetime had passed."""

        TOPIC = "icelog.idempotency-key.rerecorded.v1"
        key: str
        method: str
        path: str
        status: int
        body: str
        metadata_location: str | None
        recorded_at_ms: int

        def apply(self, aggregate: Any) -> None:
            _set(aggregate, self)

    if TYPE_CHECKING:
        key: str
        method: str
        path: str
        status: int
        body: str
        metadata_location: str | None
        recorded_at_ms: int


def _set(aggregate: Any, event: IdempotencyRecord.Recorded | IdempotencyRecord.Rerecorded) -> None:
    for field in ("key", "method", "path", "status", "body", "metadata_location", "recorded_at_ms"):
        setattr(aggregate, field, getattr(event, field))

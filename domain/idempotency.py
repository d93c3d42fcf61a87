"""Idempotency keys: one outcome per key, on any replica and any worker (ADR 0012).

The aggregate id is derived from the key, so every replica finds the same record. A request
carrying a key first *claims* it (an append: two requests claiming at once collide on the
event version, so exactly one runs). The command it runs appends `landed` to the key in the
SAME append as its own events — so a key can never be landed twice, even by a request that
took over an abandoned claim while the first was still running — and the response is
recorded after. Losers wait for that outcome and answer with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from icelog.domain.attributed import copy_fields
from icelog.domain.identifiers import ICELOG_NAMESPACE


class IdempotentReplay(Exception):
    """Another request with the same Idempotency-Key has taken it over or already applied
    the change: the command stops before appending, and the request is answered with that
    request's outcome."""


def idempotency_id(key: str) -> UUID:
    return uuid5(ICELOG_NAMESPACE, f"idempotency:{key.lower()}")


class _KeyEvent(Aggregate.Event):
    actor: str
    request_id: str


class _Keyed(_KeyEvent):
    key: str


class _Claim(_KeyEvent):
    """A claim: who may run the key's command, until `lease_until_ms`. (`Claimed` puts
    the key first: its bases are listed so that `_Keyed`'s field comes before these.)"""

    method: str
    path: str
    token: str
    claimed_at_ms: int
    lease_until_ms: int

    def apply(self, aggregate: Any) -> None:
        _claim(aggregate, self)


class _Outcome(_Keyed):
    """A request's outcome recorded in one event, with what it was asked (the body both
    recording events share; `Completed` came later and records only the outcome)."""

    method: str
    path: str
    status: int
    body: str
    metadata_location: str | None
    recorded_at_ms: int


class IdempotencyRecord(Aggregate):
    """A key's claim, whether its command landed, and what the request answered. Table and
    view results are kept as their (immutable) metadata location, never the document nor
    the storage configuration (which can hold vended credentials)."""

    TOPIC = "icelog.idempotency-key"

    class Event(_KeyEvent):
        TOPIC = "icelog.idempotency-key.event.v1"

    class Claimed(Event, _Claim, _Keyed, Aggregate.Created):
        """A mutating catalog request with an `Idempotency-Key` header claimed the key before
        running (ADR 0012). Of two requests claiming one key at once — on any replica — one wins;
        the other waits for its outcome.

        Data fields:
            key: The Idempotency-Key (a UUID).
            method: HTTP method of the request.
            path: Request path.
            token: Names this claim (a request id may repeat: clients reuse them on retries).
            claimed-at-ms: When it was claimed (epoch ms).
            lease-until-ms: Until when the claim holds without an outcome: the request timeout and a
                little more; after that another request may take it over.
        """

        TOPIC = "icelog.idempotency-key.claimed.v1"

        def apply(self, aggregate: Any) -> None:
            aggregate.key = self.key
            super().apply(aggregate)

    class Reclaimed(Event, _Claim):
        """The key was claimed again: its earlier claim ran out (`lease-until-ms`) without the
        command landing, or it was released after a 5xx, or its recorded outcome outlived
        ICELOG_IDEMPOTENCY_LIFETIME_SECONDS.

        Data fields:
            method: HTTP method of the request.
            path: Request path.
            token: Names this claim.
            claimed-at-ms: When it was claimed (epoch ms).
            lease-until-ms: Until when the claim holds without an outcome.
        """

        TOPIC = "icelog.idempotency-key.reclaimed.v1"

    class Landed(Event):
        """The claimant's command appended its events — in this same append, so a key can land only
        once, even when a request took over the claim of one that stalled.

        Data fields:
            metadata-location: The metadata file the command wrote, when it wrote exactly one.
        """

        TOPIC = "icelog.idempotency-key.landed.v1"
        metadata_location: str | None

        def apply(self, aggregate: Any) -> None:
            aggregate.landed = True
            aggregate.landed_location = self.metadata_location
            aggregate.landed_at_ms = int(self.timestamp.timestamp() * 1000)

    class Completed(Event):
        """The request's answer was recorded (2xx, or a 4xx that would not change on retry). A
        repeat of the key within ICELOG_IDEMPOTENCY_LIFETIME_SECONDS gets it back without running
        again. Recorded by the claimant, or — when the claimant's request died after its command
        landed — rebuilt from the log by the next request with the key.

        Data fields:
            status: HTTP status of the answer.
            body: The answer's body (JSON text); without `metadata` and storage configuration when
                `metadata-location` is set (both are rebuilt on replay; vended credentials are never
                recorded).
            metadata-location: For table and view answers: their metadata file, else null.
            recorded-at-ms: When it was recorded (epoch ms).
        """

        TOPIC = "icelog.idempotency-key.completed.v1"
        status: int
        body: str
        metadata_location: str | None
        recorded_at_ms: int

        def apply(self, aggregate: Any) -> None:
            _outcome(aggregate, self)

    class Released(Event):
        """The claimant answered with a 5xx before its command landed (not a final outcome): the key
        is free for a retry at once.
        """

        TOPIC = "icelog.idempotency-key.released.v1"

        def apply(self, aggregate: Any) -> None:
            aggregate.claim_token = None
            aggregate.lease_until_ms = 0

    # Written before claims existed: a first outcome recorded after the request ran.
    class Recorded(Event, _Outcome, Aggregate.Created):
        """Written by releases before claims existed: a first final outcome, recorded after the
        request ran. Older logs hold it; it is still read.

        Data fields:
            key: The Idempotency-Key (a UUID).
            method: HTTP method of the request.
            path: Request path.
            status: HTTP status of the recorded answer.
            body: The answer's body (JSON text); without `metadata` when `metadata-location` is set
                (the document is re-read from there on replay).
            metadata-location: For table and view answers: their metadata file, else null.
            recorded-at-ms: When it was recorded (epoch ms).
        """

        TOPIC = "icelog.idempotency-key.recorded.v1"

        def apply(self, aggregate: Any) -> None:
            aggregate.key = self.key
            aggregate.method, aggregate.path = self.method, self.path
            aggregate.claimed_by = self.actor
            aggregate.claim_token, aggregate.claimed_at_ms, aggregate.lease_until_ms = None, 0, 0
            aggregate.landed, aggregate.landed_location = True, self.metadata_location
            aggregate.landed_at_ms = self.recorded_at_ms
            _outcome(aggregate, self)

    class Rerecorded(Event, _Outcome):
        """Written by releases before claims existed: the key used again after its lifetime. Older
        logs hold it; it is still read.

        Data fields:
            key: The Idempotency-Key (a UUID).
            method: HTTP method of the request.
            path: Request path.
            status: HTTP status of the new answer.
            body: The new answer's body (JSON text), as for `recorded`.
            metadata-location: For table and view answers: their metadata file, else null.
            recorded-at-ms: When it was recorded (epoch ms).
        """

        TOPIC = "icelog.idempotency-key.rerecorded.v1"

        def apply(self, aggregate: Any) -> None:
            aggregate.method, aggregate.path = self.method, self.path
            aggregate.landed, aggregate.landed_location = True, self.metadata_location
            _outcome(aggregate, self)

    if TYPE_CHECKING:
        key: str
        method: str
        path: str
        # Who claimed the key (the actor of its claim in force): only they get its outcome.
        claimed_by: str
        claim_token: str | None  # the claim in force
        claimed_at_ms: int
        lease_until_ms: int
        landed: bool
        landed_location: str | None
        landed_at_ms: int
        status: int | None  # None until the outcome is recorded
        body: str
        metadata_location: str | None
        recorded_at_ms: int

    # -- queries ---------------------------------------------------------------------------
    @property
    def has_outcome(self) -> bool:
        return self.status is not None

    def held_by(self, token: str) -> bool:
        return self.claim_token == token and not self.has_outcome

    def used_by(self, actor: str) -> bool:
        """Whether `actor` is who claimed the key: another caller with the same key never
        gets its outcome (it may hold what only the claimant may see)."""
        return getattr(self, "claimed_by", None) == actor

    # -- commands --------------------------------------------------------------------------
    def reclaim(self, **request: Any) -> None:
        """Claim the key again; `request` as `claim_fields` takes it."""
        self.trigger_event(self.Reclaimed, **claim_fields(**request))

    def land(self, metadata_location: str | None, *, actor: str, request_id: str) -> None:
        self.trigger_event(
            self.Landed, metadata_location=metadata_location, actor=actor, request_id=request_id
        )

    def complete(self, *, now_ms: int, **outcome: Any) -> None:
        """Record the request's answer at `now_ms`; `outcome` as on `Completed`."""
        self.trigger_event(self.Completed, recorded_at_ms=now_ms, **outcome)

    def release(self, *, actor: str, request_id: str) -> None:
        self.trigger_event(self.Released, actor=actor, request_id=request_id)


def _claim(aggregate: Any, event: Any) -> None:
    aggregate.method, aggregate.path = event.method, event.path
    aggregate.claimed_by = event.actor
    aggregate.claim_token = event.token
    aggregate.claimed_at_ms = event.claimed_at_ms
    aggregate.lease_until_ms = event.lease_until_ms
    aggregate.landed, aggregate.landed_location, aggregate.landed_at_ms = False, None, 0
    aggregate.status, aggregate.body = None, ""
    aggregate.metadata_location, aggregate.recorded_at_ms = None, 0


def _outcome(aggregate: Any, event: Any) -> None:
    copy_fields(event, aggregate, ("status", "body", "metadata_location", "recorded_at_ms"))


def new_claim(key: str, **request: Any) -> IdempotencyRecord:
    """Claim a key never claimed; `request` as `claim_fields` takes it."""
    claim = claim_fields(**request)
    return IdempotencyRecord._create(
        IdempotencyRecord.Claimed, id=idempotency_id(key), key=key, **claim
    )


def claim_fields(
    *, method: str, path: str, token: str, now_ms: int, lease_ms: int, actor: str, request_id: str
) -> dict[str, Any]:
    """A claim's fields, as `Claimed` and `Reclaimed` carry them: `actor`'s request
    `request_id` holds the key until its lease ends `lease_ms` from now."""
    return {
        "method": method,
        "path": path,
        "token": token,
        "claimed_at_ms": now_ms,
        "lease_until_ms": now_ms + lease_ms,
        "actor": actor,
        "request_id": request_id,
    }


# -- the claim a request holds, seen by the command's append ---------------------------------
@dataclass
class HeldClaim:
    """The key a running request holds: its first append lands the key with it."""

    record_id: UUID
    token: str
    actor: str
    request_id: str
    landed: bool = False
    # While set, appends do not land the key: a command of several appends lands it with
    # its last one, so that a retry after a failure half-way runs the rest again.
    deferred: bool = False


_HELD: ContextVar[HeldClaim | None] = ContextVar("icelog_idempotency_claim", default=None)


def hold(claim: HeldClaim) -> Token[HeldClaim | None]:
    return _HELD.set(claim)


def release_hold(token: Token[HeldClaim | None]) -> None:
    _HELD.reset(token)


def held_claim() -> HeldClaim | None:
    return _HELD.get()


@contextmanager
def deferred_landing() -> Iterator[None]:
    """The appends made inside do not land the request's key (the next one outside does)."""
    held = _HELD.get()
    if held is None:
        yield
        return
    before, held.deferred = held.deferred, True
    try:
        yield
    finally:
        held.deferred = before

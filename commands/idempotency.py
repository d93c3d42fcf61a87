"""Idempotency-Key claims and outcomes, in the log (ADR 0012).

A request carrying a key claims it before its command runs; the command's first append
lands the key in the same transaction (`CatalogApplication.save_all`); the response is recorded
after. Every decision reads the key's aggregate, so it holds across replicas and workers.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from icelog.commands.application import CatalogApplication, now_ms
from icelog.commands.group_commit import ConcurrentChange
from icelog.domain.context import RequestContext
from icelog.domain.idempotency import IdempotencyRecord, idempotency_id, new_claim


@dataclass(frozen=True)
class ClaimAttempt:
    """`claimed`: this request holds the key now. Otherwise `record` is the key as it
    stands (another request's claim or outcome)."""

    claimed: bool
    record: IdempotencyRecord


class IdempotencyCommands:
    def __init__(self, app: CatalogApplication) -> None:
        self.app = app

    def find_idempotency(self, key: str) -> IdempotencyRecord | None:
        return self.app.get_or_none(idempotency_id(key), IdempotencyRecord)

    def claim_idempotency(
        self,
        ctx: RequestContext,
        *,
        key: str,
        method: str,
        path: str,
        token: str,
        lease_ms: int,
        lifetime_ms: int,
    ) -> ClaimAttempt:
        """Claim `key` for this request, unless another request holds it or its outcome is
        still within the lifetime. A claim whose lease ran out without its command landing
        is taken over: should that request still be running, its append conflicts on the
        key (its `landed` event would come after ours), so it can never land as well."""
        now = now_ms()
        record = self.find_idempotency(key)
        fields = {
            "method": method, "path": path, "token": token, "now_ms": now,
            "lease_ms": lease_ms, "actor": ctx.actor, "request_id": ctx.request_id,
        }  # fmt: skip
        if record is None:
            record = new_claim(key, **fields)
        elif (record.has_outcome and now - record.recorded_at_ms > lifetime_ms) or (
            not record.has_outcome
            and not record.landed
            and (record.claim_token is None or record.lease_until_ms < now)
        ):
            record.reclaim(**fields)
        else:
            return ClaimAttempt(False, record)
        try:
            self.app.save_all(record)
        except ConcurrentChange:
            found = self.find_idempotency(key)
            assert found is not None, "a conflict means the key exists"
            return ClaimAttempt(False, found)
        return ClaimAttempt(True, record)

    def complete_idempotency(
        self,
        ctx: RequestContext,
        *,
        key: str,
        token: str,
        status: int,
        body: str,
        metadata_location: str | None,
    ) -> IdempotencyRecord | None:
        """Record the outcome of a key whose command landed or that answered a final error.
        The claimant records it; anyone may, for a claim that landed and has none yet (its
        request died between its append and its answer). First writer wins; the record as it
        stands is returned."""
        record = self.find_idempotency(key)
        if record is None or record.has_outcome:
            return record
        if not (record.held_by(token) or record.landed):
            return record
        record.complete(
            status=status,
            body=body,
            metadata_location=metadata_location,
            now_ms=now_ms(),
            actor=ctx.actor,
            request_id=ctx.request_id,
        )
        with contextlib.suppress(ConcurrentChange):
            self.app.save_all(record)
        return self.find_idempotency(key)

    def release_idempotency(self, ctx: RequestContext, *, key: str, token: str) -> None:
        """Give the key up after an answer that is not final (a 5xx): the command did not
        land, so a retry may run at once instead of waiting for the lease to run out."""
        record = self.find_idempotency(key)
        if record is None or not record.held_by(token) or record.landed:
            return
        record.release(actor=ctx.actor, request_id=ctx.request_id)
        with contextlib.suppress(ConcurrentChange):
            self.app.save_all(record)

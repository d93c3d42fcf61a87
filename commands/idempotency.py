"""Recording and finding Idempotency-Key outcomes."""

from __future__ import annotations

import contextlib
from typing import Any
from uuid import UUID

from commands.base import now_ms
from commands.group_commit import ConcurrentChange
from commands.views import ViewCommands
from domain.context import RequestContext
from domain.idempotency import IdempotencyRecord, idempotency_id


class IdempotencyCommands(ViewCommands):
    def find_idempotency(self, key: str) -> IdempotencyRecord | None:
        return self.get_or_none(idempotency_id(key), IdempotencyRecord)

    def record_idempotency(
        self,
        ctx: RequestContext,
        *,
        key: str,
        method: str,
        path: str,
        status: int,
        body: str,
        metadata_location: str | None,
        lifetime_ms: int,
    ) -> None:
        """Keep the first final outcome. If another request recorded the key meanwhile,
        that record stands (first writer wins)."""
        fields: dict[str, Any] = {
            "key": key,
            "method": method,
            "path": path,
            "status": status,
            "body": body,
            "metadata_location": metadata_location,
            "recorded_at_ms": now_ms(),
            "actor": ctx.actor,
            "request_id": ctx.request_id,
        }
        existing = self.find_idempotency(key)
        if existing is None:
            record = IdempotencyRecord._create(
                IdempotencyRecord.Recorded, id=idempotency_id(key), **fields
            )
        elif now_ms() - existing.recorded_at_ms > lifetime_ms:
            existing.trigger_event(IdempotencyRecord.Rerecorded, **fields)
            record = existing
        else:
            return
        with contextlib.suppress(ConcurrentChange):
            self.save_all(record)

    def metadata_document(self, warehouse_id: UUID, location: str) -> dict[str, Any]:
        """A metadata document by location (immutable) in a warehouse's storage."""
        return self.load_metadata(location, self.file_io(self.storage_profile(warehouse_id)))

"""Audit: recording the audit chain's head as an event (see domain/audit.py), and
`icelog metadata verify`: every live table's and view's current metadata file against
the document its events fold to."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from icelog.commands.application import CatalogApplication
from icelog.domain.audit import AUDIT_ANCHOR_ID, AuditAnchor
from icelog.domain.context import RequestContext
from icelog.domain.errors import CatalogError
from icelog.domain.metadata_fold import fold
from icelog.domain.ports import UnreadableFileError
from icelog.domain.table import Table
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse

_FIRST_TOPICS = [
    Table.Created.TOPIC,
    Table.Registered.TOPIC,
    View.Created.TOPIC,
    View.Registered.TOPIC,
]


class AuditCommands:
    def __init__(self, app: CatalogApplication) -> None:
        self.app = app

    def record_chain_head(self, ctx: RequestContext, position: int, link: str) -> int | None:
        """Append `head-recorded` unless this head (or a newer one) is recorded already;
        the log position of the appended event, or None."""

        def attempt() -> int | None:
            anchor = self.app.get_or_none(AUDIT_ANCHOR_ID, AuditAnchor)
            if anchor is None:
                anchor = AuditAnchor.start(actor=ctx.actor, request_id=ctx.request_id)
            recorded = anchor.record(
                position=position, link=link, actor=ctx.actor, request_id=ctx.request_id
            )
            return self.app.save_all(anchor) if recorded else None

        return self.app.retrying(attempt)

    def verify_metadata(self, warehouse_id: UUID | None = None) -> list[dict[str, Any]]:
        """One result per live table/view: status `ok`, `differs`, `missing` or
        `unreadable` (with a detail), in log order of creation."""
        results: list[dict[str, Any]] = []
        position = 0
        while True:
            batch = self.app.recorder.select_notifications(
                start=position, limit=1000, topics=_FIRST_TOPICS, inclusive_of_start=False
            )
            if not batch:
                return results
            for notification in batch:
                aggregate_id = UUID(str(notification.originator_id))
                folded = fold(self.app.events.get(aggregate_id))
                if folded is None or not folded.live:
                    continue
                if warehouse_id is not None and folded.warehouse_id != str(warehouse_id):
                    continue
                results.append(self._check_file(aggregate_id, folded))
            position = batch[-1].id

    def _check_file(self, aggregate_id: UUID, folded: Any) -> dict[str, Any]:
        result: dict[str, Any] = {
            "id": str(aggregate_id),
            "kind": folded.kind,
            "name": folded.name,
            "metadata-location": folded.metadata_location,
        }
        warehouse = self.app.get_or_none(UUID(folded.warehouse_id), Warehouse)
        if warehouse is None:
            return {**result, "status": "unreadable", "detail": "its warehouse is gone"}
        file_io = self.app.file_io(warehouse.storage_profile)
        # Read the file itself, not the process's cache of what it wrote.
        try:
            raw = file_io.read(folded.metadata_location)
        except FileNotFoundError:
            return {**result, "status": "missing", "detail": "the metadata file does not exist"}
        except UnreadableFileError as exc:
            return {**result, "status": "unreadable", "detail": exc.reason}
        except CatalogError as exc:  # outside the warehouse (a legacy location), or storage down
            return {**result, "status": "unreadable", "detail": exc.message}
        try:
            document = self.app.parse_metadata(raw, folded.metadata_location)
        except CatalogError as exc:
            return {**result, "status": "unreadable", "detail": str(exc)}
        if document != folded.document:
            keys = sorted(
                k
                for k in set(document) | set(folded.document)
                if document.get(k) != folded.document.get(k)
            )
            return {**result, "status": "differs", "detail": f"fields differ: {', '.join(keys)}"}
        return {**result, "status": "ok"}

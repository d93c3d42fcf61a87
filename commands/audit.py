"""Recording the audit chain's head as an event (see domain/audit.py)."""

from __future__ import annotations

from icelog.commands.tasks import TaskCommands
from icelog.domain.audit import AUDIT_ANCHOR_ID, AuditAnchor
from icelog.domain.context import RequestContext


class AuditCommands(TaskCommands):
    def record_chain_head(self, ctx: RequestContext, position: int, link: str) -> int | None:
        """Append `head-recorded` unless this head (or a newer one) is recorded already;
        the log position of the appended event, or None."""

        def attempt() -> int | None:
            anchor = self.get_or_none(AUDIT_ANCHOR_ID, AuditAnchor)
            if anchor is None:
                anchor = AuditAnchor.start(actor=ctx.actor, request_id=ctx.request_id)
            recorded = anchor.record(
                position=position, link=link, actor=ctx.actor, request_id=ctx.request_id
            )
            return self.save_all(anchor) if recorded else None

        return self.retrying(attempt)

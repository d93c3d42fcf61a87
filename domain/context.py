"""Who asked for a change, carried onto every event for audit."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RequestContext:
    actor: str = "anonymous"
    request_id: str = ""


SYSTEM = RequestContext(actor="system", request_id="")

"""The console's Status page (the figures of `/metrics`, the recent commit rate, the audit
chain's verdict on demand) and the page for a console URL that leads nowhere."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from icelog.api.console.calls import ApiError, call
from icelog.api.console.frame import Moment, attempt, error_page, page, render
from icelog.api.routes import services
from icelog.projections.audit_chain import AuditChain

_STARTED = time.monotonic()  # the process's start, near enough (the app imports this module)
_COMMIT_ROUTES = ("/tables/{table}", "/transactions/commit", "/views/{view}")


def _figures(registry: Any) -> dict[str, Any]:
    """What the status page shows of `/metrics`, read from the app's registry in-process."""
    found: dict[str, Any] = {"publishers": {}, "projections": {}, "commits": 0.0, "head": None}
    for family in registry.collect():
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, sample.value
            if name == "icelog_log_head_position":
                found["head"] = int(value)
            elif name.startswith("icelog_publisher_"):
                key = name.removeprefix("icelog_publisher_")
                found["publishers"].setdefault(labels.get("sink", "?"), {})[key] = value
            elif name.startswith("icelog_projection_"):
                key = name.removeprefix("icelog_projection_")
                found["projections"].setdefault(labels.get("projection", "?"), {})[key] = value
            elif (
                name == "icelog_http_requests_total"
                and labels.get("method") == "POST"
                and labels.get("route", "").endswith(_COMMIT_ROUTES)
                and labels.get("status", "").startswith("2")
            ):
                found["commits"] += value
    return found


@page
async def status(request: Request) -> Response:
    registry = request.app.state.metrics
    figures = await asyncio.to_thread(_figures, registry)
    uptime = max(1.0, time.monotonic() - _STARTED)
    figures["commit_rate"] = figures["commits"] / uptime * 60
    figures["uptime"] = uptime
    context: dict[str, Any] = {"figures": figures, "verdict": None, "verify_error": None}
    # The recent commit rate, from the log (the server admin's, as the log is in the API).
    since = datetime.now(UTC).timestamp() - 300
    recent, context["recent_error"] = await attempt(
        call(
            request,
            "listEvents",
            query={
                "type": "io.icelog.table.committed",
                "limit": 1000,
                "since": datetime.fromtimestamp(since, UTC).isoformat(),
            },
        )
    )
    context["recent"] = None if recent is None else len(recent["events"])
    if request.query_params.get("verify"):
        # Whoever may read the whole log may verify its chain.
        _, context["verify_error"] = await attempt(call(request, "listEvents", query={"limit": 1}))
        if context["verify_error"] is None:
            chain = AuditChain(services(request).catalog.app.recorder)
            context["verdict"] = await asyncio.to_thread(chain.verify)
    return render(request, "status.html", context)


async def not_found(request: Request) -> Response:
    request.state.moment = Moment(None, None, None)
    path = request.url.path
    return error_page(request, ApiError(404, "NotFoundException", f"No console page {path}"))

"""The console's table and view pages: one way for both kinds (a table or view as it is now
or was at the page's moment, its events step by step, its forms); only the template's body
differs (templates/tabular.html, extended by table.html and view.html)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from starlette.requests import Request
from starlette.responses import Response

from icelog.api.console import history
from icelog.api.console.calls import ApiError, call, namespace_segment
from icelog.api.console.frame import (
    SEP,
    Moment,
    as_of_catalog,
    attempt,
    done,
    form,
    link,
    ns_levels,
    ns_param,
    page,
    render,
    with_access,
)
from icelog.api.routes import services
from icelog.domain.table import Table
from icelog.domain.view import View


async def _history_rows(request: Request, wid: str, kind: str, tid: str) -> list[dict[str, Any]]:
    """Every logged event of a table or view (its guard: may the caller describe it)."""
    rows: list[dict[str, Any]] = []
    after = 0
    while True:
        page_ = await call(
            request,
            f"get{kind.capitalize()}History",
            path={"warehouse_id": wid, f"{kind}_id": tid},
            query={"after": after, "limit": 1000},
        )
        rows += page_["events"]
        if page_.get("next-after") is None:
            return rows
        after = page_["next-after"]


async def _steps(request: Request, tid: str) -> list[history.Step]:
    store = services(request).catalog.app.events
    events = await asyncio.to_thread(lambda: list(store.get(UUID(tid))))
    return history.steps(e for e in events if isinstance(e, Table.Event | View.Event))


async def _tabular(request: Request, kind: str) -> Response:
    wid = request.path_params["warehouse_id"]
    levels = ns_levels(request)
    name = request.query_params.get("name", "")
    moment: Moment = request.state.moment
    context: dict[str, Any] = {"wid": wid, "levels": levels, "name": name, "kind": kind}
    dotted = ".".join([*levels, name])
    missing = "NoSuchTableException" if kind == "table" else "NoSuchViewException"
    if moment.active:
        held = (await as_of_catalog(request, wid))["warehouses"].get(wid, {"namespaces": {}})
        ns = held["namespaces"].get(SEP.join(levels), {"tables": [], "views": []})
        found = [t for t in ns[f"{kind}s"] if t["name"] == name]
        if not found:
            raise ApiError(404, missing, f"{kind.capitalize()} did not exist then: {dotted}")
        tid = str(found[0]["id"])
        context["metadata_location"] = found[0].get("metadata-location")
    else:
        segment = {"prefix": wid, "namespace": namespace_segment(levels), kind: name}
        loaded = await call(request, "loadTable" if kind == "table" else "loadView", path=segment)
        context["metadata_location"] = loaded.get("metadata-location")
        context["metadata"] = loaded["metadata"]
        tid = str(loaded["metadata"]["table-uuid" if kind == "table" else "view-uuid"])
        protection = await attempt(
            call(
                request,
                f"get{kind.capitalize()}Protection",
                path={"warehouse_id": wid, f"{kind}_id": tid},
            )
        )
        context["protected"] = (protection[0] or {}).get("protected")
    rows = await _history_rows(request, wid, kind, tid)
    by_version = {row["version"]: row for row in rows}
    steps = await _steps(request, tid)
    if moment.active:
        shown = {row["version"] for row in rows if row["position"] <= (moment.position or 0)}
        steps = [s for s in steps if s.version in shown]
        if not steps:
            raise ApiError(404, missing, f"{kind.capitalize()} did not exist then: {dotted}")
        context["metadata"] = steps[-1].document
    context["tid"] = tid
    path = {"warehouse_id": wid, f"{kind}_id": tid}
    url = f"/ui/warehouses/{wid}/{kind}/access?" + urlencode({"ns": ns_param(levels), "name": name})
    await with_access(request, context, kind, path, url)
    context["timeline"] = [(by_version.get(s.version, {}), s) for s in reversed(steps)]
    metadata = context["metadata"]
    if kind == "table":
        context["schema"] = history.current_schema(metadata)
        context["partition"] = history.partition_text(metadata)
        context["sort"] = history.sort_text(metadata)
        context["summary_text"] = history.summary_text
    return render(request, f"{kind}.html", context)


@page
async def table(request: Request) -> Response:
    return await _tabular(request, "table")


@page
async def view(request: Request) -> Response:
    return await _tabular(request, "view")


@page
async def tabular_action(request: Request) -> Response:
    wid = request.path_params["warehouse_id"]
    kind = request.path_params["kind"]
    action = request.path_params["action"]
    data = await form(request)
    levels = [level for level in data.get("ns", "").split(SEP) if level]
    name = data.get("name", "")
    if kind not in ("table", "view") or not levels:
        raise ApiError(400, "BadRequestException", "Which table or view?")
    segment = {"prefix": wid, "namespace": namespace_segment(levels), kind: name}
    back = link(request.state.moment)(f"/ui/warehouses/{wid}/namespace", ns=ns_param(levels))
    if action == "drop":
        await call(request, "dropTable" if kind == "table" else "dropView", path=segment)
        return done(back, f"Dropped {'.'.join([*levels, name])}")
    if action == "protection":
        body = {"protected": data.get("protected") == "true"}
        path = {"warehouse_id": wid, f"{kind}_id": data.get("id", "")}
        await call(request, f"set{kind.capitalize()}Protection", path=path, body=body)
        here = link(request.state.moment)(
            f"/ui/warehouses/{wid}/{kind}", ns=ns_param(levels), name=name
        )
        return done(here, "Protection changed")
    raise ApiError(404, "NotFoundException", f"No such action: {action}")

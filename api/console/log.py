"""The console's Log page (`/ui/events`): the event log newest first, as of the page's
moment (nothing after its position), filtered by type, actor and warehouse; and where an
event's position leads (`/ui/events/<position>`): the page of the object it changed, as it
was then. Both read the log through the events API, as the caller: they show nothing the
API would not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from icelog.api.console import history
from icelog.api.console.calls import ApiError, call, namespace_segment
from icelog.api.console.frame import (
    Moment,
    as_of_catalog,
    attempt,
    link,
    ns_param,
    page,
    render,
)
from icelog.api.http import ascii_int

LOG_PAGE = 100
FILTERS = ("type", "actor", "warehouse-id", "namespace")
# After these an object is gone: its event leads to the object as it was just before.
GONE = ("dropped", "soft-dropped", "unregistered", "expired", "purged", "deleted")

Link = Callable[..., str]  # a console URL as of a moment: `frame.link`


def _position(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    value = ascii_int(raw)
    if value is None:
        raise ApiError(400, "BadRequestException", f"{name} must be a log position: {raw!r}")
    return value


def _object_link(event: dict[str, Any]) -> str:
    """Where an event's position leads; with its warehouse, so that whoever may read that
    warehouse's log (not the whole log) finds it."""
    wid = event.get("warehouse-id")
    query = f"?{urlencode({'warehouse-id': wid})}" if wid else ""
    return f"/ui/events/{event['position']}{query}"


@page
async def events(request: Request) -> Response:
    """Newest first. As of a moment, only events at or before its position, on every page:
    `before` pages back in time (older), `after` forwards (newer, shown newest first too)."""
    moment: Moment = request.state.moment
    filters = {k: v.strip() for k in FILTERS if (v := request.query_params.get(k, "")).strip()}
    query: dict[str, Any] = {**filters, "limit": LOG_PAGE}
    if "type" in query:
        query["type"] = history.type_filter(query["type"])
    ceiling = None if moment.position is None else moment.position + 1  # positions below it
    after, before = _position(request, "after"), _position(request, "before")
    older: int | None
    newer: int | None
    if after is not None:
        answer = await call(
            request, "listEvents", query={**query, "after": after, "before": ceiling}
        )
        rows = list(reversed(answer["events"]))
        newer = answer["next-after"]
        older = (rows[-1]["position"] if rows else after + 1) if after > 0 else None
    else:
        bounds = [b for b in (before, ceiling) if b is not None]
        query |= {"order": "desc", "before": min(bounds) if bounds else None}
        answer = await call(request, "listEvents", query=query)
        rows = answer["events"]
        older = answer["next-before"]
        newer = None if before is None else (rows[0]["position"] if rows else max(before - 1, 0))
    u = link(moment)
    paged = after is not None or before is not None  # not the newest page
    context = {
        "events": [{**e, "link": _object_link(e)} for e in rows],
        "filters": filters,
        "older_url": None if older is None else u("/ui/events", **filters, before=older),
        "newer_url": None if newer is None else u("/ui/events", **filters, after=newer),
        "newest_url": u("/ui/events", **filters) if paged else None,
        "oldest_url": u("/ui/events", **filters, after=0) if after != 0 else None,
    }
    return render(request, "events.html", context)


@page
async def event_object(request: Request) -> Response:
    """The object the event at a position changed, on its page as of that event (as of
    the event before, when the event removed it), or the catalog as of the event. The event
    is read as the caller through the events API: a position the caller may not read the
    log at (or one outside the `warehouse-id` given) is refused or not found."""
    raw = request.path_params["position"]
    position = ascii_int(raw)
    if not position:
        raise ApiError(400, "BadRequestException", f"Not a log position: {raw!r}")
    query: dict[str, Any] = {"after": position - 1, "limit": 1}
    wid = request.query_params.get("warehouse-id", "").strip()
    if wid:
        query["warehouse-id"] = wid
    found = (await call(request, "listEvents", query=query))["events"]
    if not found or found[0]["position"] != position:
        where = " in this warehouse" if wid else ""
        raise ApiError(404, "NotFoundException", f"No event at log position {position}{where}")
    try:
        url = await _object_url(request, found[0])
    except ApiError as exc:
        # Only the server admin may read the catalog as of a past moment; whoever else
        # reads this log gets the object as it is now, or the Log at the event.
        if exc.status != 403:
            raise
        url = await _object_now(request, found[0])
    return RedirectResponse(url, status_code=303)


async def _object_now(request: Request, event: dict[str, Any]) -> str:
    """The page of the object an event changed as it is now, when it is still there
    (a table or view by its id: under its current name); else the Log showing the event
    first, which the caller may read, since the event was found there."""
    position = int(event["position"])
    kind, _ = history.kind_and_verb(str(event["type"]))
    wid = event.get("warehouse-id")
    target: str | None = None
    if kind in ("table", "view") and wid and event.get("tabular-id"):
        query = {"warehouse-id": wid, "tabular-id": event["tabular-id"], "order": "desc"}
        latest = (await call(request, "listEvents", query={**query, "limit": 1}))["events"]
        last = latest[0] if latest else event
        gone = history.kind_and_verb(str(last["type"]))[1] in GONE
        ns, subject = str(last.get("namespace") or ""), str(last.get("subject") or "")
        if not gone and ns and subject.startswith(ns + "."):
            levels = ns.split(".")
            path = {"prefix": wid, "namespace": namespace_segment(levels)}
            url = link(Moment(None, None, None))(
                f"/ui/warehouses/{wid}/{kind}", ns=ns_param(levels), name=subject[len(ns) + 1 :]
            )
            operation = "loadTable" if kind == "table" else "loadView"
            target = await _live(request, operation, {**path, kind: subject[len(ns) + 1 :]}, url)
    elif kind == "namespace" and wid and event.get("namespace"):
        levels = str(event["namespace"]).split(".")
        path = {"prefix": wid, "namespace": namespace_segment(levels)}
        url = link(Moment(None, None, None))(f"/ui/warehouses/{wid}/namespace", ns=ns_param(levels))
        target = await _live(request, "loadNamespace", path, url)
    elif kind == "warehouse":
        wid = wid or str(event["aggregate-id"])
        target = await _live(
            request, "getWarehouse", {"warehouse_id": wid}, f"/ui/warehouses/{wid}"
        )
    if target:
        return target
    filters = {"warehouse-id": wid} if wid else {}
    return link(Moment(None, None, None))("/ui/events", **filters, before=position + 1)


async def _object_url(request: Request, event: dict[str, Any]) -> str:
    position = int(event["position"])
    kind, verb = history.kind_and_verb(str(event["type"]))
    at = position - 1 if verb in GONE else position
    then = link(Moment(str(at), at, None))
    wid, aggregate = event.get("warehouse-id"), str(event["aggregate-id"])
    target: str | None = None
    if kind in ("table", "view") and wid:
        tabular = str(event.get("tabular-id") or aggregate)
        target = await _tabular_at(request, wid, kind, tabular, at, then)
    elif kind in ("namespace", "function") and wid:
        target = await _namespace_at(request, wid, event.get("namespace"), at, then)
    elif kind == "warehouse":
        wid = wid or aggregate
        catalog = await as_of_catalog(request, wid, position=at)
        target = then(f"/ui/warehouses/{wid}") if wid in catalog["warehouses"] else None
    elif kind == "project":
        catalog = await as_of_catalog(request, position=at)
        ids = {p["project-id"] for p in catalog["projects"]}
        target = then(f"/ui/projects/{aggregate}") if aggregate in ids else None
    elif kind == "task" and wid:
        path = {"warehouse_id": wid, "task_id": aggregate}
        exists, _ = await attempt(call(request, "getTask", path=path))
        target = f"/ui/warehouses/{wid}/tasks/{aggregate}" if exists else None
    elif kind == "role":
        target = await _live(
            request, "getRole", {"role_id": aggregate}, then(f"/ui/roles/{aggregate}")
        )
    elif kind == "user":
        name = (event.get("data") or {}).get("name")
        target = "/ui/users" + (f"?{urlencode({'name': name})}" if name else "")
    elif kind == "grants":
        target = await _grant_target(request, event.get("data") or {}, then)
    # Anything else (and an object not found): the whole catalog as of the event.
    return target or link(Moment(str(position), position, None))("/ui/projects")


async def _tabular_at(
    request: Request, wid: str, kind: str, tabular: str, at: int, then: Link
) -> str | None:
    """A table's or view's page as of `at`, found by its id (its name then)."""
    catalog = await as_of_catalog(request, wid, position=at)
    for ns in catalog["warehouses"].get(wid, {"namespaces": {}})["namespaces"].values():
        for item in ns[f"{kind}s"]:
            if str(item["id"]) == tabular:
                levels = ns_param(ns["namespace"])
                return then(f"/ui/warehouses/{wid}/{kind}", ns=levels, name=item["name"])
    return None


async def _namespace_at(request: Request, wid: str, dotted: Any, at: int, then: Link) -> str | None:
    """A namespace's page as of `at`, found by its dotted name (levels may hold dots)."""
    if not dotted:
        return None
    catalog = await as_of_catalog(request, wid, position=at)
    for ns in catalog["warehouses"].get(wid, {"namespaces": {}})["namespaces"].values():
        if ".".join(ns["namespace"]) == dotted:
            return then(f"/ui/warehouses/{wid}/namespace", ns=ns_param(ns["namespace"]))
    return None


async def _live(request: Request, operation: str, path: dict[str, str], url: str) -> str | None:
    """`url` when the object is there now (its page reads it as it is now)."""
    exists, _ = await attempt(call(request, operation, path=path))
    return url if exists else None


async def _grant_target(request: Request, data: dict[str, Any], then: Link) -> str | None:
    """A grant's object: its assignments page as of the grant."""
    kind, oid = str(data.get("object-kind")), str(data.get("object-id"))
    if kind == "server":
        return then("/ui/server/access")
    if kind == "project":
        return await _live(
            request, "getProjectById", {"project_id": oid}, then(f"/ui/projects/{oid}/access")
        )
    if kind == "warehouse":
        return await _live(
            request, "getWarehouse", {"warehouse_id": oid}, then(f"/ui/warehouses/{oid}/access")
        )
    if kind == "role":
        return await _live(request, "getRole", {"role_id": oid}, then(f"/ui/roles/{oid}"))
    return None

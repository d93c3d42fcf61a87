"""The console's pages (`/ui`): each one calls the API's operations in-process
(api/console/calls.py) and renders a Jinja2 template (api/console/templates/)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit
from uuid import UUID

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from icelog.api.auth.provider_calls import ProviderBusy
from icelog.api.auth.token_endpoint import rate_limited
from icelog.api.console import history, session
from icelog.api.console.calls import ApiError, call, namespace_segment
from icelog.api.http import ascii_int
from icelog.api.routes import services
from icelog.domain.table import Table
from icelog.domain.view import View
from icelog.projections.audit_chain import AuditChain

log = logging.getLogger("icelog.console")

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.globals["type_text"] = history.type_text


def _ms(value: Any) -> str:
    """Milliseconds since the epoch (Iceberg's timestamps) as a UTC time."""
    try:
        return datetime.fromtimestamp(int(value) / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError, OverflowError):
        return str(value)


templates.env.filters["ms"] = _ms
templates.env.filters["event_type"] = history.event_type
SEP = "\x1f"
# How much of the namespace tree the warehouse page walks, and how many as-of pages a
# page reads at most (each holds up to 1000 namespaces, tables and views).
TREE_LIMIT = 300
AS_OF_PAGES = 20
# A warehouse's or namespace's history reads at most this many pages of 1000 events, and
# shows the newest of them.
HISTORY_PAGES = 20
HISTORY_SHOWN = 50

Handler = Callable[[Request], Awaitable[Response]]


# -- plumbing ----------------------------------------------------------------------------------
class Moment:
    """The "as of" the page is shown at: a log position (and its time), or now."""

    def __init__(self, raw: str | None, position: int | None, time: str | None) -> None:
        self.raw, self.position, self.time = raw, position, time

    @property
    def active(self) -> bool:
        return self.position is not None


async def moment_of(request: Request) -> Moment:
    raw = (request.query_params.get("as-of") or "").strip()
    if not raw:
        return Moment(None, None, None)
    query = {"position": raw} if ascii_int(raw) is not None else {"time": raw}
    answer = await call(request, "getCatalogAsOf", query={**query, "page-size": 1})
    return Moment(raw, int(answer["position"]), answer.get("time"))


def link(moment: Moment) -> Callable[..., str]:
    """`u(path, **params)` for templates: a console URL that keeps the as-of moment."""

    def u(path: str, **params: Any) -> str:
        wanted = {k.replace("_", "-"): v for k, v in params.items() if v is not None}
        if moment.raw and "as-of" not in wanted:
            wanted["as-of"] = moment.raw
        wanted = {k: v for k, v in wanted.items() if v != ""}
        return path + ("?" + urlencode(wanted) if wanted else "")

    return u


def ns_param(levels: list[str] | tuple[str, ...]) -> str:
    return SEP.join(levels)


def ns_levels(request: Request) -> list[str]:
    raw = request.query_params.get("ns", "")
    levels = raw.split(SEP) if raw else []
    if not levels or any(not level for level in levels):
        raise ApiError(400, "BadRequestException", f"Invalid namespace: {raw!r}")
    return levels


def render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    moment: Moment = getattr(request.state, "moment", None) or Moment(None, None, None)
    keep = [(k, v) for k, v in request.query_params.multi_items() if k not in ("as-of", "done")]
    here = request.url.path
    base = {
        "request": request,
        "keep": keep,
        "now_url": here + ("?" + urlencode(keep) if keep else ""),
        "step_url": here + "?" + urlencode([*keep, ("as-of", (moment.position or 1) - 1)]),
        "moment": moment,
        "u": link(moment),
        "ns_param": ns_param,
        "user": getattr(request.state, "principal", None),
        "auth_enabled": request.app.state.authorizer.enabled,
        "flash": request.query_params.get("done"),
    }
    return templates.TemplateResponse(request, name, {**base, **context}, status_code=status)


def error_page(request: Request, error: ApiError) -> Response:
    return render(request, "error.html", {"error": error}, status=error.status)


def page(handler: Handler) -> Handler:
    """A page: its as-of moment resolved first; an API error becomes a page saying it (with
    the API's status, type and message); anything else a 500 page, never a blank one."""

    async def wrapped(request: Request) -> Response:
        try:
            if session.enabled(request):
                try:
                    await session.authenticate(request)
                except session.LoginNeeded as needed:
                    return _to_login(request, needed.code)
            if request.method == "POST" and not _same_origin(request):
                raise ApiError(403, "ForbiddenException", "A form from another site")
            request.state.moment = await moment_of(request)
            return await handler(request)
        except ApiError as error:
            return error_page(request, error)
        except Exception:
            log.exception("console page %s failed", request.url.path)
            failure = ApiError(500, "InternalServerError", "Unexpected error; see the server log")
            return error_page(request, failure)

    wrapped.__name__ = handler.__name__
    return wrapped


def _to_login(request: Request, code: str) -> Response:
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    target = "/ui/login?" + urlencode({"reason": code, "next": here})
    return RedirectResponse(target, status_code=303)


def _same_origin(request: Request) -> bool:
    """A form post comes from the console's own pages (the session cookie is SameSite=Lax
    too): a browser names the page's origin."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == request.headers.get("host", "")


async def attempt(awaitable: Awaitable[Any]) -> tuple[Any, ApiError | None]:
    """A part of a page that may be refused on its own (e.g. tasks without the right)."""
    try:
        return await awaitable, None
    except ApiError as error:
        return None, error


# The operation name part of each kind's `get…Assignments`, `update…Assignments`, `get…Access`.
OPERATION: dict[str, str] = {
    "server": "Server",
    "project": "ProjectById",
    "warehouse": "Warehouse",
    "namespace": "Namespace",
    "table": "WarehouseTable",
    "view": "WarehouseView",
    "role": "Role",
}


def as_of_query(request: Request) -> dict[str, Any]:
    """`as-of` for the permission routes when the page is shown as of a past moment."""
    moment: Moment = request.state.moment
    return {"as-of": str(moment.position)} if moment.active else {}


async def my_access(
    request: Request, kind: str, path: dict[str, str]
) -> tuple[list[str] | None, ApiError | None]:
    """The caller's allowed actions on an object (its `.../access`), or the refusal."""
    answer, error = await attempt(
        call(request, f"get{OPERATION[kind]}Access", path=path, query=as_of_query(request))
    )
    if answer is None:
        return None, error
    return sorted(answer["allowed-actions"]), None


async def form(request: Request) -> dict[str, str]:
    """An urlencoded form (the console's forms post nothing else)."""
    raw = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[-1] for k, v in parse_qs(raw, keep_blank_values=True).items()}


def done(url: str, message: str) -> Response:
    joiner = "&" if "?" in url else "?"
    return RedirectResponse(f"{url}{joiner}{urlencode({'done': message})}", status_code=303)


async def as_of_catalog(
    request: Request, warehouse_id: str | None = None, *, position: int | None = None
) -> dict[str, Any]:
    """The catalog as of the page's moment (or `position`; all pages of it, bounded),
    warehouses merged."""
    moment: Moment = request.state.moment
    at = moment.position if position is None else position
    query: dict[str, Any] = {"position": at, "warehouse-id": warehouse_id}
    merged: dict[str, Any] = {"projects": [], "warehouses": {}}
    for _ in range(AS_OF_PAGES):
        answer = await call(request, "getCatalogAsOf", query=query)
        merged["projects"] = answer["projects"]
        for warehouse in answer["warehouses"]:
            held = merged["warehouses"].setdefault(
                warehouse["warehouse-id"], {**warehouse, "namespaces": {}}
            )
            for ns in warehouse["namespaces"]:
                key = SEP.join(ns["namespace"])
                into = held["namespaces"].setdefault(
                    key,
                    {
                        "namespace": ns["namespace"],
                        "properties": ns["properties"],
                        "tables": [],
                        "views": [],
                    },
                )
                into["tables"] += ns["tables"]
                into["views"] += ns["views"]
        if not answer.get("next-page-token"):
            break
        query["page-token"] = answer["next-page-token"]
    return merged


# -- projects ----------------------------------------------------------------------------------
@page
async def home(request: Request) -> Response:
    """The start page leads to where there is something to see: with one project (that the
    caller may see), to its only warehouse — the default warehouse of a fresh server — or
    to the project; with none or several (or as of a past moment), to the projects."""
    u = link(request.state.moment)
    if request.state.moment.active:
        return RedirectResponse(u("/ui/projects"), status_code=303)
    listed, _ = await attempt(call(request, "listProjects"))
    projects = (listed or {}).get("projects", [])
    if len(projects) != 1:
        return RedirectResponse(u("/ui/projects"), status_code=303)
    pid = projects[0]["project-id"]
    found, _ = await attempt(call(request, "listWarehouses", headers={"x-project-id": pid}))
    warehouses = (found or {}).get("warehouses", [])
    if len(warehouses) == 1:
        return RedirectResponse(u(f"/ui/warehouses/{warehouses[0]['id']}"), status_code=303)
    return RedirectResponse(u(f"/ui/projects/{pid}"), status_code=303)


@page
async def projects(request: Request) -> Response:
    if request.state.moment.active:
        found = (await as_of_catalog(request))["projects"]
        rows = [{"project-id": p["project-id"], "project-name": p["name"]} for p in found]
    else:
        rows = (await call(request, "listProjects"))["projects"]
    return render(request, "projects.html", {"projects": rows})


@page
async def create_project(request: Request) -> Response:
    data = await form(request)
    try:
        answer = await call(request, "createProject", body={"project-name": data.get("name", "")})
    except ApiError as error:
        rows, _ = await attempt(call(request, "listProjects"))
        context = {"projects": (rows or {}).get("projects", []), "error": error}
        return render(request, "projects.html", context, status=error.status)
    return done(f"/ui/projects/{answer['project-id']}", "Project created")


@page
async def project(request: Request) -> Response:
    pid = request.path_params["project_id"]
    if request.state.moment.active:
        catalog = await as_of_catalog(request)
        found = [p for p in catalog["projects"] if p["project-id"] == pid]
        if not found:
            raise ApiError(404, "NoSuchProjectException", f"Project did not exist then: {pid}")
        info = {"project-id": pid, "project-name": found[0]["name"]}
        warehouses = [
            {"id": w["warehouse-id"], "name": w["name"], "as_of": True}
            for w in catalog["warehouses"].values()
            if w.get("project-id") == pid
        ]
    else:
        info = await call(request, "getProjectById", path={"project_id": pid})
        listed = await call(request, "listWarehouses", headers={"x-project-id": pid})
        warehouses = listed["warehouses"]
    context = {
        "project": info,
        "warehouses": warehouses,
        "access": await my_access(request, "project", {"project_id": pid}),
        "access_url": f"/ui/projects/{pid}/access",
    }
    return render(request, "project.html", context)


@page
async def project_action(request: Request) -> Response:
    pid = request.path_params["project_id"]
    action = request.path_params["action"]
    data = await form(request)
    path = {"project_id": pid}
    if action == "rename":
        await call(request, "renameProjectById", path=path, body={"new-name": data.get("name")})
        return done(f"/ui/projects/{pid}", "Project renamed")
    if action == "delete":
        await call(request, "deleteProjectById", path=path)
        return done("/ui/projects", "Project deleted")
    raise ApiError(404, "NotFoundException", f"No such action: {action}")


# -- warehouses --------------------------------------------------------------------------------
def _storage_body(data: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    kind = data.get("storage-type", "file")
    if kind == "file":
        return {"type": "file", "base-location": data.get("base-location", "")}, None
    profile: dict[str, Any] = {
        "type": "s3",
        "bucket": data.get("bucket", ""),
        "region": data.get("region", ""),
    }
    for key in ("key-prefix", "endpoint"):
        if data.get(key):
            profile[key] = data[key]
    if data.get("path-style-access"):
        profile["path-style-access"] = True
    if data.get("flavor"):
        profile["flavor"] = data["flavor"]
    credential = None
    if data.get("access-key-id") or data.get("secret-access-key"):
        credential = {
            "type": "s3",
            "credential-type": "access-key",
            "access-key-id": data.get("access-key-id", ""),
            "secret-access-key": data.get("secret-access-key", ""),
        }
    return profile, credential


def _delete_profile(data: dict[str, str]) -> dict[str, Any]:
    if data.get("delete-type") == "soft":
        seconds = data.get("expiration-seconds", "") or "0"
        parsed = ascii_int(seconds)
        return {"type": "soft", "expiration-seconds": -1 if parsed is None else parsed}
    return {"type": "hard"}


@page
async def new_warehouse(request: Request) -> Response:
    pid = request.path_params["project_id"]
    return render(request, "warehouse_new.html", {"project_id": pid, "values": {}})


@page
async def create_warehouse(request: Request) -> Response:
    pid = request.path_params["project_id"]
    data = await form(request)
    profile, credential = _storage_body(data)
    body: dict[str, Any] = {
        "warehouse-name": data.get("name", ""),
        "project-id": pid,
        "storage-profile": profile,
        "delete-profile": _delete_profile(data),
    }
    if credential is not None:
        body["storage-credential"] = credential
    try:
        answer = await call(request, "createWarehouse", body=body)
    except ApiError as error:
        # The access check's answer (or any refusal) on the form, with what was typed —
        # never the secret key.
        values = {k: v for k, v in data.items() if k != "secret-access-key"}
        context = {"project_id": pid, "values": values, "error": error}
        return render(request, "warehouse_new.html", context, status=error.status)
    return done(f"/ui/warehouses/{answer['warehouse-id']}", "Warehouse created")


async def _history(request: Request, query: dict[str, Any]) -> list[dict[str, Any]]:
    """The newest events of a warehouse or namespace (up to the page's moment), each with
    what it changed. The log is read in order, page after page (bounded), so that the
    newest are shown and property values are known from the events before them."""
    moment: Moment = request.state.moment
    found: list[dict[str, Any]] = []
    after = 0
    for _ in range(HISTORY_PAGES):
        answer = await call(request, "listEvents", query={**query, "limit": 1000, "after": after})
        found += answer["events"]
        after = answer.get("next-after")
        if after is None or (moment.active and after >= (moment.position or 0)):
            break
    shown = [
        e
        for e in history.describe_events(found)
        if not moment.active or e["position"] <= (moment.position or 0)
    ]
    return list(reversed(shown))[:HISTORY_SHOWN]


async def _tree(request: Request, wid: str) -> tuple[list[dict[str, Any]], bool]:
    """The namespace tree (depth first), as far as the caller may list it."""
    found: list[dict[str, Any]] = []
    pending: list[list[str] | None] = [None]
    while pending and len(found) < TREE_LIMIT:
        parent = pending.pop()
        query = {"parent": ns_param(parent)} if parent else {}
        answer = await call(request, "listNamespaces", path={"prefix": wid}, query=query)
        children = sorted(answer["namespaces"], reverse=True)
        pending += children
        if parent is not None:
            found.append({"namespace": parent})
    return found, bool(pending)


@page
async def warehouse(request: Request) -> Response:
    wid = request.path_params["warehouse_id"]
    moment: Moment = request.state.moment
    path = {"warehouse_id": wid}
    context: dict[str, Any] = {}
    if moment.active:
        catalog = await as_of_catalog(request, wid)
        held = catalog["warehouses"].get(wid)
        if held is None:
            raise ApiError(404, "NoSuchWarehouseException", f"Warehouse did not exist then: {wid}")
        context["warehouse"] = {"id": wid, "name": held["name"], "project-id": held["project-id"]}
        namespaces = sorted(held["namespaces"].values(), key=lambda n: n["namespace"])
        context["tree"], context["tree_cut"] = namespaces, False
        tables = sum(len(n["tables"]) for n in namespaces)
        views = sum(len(n["views"]) for n in namespaces)
        context["stats"] = {"namespaces": len(namespaces), "tables": tables, "views": views}
    else:
        context["warehouse"] = await call(request, "getWarehouse", path=path)
        context["tree"], context["tree_cut"] = await _tree(request, wid)
        context["stats"] = {"namespaces": len(context["tree"])}
        context["deleted"], context["deleted_error"] = await attempt(
            call(request, "listDeletedTabulars", path=path, query={"pageSize": 1000})
        )
        context["tasks"], context["tasks_error"] = await attempt(
            call(request, "listTasks", path=path)
        )
    context["events"], context["events_error"] = await attempt(
        _history(request, {"warehouse-id": wid})
    )
    context["access"] = await my_access(request, "warehouse", path)
    context["access_url"] = f"/ui/warehouses/{wid}/access"
    return render(request, "warehouse.html", context)


@page
async def warehouse_action(request: Request) -> Response:
    wid = request.path_params["warehouse_id"]
    action = request.path_params["action"]
    data = await form(request)
    path = {"warehouse_id": wid}
    here = f"/ui/warehouses/{wid}"
    if action == "rename":
        await call(request, "renameWarehouse", path=path, body={"new-name": data.get("name")})
        return done(here, "Warehouse renamed")
    if action == "delete":
        project_id = data.get("project-id", "")
        await call(request, "deleteWarehouse", path=path)
        return done(
            f"/ui/projects/{project_id}" if project_id else "/ui/projects", "Warehouse deleted"
        )
    if action == "delete-profile":
        profile = {"delete-profile": _delete_profile(data)}
        await call(request, "updateDeleteProfile", path=path, body=profile)
        return done(here, "Delete profile changed")
    if action == "protection":
        body = {"protected": data.get("protected") == "true"}
        await call(request, "setWarehouseProtection", path=path, body=body)
        return done(here, "Protection changed")
    if action == "undrop":
        target = {"type": data.get("type", "table"), "id": data.get("id", "")}
        if data.get("new-name"):
            target["new-name"] = data["new-name"]
        await call(request, "undropTabulars", path=path, body={"targets": [target]})
        return done(here, f"Restored {data.get('name', 'it')}")
    raise ApiError(404, "NotFoundException", f"No such action: {action}")


# -- namespaces --------------------------------------------------------------------------------
@page
async def namespace(request: Request) -> Response:
    wid = request.path_params["warehouse_id"]
    levels = ns_levels(request)
    moment: Moment = request.state.moment
    context: dict[str, Any] = {"wid": wid, "levels": levels}
    if moment.active:
        held = (await as_of_catalog(request, wid))["warehouses"].get(wid, {"namespaces": {}})
        ns = held["namespaces"].get(SEP.join(levels))
        if ns is None:
            dotted = ".".join(levels)
            raise ApiError(
                404, "NoSuchNamespaceException", f"Namespace did not exist then: {dotted}"
            )
        context["properties"] = ns["properties"]
        context["children"] = [
            n["namespace"] for n in held["namespaces"].values() if n["namespace"][:-1] == levels
        ]
        context["tables"] = [t["name"] for t in ns["tables"] if not t.get("soft-deleted")]
        context["views"] = [v["name"] for v in ns["views"] if not v.get("soft-deleted")]
    else:
        segment = {"prefix": wid, "namespace": namespace_segment(levels)}
        # Each part may be refused on its own (shown in place): someone with a grant below
        # the namespace loads it and lists the way to what they hold (docs/auth.md, "What
        # each right allows"); the page fails only when every part does.
        loaded, context["properties_error"] = await attempt(
            call(request, "loadNamespace", path=segment)
        )
        context["properties"] = (loaded or {}).get("properties", {})
        children, children_error = await attempt(
            call(
                request, "listNamespaces", path={"prefix": wid}, query={"parent": ns_param(levels)}
            )
        )
        tables, tables_error = await attempt(call(request, "listTables", path=segment))
        views, views_error = await attempt(call(request, "listViews", path=segment))
        if loaded is None and children is None and tables is None and views is None:
            refused = context["properties_error"] or children_error or tables_error or views_error
            assert refused is not None
            raise refused
        context["children"] = (children or {}).get("namespaces", [])
        context["tables"] = [t["name"] for t in (tables or {}).get("identifiers", [])]
        context["views"] = [v["name"] for v in (views or {}).get("identifiers", [])]
    context["events"], context["events_error"] = await attempt(
        _history(request, {"warehouse-id": wid, "namespace": ".".join(levels)})
    )
    nid, nid_error = await attempt(
        call(
            request,
            "getNamespaceId",
            path={"warehouse_id": wid},
            query={"namespace": SEP.join(levels)},
        )
    )
    if nid is None:
        context["access"] = (None, nid_error)
    else:
        context["access"] = await my_access(
            request, "namespace", {"namespace_id": str(nid["namespace-id"])}
        )
    context["access_url"] = f"/ui/warehouses/{wid}/namespace/access?" + urlencode(
        {"ns": ns_param(levels)}
    )
    return render(request, "namespace.html", context)


# -- tables and views --------------------------------------------------------------------------
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
    store = services(request).catalog.events
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
    context["access"] = await my_access(request, kind, {"warehouse_id": wid, f"{kind}_id": tid})
    context["access_url"] = f"/ui/warehouses/{wid}/{kind}/access?" + urlencode(
        {"ns": ns_param(levels), "name": name}
    )
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
async def task(request: Request) -> Response:
    """One task (an expiration or a purge) with every attempt, from its own events."""
    wid, tid = request.path_params["warehouse_id"], request.path_params["task_id"]
    found = await call(request, "getTask", path={"warehouse_id": wid, "task_id": tid})
    logged = await call(request, "listEvents", query={"aggregate-id": tid, "limit": 1000})
    context = {
        "warehouse_id": wid,
        "task": found,
        "attempts": history.task_attempts(logged["events"]),
    }
    return render(request, "task.html", context)


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


# -- status --------------------------------------------------------------------------------------
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
            chain = AuditChain(services(request).catalog.recorder)
            context["verdict"] = await asyncio.to_thread(chain.verify)
    return render(request, "status.html", context)


async def not_found(request: Request) -> Response:
    request.state.moment = Moment(None, None, None)
    path = request.url.path
    return error_page(request, ApiError(404, "NotFoundException", f"No console page {path}"))


# -- login ------------------------------------------------------------------------------------
def _plain(request: Request) -> None:
    """A page outside the session: no as-of, nobody logged in."""
    request.state.moment = Moment(None, None, None)


async def login(request: Request) -> Response:
    _plain(request)
    if not session.enabled(request):
        return RedirectResponse("/ui/projects", status_code=303)
    code = request.query_params.get("reason", "required")
    context = {
        "reason": session.REASONS.get(code, session.REASONS["required"]),
        "next": session.safe_next(request.query_params.get("next")),
        "provider": urlsplit(request.app.state.services.settings.auth.provider_uris[0]).netloc,
    }
    return render(request, "login.html", context)


def _too_many(request: Request) -> Response | None:
    """The 429 page when this address is over its rate (shared with the token endpoint):
    a login's start and callback reach the provider."""
    wait = rate_limited(request)
    if wait is None:
        return None
    error = ApiError(429, "TooManyRequestsException", "Too many logins from this address")
    response = error_page(request, error)
    response.headers["Retry-After"] = str(wait)
    return response


async def login_start(request: Request) -> Response:
    _plain(request)
    if not session.enabled(request):
        return RedirectResponse("/ui/projects", status_code=303)
    limited = _too_many(request)
    if limited is not None:
        return limited
    try:
        return await session.start(request)
    except (OSError, ValueError, ProviderBusy) as exc:
        error = ApiError(503, "ServiceUnavailableException", f"The identity provider: {exc}")
        return error_page(request, error)


async def callback(request: Request) -> Response:
    _plain(request)
    if not session.enabled(request):
        return RedirectResponse("/ui/projects", status_code=303)
    limited = _too_many(request)
    if limited is not None:
        return limited
    try:
        token, lifetime, to = await session.finish(request)
    except session.LoginNeeded as refused:
        context = {"reason": refused.reason, "next": "/ui/projects", "failed": True, "provider": ""}
        return render(request, "login.html", context, status=401)
    return session.signed_in(request, token, lifetime, to)


async def logout(request: Request) -> Response:
    """POST only, and only from the console's own pages: a cross-site form must not log the
    user out (the session cookie's SameSite=Lax does not stop a Set-Cookie that deletes it)."""
    if not _same_origin(request) or request.headers.get("sec-fetch-site") == "cross-site":
        _plain(request)
        return error_page(request, ApiError(403, "ForbiddenException", "A form from another site"))
    return session.signed_out(request, "/ui/login?reason=out")

"""What every console page (`/ui`) is made in: the as-of moment it is shown at, its links,
the `page` wrapper (login, same-origin forms, errors as pages), rendering a Jinja2 template
(api/console/templates/), and the calls many pages make. The pages themselves, one module a
family: projects.py, warehouses.py (and namespaces), tabulars.py (tables and views),
access.py, log.py, status.py, login.py; each calls the API's operations in-process
(api/console/calls.py)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from icelog.api.console import history, session
from icelog.api.console.calls import ApiError, call
from icelog.api.http import ascii_int

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
# How many as-of pages a page reads at most (each holds up to 1000 namespaces, tables and
# views).
AS_OF_PAGES = 20

Handler = Callable[[Request], Awaitable[Response]]


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
            if request.method == "POST" and not same_origin(request):
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


def same_origin(request: Request) -> bool:
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


# An action of an object's form: (request, the object's id, the form) -> the answer.
Action = Callable[[Request, str, dict[str, str]], Awaitable[Response]]


def actions(key: str, table: dict[str, Action]) -> Handler:
    """The page a form of an object posts to (`.../{action}`): the object named by the path
    parameter `key`, the form read, then the action it names (another is a 404 page)."""

    async def act(request: Request) -> Response:
        ident = request.path_params[key]
        action = request.path_params["action"]
        data = await form(request)
        chosen = table.get(action)
        if chosen is None:
            raise ApiError(404, "NotFoundException", f"No such action: {action}")
        return await chosen(request, ident, data)

    return page(act)


def rename(operation: str, key: str, back: str, message: str) -> Action:
    """A rename form's action: `operation` on the object (path parameter `key`) with the
    name typed, then back to its page (`back`, `{}` standing for its id)."""

    async def act(request: Request, ident: str, data: dict[str, str]) -> Response:
        body = {"new-name": data.get("name")}
        await call(request, operation, path={key: ident}, body=body)
        return done(back.format(ident), message)

    return act


async def with_access(
    request: Request, context: dict[str, Any], kind: str, path: dict[str, str], url: str
) -> dict[str, Any]:
    """`context` with the caller's access to the object (the "my access" panel) and the
    link to its assignments."""
    context["access"] = await my_access(request, kind, path)
    context["access_url"] = url
    return context


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

"""loadTable's short way: its route as a plain ASGI app, and a lane that reaches it directly.

loadTable is the request every engine sends most (each Spark task, each refresh). Two layers
of Starlette stand between the middleware and its answer, measured in process (a 1-snapshot
table, PostgreSQL): the router (~13 us: the candidate routes' patterns, the child scope) and
the exception middleware (~3 us), and a function endpoint adds `request_response` (a
Request, an exception wrapper, a Response object and its header rendering) and the typed
edge's call layer.

`HotLoadTable` is the route's ASGI app: for GET it runs the route's guard as `serve` does,
builds the answer with the same function as the endpoint (`tables.load_table_answer`) and
sends it as two ASGI messages; HEAD goes to the regular endpoint.

`LoadTableLane` is a middleware just inside authentication: a GET whose path the router
would send to loadTable is given to `HotLoadTable` at once, with the path parameters and the
route set on the scope as the router sets them, and the catalog's errors rendered by the
app's own handlers as the exception middleware renders them. It takes a path only when the
loadTable route's own pattern matches it and no GET route listed before it does (such as
`.../tables/{table}/credentials` of the unprefixed API, which a prefixed loadTable path can
also spell), so the lane answers exactly the requests the router would have given it.
Everything outside (request ids, metrics, access log, timeouts, authentication) is unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, request_response
from starlette.types import ASGIApp, Receive, Scope, Send

from icelog.api.adapters.starlette import enter_route, route_path
from icelog.api.edge import Operation, guard_request, serve
from icelog.api.routes.tables import load_table_answer
from icelog.domain.errors import CatalogError

_JSON = (b"content-type", b"application/json")

ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]


class HotLoadTable:
    """The ASGI app of the loadTable route (GET; HEAD through the regular endpoint)."""

    def __init__(self, operation: Operation) -> None:
        self.operation = operation
        self.regular = request_response(serve(operation))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "GET":
            await self.regular(scope, receive, send)
            return
        await self.get(scope, receive, send)

    async def get(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        await guard_request(self.operation, request, {})
        answer = await load_table_answer(request)
        assert answer is not None, "only HEAD has no answer"
        status, body, etag = answer
        headers: list[tuple[bytes, bytes]] = []
        if etag is not None:
            headers.append((b"etag", etag.encode("latin-1")))
        if status != 304:
            headers += [(b"content-length", b"%d" % len(body)), _JSON]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class _Way:
    """One loadTable route, and the GET routes listed before it that may match its paths."""

    __slots__ = ("app", "earlier", "route")

    def __init__(self, route: Route, app: HotLoadTable, earlier: list[BaseRoute]) -> None:
        self.route = route
        self.app = app
        self.earlier = earlier


def _may_share_a_get(route: BaseRoute, of: Route) -> bool:
    """Whether `route` might also take a GET of one of `of`'s paths: any route but a plain
    one (mounts, `{...:path}` parameters) might; a plain route only with as many segments
    (a `{param}` never holds a '/') and GET among its methods."""
    if not isinstance(route, Route) or ":path}" in route.path:
        return True
    if route.methods is not None and "GET" not in route.methods:
        return False
    return route.path.count("/") == of.path.count("/")


class LoadTableLane:
    """See the module: GET loadTable straight to its route's app, past the router."""

    def __init__(
        self, app: ASGIApp, *, routes: list[BaseRoute], handlers: dict[type, ErrorHandler]
    ) -> None:
        self.app = app
        self._handlers = handlers
        self._ways: list[_Way] = []
        for index, route in enumerate(routes):
            if isinstance(route, Route) and isinstance(route.app, HotLoadTable):
                earlier = [r for r in routes[:index] if _may_share_a_get(r, route)]
                self._ways.append(_Way(route, route.app, earlier))

    def _way(self, scope: Scope) -> tuple[_Way, dict[str, Any]] | None:
        path = route_path(scope)
        for way in self._ways:
            found = way.route.path_regex.match(path)
            if found is None:
                continue
            for other in way.earlier:
                # Any earlier route whose pattern matches: the router decides (its order).
                if not isinstance(other, Route) or other.path_regex.match(path):
                    return None
            return way, found.groupdict()
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        taken = self._way(scope) if scope["type"] == "http" and scope["method"] == "GET" else None
        if taken is None:
            await self.app(scope, receive, send)
            return
        way, params = taken
        # As the router would: the route (the template that metrics and the access log
        # name), its endpoint and the path parameters.
        enter_route(scope, way.route, params)
        try:
            await way.app.get(scope, receive, send)
        except (CatalogError, HTTPException) as exc:
            # The app's handlers, as the exception middleware would call them (a failure
            # is raised before anything is sent: the answer is sent last).
            kind = CatalogError if isinstance(exc, CatalogError) else HTTPException
            handler = self._handlers[kind]
            response = await handler(Request(scope, receive), exc)
            await response(scope, receive, send)
            exc.__traceback__ = None

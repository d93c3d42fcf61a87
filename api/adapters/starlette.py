"""What icelog's fast paths rely on in Starlette's routing (written for starlette 1.x).

- `IndexedRouter`: Starlette's Router with its matching loop (`Router.app`) run over the
  few routes that can match a path, not over every route (see the class).
- `route_path(scope)`: the path routes match (the scope's path less its `root_path`).
  Starlette computes it with its private `_utils.get_route_path`, in its Router and Mount;
  the lane must take the path exactly as the router would, so it uses the same function.
- `enter_route(scope, route, params)`: what `Router.app` and `Route.matches` put on the
  scope before a route's app runs (the route, its endpoint, the path parameters merged
  into those a mount set), for a request the lane hands to a route past the router.
"""

from __future__ import annotations

from typing import Any

from starlette._utils import get_route_path
from starlette.routing import BaseRoute, Match, Route, Router
from starlette.types import Receive, Scope, Send

WRITTEN_FOR = ((1, 0), (2, 0))  # starlette versions: from, up to (excluded)


def route_path(scope: Scope) -> str:
    """The path of `scope` that routes match."""
    return get_route_path(scope)


def enter_route(scope: Scope, route: Route, params: dict[str, Any]) -> None:
    """Set `scope` as the router sets it for `route` matched with `params` (plain strings:
    no convertors)."""
    scope["route"] = route
    scope["endpoint"] = route.endpoint
    held = scope.get("path_params")
    scope["path_params"] = {**held, **params} if held else params


_Key = tuple[int, str]


def _shape(route: BaseRoute) -> _Key | None:
    """(segment count, first segment) of a route that can only match paths of that shape."""
    if not isinstance(route, Route) or ":path}" in route.path:
        return None
    segments = route.path.split("/")
    first = segments[1] if len(segments) > 1 else ""
    if "{" in first:
        return None
    return len(segments), first


def _path_shape(path: str) -> _Key:
    segments = path.split("/", 2)
    return path.count("/") + 1, segments[1] if len(segments) > 1 else ""


class IndexedRouter(Router):
    """A Starlette router that tries only the routes that can match a path.

    Starlette's router tries every route's regular expression in order until one matches; a
    prefixed route is preceded by every unprefixed one (a loadNamespace over HTTP cost ~25 %
    more server CPU without the index). A plain route's template fixes its number of path
    segments (a `{param}` never holds a '/') and usually its first segment, so the routes are
    grouped by (segment count, first segment) once, and a request is matched against its own
    group only — in the original order, so which route wins (unprefixed before prefixed, the
    first of several methods as the 405 candidate) is exactly what Starlette would pick.

    Routes whose shape is not fixed (a `{...:path}` parameter, a parameter as the first
    segment, mounts and anything else) are tried for every path, in their original place.
    When the group yields neither a match nor a method mismatch, the request goes to
    Starlette's own matching (404, trailing-slash redirects), so behaviour never differs.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._groups: dict[_Key, list[BaseRoute]] = {}
        self._anywhere: list[BaseRoute] = []
        self._indexed = 0

    def _index(self) -> None:
        """(Re)build the groups; routes are read once, and again only if the list grows."""
        shapes = [_shape(route) for route in self.routes]
        self._anywhere = [r for r, s in zip(self.routes, shapes, strict=True) if s is None]
        self._groups = {}
        for key in {s for s in shapes if s is not None}:
            self._groups[key] = [
                r for r, s in zip(self.routes, shapes, strict=True) if s is None or s == key
            ]
        self._indexed = len(self.routes)

    def candidates(self, path: str) -> list[BaseRoute]:
        """The routes that can match `path`, in their original order."""
        if self._indexed != len(self.routes):
            self._index()
        return self._groups.get(_path_shape(path), self._anywhere)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().app(scope, receive, send)
            return
        if "router" not in scope:
            scope["router"] = self
        candidates = self.candidates(route_path(scope))
        partial: BaseRoute | None = None
        partial_scope: Scope = {}
        for route in candidates:
            match, child_scope = route.matches(scope)
            if match is Match.FULL:
                scope["route"] = route
                scope.update(child_scope)
                await route.handle(scope, receive, send)
                return
            if match is Match.PARTIAL and partial is None:
                partial, partial_scope = route, child_scope
        if partial is not None:
            scope["route"] = partial
            scope.update(partial_scope)
            await partial.handle(scope, receive, send)
            return
        await super().app(scope, receive, send)

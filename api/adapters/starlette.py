"""What icelog's loadTable lane relies on in Starlette's routing (written for starlette 1.x).

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
from starlette.routing import Route
from starlette.types import Scope

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

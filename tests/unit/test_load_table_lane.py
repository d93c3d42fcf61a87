"""The loadTable lane takes exactly the GETs that the router would give to loadTable."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.routing import BaseRoute, Match

from icelog.api.app import routes
from icelog.api.hot_load import HotLoadTable, LoadTableLane
from tests.support.route_paths import concrete

ROUTES = routes()
TEMPLATES = sorted({r.path for r in ROUTES if hasattr(r, "path")})
WORDS = st.sampled_from(
    ["namespaces", "tables", "credentials", "views", "v1", "metrics", "x", "a%1Fb", "%2F"]
)


async def _unused(scope: object, receive: object, send: object) -> None:
    raise AssertionError("not called")


LANE = LoadTableLane(_unused, routes=ROUTES, handlers={})


def scope_of(path: str, method: str = "GET") -> dict[str, object]:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}


def routed(path: str) -> BaseRoute | None:
    """The route Starlette's own matching gives a GET of `path` (first full match)."""
    for route in ROUTES:
        match, _ = route.matches(scope_of(path))
        if match is Match.FULL:
            return route
    return None


@settings(max_examples=500, deadline=None)
@given(
    template=st.sampled_from(TEMPLATES),
    values=st.lists(WORDS, min_size=4, max_size=4),
    suffix=st.sampled_from(["", "/", "/credentials", "/metrics"]),
)
def test_the_lane_takes_a_get_only_where_the_router_would_load_a_table(
    template: str, values: list[str], suffix: str
) -> None:
    path = concrete(template, values) + suffix
    route = routed(path)
    taken = LANE._way(scope_of(path))
    to_load_table = route is not None and isinstance(getattr(route, "app", None), HotLoadTable)
    assert (taken is not None) == to_load_table, path
    if taken is not None:
        way, params = taken
        assert way.route is route
        assert route is not None
        _, child = route.matches(scope_of(path))
        assert params == child["path_params"]


def test_a_prefixed_path_spelling_an_unprefixed_credentials_route_is_left_to_the_router() -> None:
    # Prefix "namespaces", namespace "tables", table "credentials": the unprefixed
    # loadCredentials route is listed first, so the router gives it that path.
    path = "/catalog/v1/namespaces/namespaces/tables/tables/credentials"
    route = routed(path)
    assert route is not None
    assert not isinstance(getattr(route, "app", None), HotLoadTable)
    assert LANE._way(scope_of(path)) is None


def test_the_lane_takes_plain_load_table_paths_with_their_parameters() -> None:
    taken = LANE._way(scope_of("/catalog/v1/wh/namespaces/a%1Fb/tables/t%2Bu"))
    assert taken is not None
    way, params = taken
    assert way.route.path == "/catalog/v1/{prefix}/namespaces/{namespace}/tables/{table}"
    assert params == {"prefix": "wh", "namespace": "a%1Fb", "table": "t%2Bu"}
    unprefixed = LANE._way(scope_of("/catalog/v1/namespaces/db/tables/t"))
    assert unprefixed is not None
    assert unprefixed[0].route.path == "/catalog/v1/namespaces/{namespace}/tables/{table}"

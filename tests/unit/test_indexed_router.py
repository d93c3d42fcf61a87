"""The indexed router picks exactly the route Starlette's own matching would."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.routing import BaseRoute, Match

from icelog.api.adapters.starlette import IndexedRouter
from icelog.api.app import routes
from tests.support.route_paths import concrete

ROUTES = routes()
ROUTER = IndexedRouter(ROUTES)
TEMPLATES = sorted({r.path for r in ROUTES if hasattr(r, "path")})
# Segment values that collide with the templates' literals make the interesting cases.
WORDS = st.sampled_from(
    ["namespaces", "tables", "views", "v1", "config", "rename", "metrics", "x", "a%1Fb", "%2F"]
)


def choice(candidates: list[BaseRoute], method: str, path: str) -> tuple[Any, Any]:
    """(first full match, first partial match) among `candidates`, Starlette's rule."""
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}
    full = partial = None
    for route in candidates:
        match, _ = route.matches(scope)
        if match is Match.FULL and full is None:
            full = route
        elif match is Match.PARTIAL and partial is None:
            partial = route
    return full, partial


@settings(max_examples=400, deadline=None)
@given(
    template=st.sampled_from(TEMPLATES),
    values=st.lists(WORDS, min_size=4, max_size=4),
    method=st.sampled_from(["GET", "POST", "DELETE", "HEAD", "PUT"]),
    suffix=st.sampled_from(["", "/", "/extra"]),
)
def test_same_route_as_starlette(
    template: str, values: list[str], method: str, suffix: str
) -> None:
    path = concrete(template, values) + suffix
    indexed = choice(ROUTER.candidates(path), method, path)
    assert indexed == choice(ROUTES, method, path), path


def test_prefixed_load_table_is_tried_against_few_routes() -> None:
    path = "/catalog/v1/wh/namespaces/db/tables/t"
    assert len(ROUTER.candidates(path)) < len(ROUTES) / 5
    full, _ = choice(ROUTER.candidates(path), "GET", path)
    assert full is not None
    assert full.path == "/catalog/v1/{prefix}/namespaces/{namespace}/tables/{table}"

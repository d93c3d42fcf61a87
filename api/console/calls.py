"""The console's way into the catalog: the API's own operations, called in-process.

A page does not send HTTP requests to its own server. It calls the same `Operation` a
REST client reaches (api/catalog_api.py, api/management_api.py) on a request derived from
the browser's: the same caller (the principal the console authenticated), the operation's
path parameters, query and body. So the page runs exactly the API's code — validation,
the route's guard (api/auth/guards.py), the handler, its read model — and a user sees in
the console only what the API would show them. A refusal or any other catalog error comes
back as `ApiError`, with the API's status, type and message, for the page to show as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import Message

from icelog.api.catalog_api import CATALOG_OPERATIONS
from icelog.api.edge import Operation, serve
from icelog.api.management_api import MANAGEMENT_OPERATIONS
from icelog.domain.errors import CatalogError

__all__ = ["ApiError", "call", "namespace_segment", "operation"]

_BY_NAME: dict[str, Operation] = {
    **{op.name: op for op in CATALOG_OPERATIONS},
    **{op.name: op for op in MANAGEMENT_OPERATIONS},
}


@dataclass
class ApiError(Exception):
    """An answer the API would have given as an error: status, Iceberg type, message."""

    status: int
    type: str
    message: str

    def __str__(self) -> str:
        return f"{self.status} {self.type}: {self.message}"


def operation(name: str) -> Operation:
    """An API operation by its operationId (`loadTable`, `getWarehouse`, ...)."""
    return _BY_NAME[name]


def namespace_segment(levels: list[str] | tuple[str, ...]) -> str:
    """A namespace as the catalog's path segment: levels percent-encoded, joined by %1F."""
    return "%1F".join(quote(level, safe="") for level in levels)


def _derived(
    request: Request,
    op: Operation,
    path: Mapping[str, str],
    query: Mapping[str, Any] | None,
    body: bytes,
    headers: Mapping[str, str] | None,
) -> Request:
    scope = dict(request.scope)
    scope["method"] = op.method
    scope["path_params"] = dict(path)
    scope["query_string"] = urlencode(
        {k: v for k, v in (query or {}).items() if v is not None}, doseq=True
    ).encode()
    kept = [
        (name, value)
        for name, value in request.scope["headers"]
        if name in (b"x-request-id", b"user-agent")
    ]
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope["headers"] = [*kept, *extra, (b"content-type", b"application/json")]
    # The same caller: the principal, and the principals the guards read once per request.
    # Nothing else: what a guard leaves for its handler (capabilities, a list's filter)
    # belongs to one call, not to every call the page makes.
    shared = request.scope.setdefault("state", {})
    scope["state"] = {k: shared[k] for k in ("principal", "principals") if k in shared}
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(scope, receive)


async def call(
    request: Request,
    name: str,
    *,
    path: Mapping[str, str] | None = None,
    query: Mapping[str, Any] | None = None,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """Run the API operation `name` as the caller of `request`; its JSON answer (None for
    204). Raises `ApiError` with what the API would have answered."""
    op = operation(name)
    raw = b"" if body is None else orjson.dumps(body)
    derived = _derived(request, op, path or {}, query, raw, headers)
    try:
        response = await serve(op)(derived)
    except CatalogError as exc:
        raise ApiError(exc.status, exc.error_type, exc.message) from None
    except HTTPException as exc:
        raise ApiError(exc.status_code, "RESTException", str(exc.detail)) from None
    content = bytes(response.body)
    if response.status_code >= 400:
        error = orjson.loads(content).get("error", {}) if content else {}
        raise ApiError(response.status_code, error.get("type", "Error"), error.get("message", ""))
    return orjson.loads(content) if content else None

"""Small HTTP helpers shared by the route modules."""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote_plus

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from icelog.domain.context import RequestContext
from icelog.domain.errors import BadRequestError
from icelog.domain.identifiers import NamespaceName
from icelog.domain.json_limits import check_json_depth

_SEPARATOR = re.compile("%1f|\x1f", re.IGNORECASE)

Handler = Callable[[Request, Any], Response]
AsyncHandler = Callable[[Request, Any], Awaitable[Response]]


def json_response(
    payload: Any, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        orjson.dumps(payload), status_code=status, media_type="application/json", headers=headers
    )


def raw_json_response(body: bytes, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status_code=200, media_type="application/json", headers=headers)


def no_content() -> Response:
    return Response(status_code=204)


async def read_json(request: Request) -> Any:
    if request.method not in ("POST", "PUT", "PATCH"):
        return None
    # The size limit (413) is enforced while the body streams in (api/observability.py).
    body = await request.body()
    if not body.strip():
        return None
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequestError(f"Malformed JSON body: {exc}") from None
    check_json_depth(parsed, "The request body")
    return parsed


def endpoint(fn: Handler | AsyncHandler) -> Callable[[Request], Awaitable[Response]]:
    """Read the body on the event loop, then run the handler: synchronous handlers go to
    the threadpool (the event store library is synchronous), async ones stay on the loop."""

    async def run(request: Request) -> Response:
        body = await read_json(request)
        if inspect.iscoroutinefunction(fn):
            response: Response = await fn(request, body)
            return response
        return await run_in_threadpool(fn, request, body)  # type: ignore[arg-type]

    run.__name__ = fn.__name__
    return run


def parse_uuid(value: Any, what: str) -> uuid.UUID:
    """An id from a path, query or body; 400 when it is not a UUID."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise BadRequestError(f"{what} must be a UUID, got {value!r}") from None


def context(request: Request) -> RequestContext:
    request_id = request.headers.get("x-request-id") or str(uuid.uuid4())
    return RequestContext(actor="anonymous", request_id=request_id[:128])


def path_param(request: Request, name: str) -> str:
    """Path params arrive still percent-encoded (see RawPathMiddleware): decode here.
    Java encodes with URLEncoder (space → '+'), and every client sends '+' as %2B."""
    return unquote_plus(request.path_params[name])


def namespace_param(request: Request) -> NamespaceName:
    """Split on the separator BEFORE decoding, so an encoded '%2F' inside a level stays."""
    raw = request.path_params["namespace"]
    levels = tuple(unquote_plus(part) for part in _SEPARATOR.split(raw))
    if any(not level for level in levels):
        raise BadRequestError(f"Invalid namespace: {unquote_plus(raw)!r}")
    return NamespaceName(levels)


def namespace_from_query(value: str) -> NamespaceName:
    levels = tuple(_SEPARATOR.split(value))
    if any(not level for level in levels):
        raise BadRequestError(f"Invalid namespace: {value!r}")
    return NamespaceName(levels)


def namespace_from_json(value: Any, field: str = "namespace") -> NamespaceName:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(level, str) and level for level in value)
    ):
        raise BadRequestError(f"{field} must be a non-empty array of non-empty strings")
    return NamespaceName(tuple(value))


def require_object(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequestError(f"{what} must be a JSON object")
    return body


def page_params(request: Request) -> tuple[str | None, int | None]:
    """Page only when asked: with no pageToken and no pageSize, everything (spec)."""
    token = request.query_params.get("pageToken") or None
    raw_size = request.query_params.get("pageSize")
    size: int | None = None
    if raw_size not in (None, ""):
        try:
            size = int(raw_size or "")
        except ValueError:
            raise BadRequestError("pageSize must be a positive integer") from None
        if size < 1:
            raise BadRequestError("pageSize must be a positive integer")
        size = min(size, 1000)
    elif token is not None:
        size = 100
    return token, size


class RawPathMiddleware:
    """Route catalog requests on the raw (still percent-encoded) path.

    The server decodes `%2F` to '/' and `%2B` to '+' before routing, which would split
    a namespace level holding '/' and make '+' (Java's space) ambiguous. Routing on the
    raw path keeps each segment intact; handlers decode segments themselves.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (
            scope["type"] == "http"
            and scope.get("raw_path")
            and scope["path"].startswith("/catalog/")
        ):
            scope = dict(scope)
            scope["path"] = scope["raw_path"].decode("latin-1")
        await self.app(scope, receive, send)

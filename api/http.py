"""Small HTTP helpers shared by the route modules."""

from __future__ import annotations

import re
import uuid
from typing import Any
from urllib.parse import unquote_plus

import orjson
from starlette.requests import Request
from starlette.responses import Response

from icelog.api.logs import request_id_var
from icelog.api.models.catalog import PageQuery
from icelog.domain.context import RequestContext
from icelog.domain.errors import BadRequestError
from icelog.domain.identifiers import NamespaceName

_SEPARATOR = re.compile("%1f|\x1f", re.IGNORECASE)


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


def ascii_int(text: str) -> int | None:
    """The non-negative integer `text` spells in ASCII digits, else None: str.isdigit()
    alone also accepts digits such as "²", which int() then refuses (a 500 once)."""
    return int(text) if text.isascii() and text.isdigit() else None


def parse_uuid(value: Any, what: str) -> uuid.UUID:
    """An id from a path, query or body; 400 when it is not a UUID."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise BadRequestError(f"{what} must be a UUID, got {value!r}") from None


def context(request: Request) -> RequestContext:
    """Who asks: the authenticated user (`oidc~<subject>`), or `anonymous` without a
    provider (api/auth/authenticate.py)."""
    # The observability middleware's id (the client's when usable), in the request's
    # context; a header or a new id only where no middleware ran (bare test apps).
    request_id = request_id_var.get() or request.headers.get("x-request-id") or str(uuid.uuid4())
    principal = getattr(request.state, "principal", None)
    actor = "anonymous" if principal is None else principal.user_id
    return RequestContext(actor=actor, request_id=request_id[:128])


def path_param(request: Request, name: str) -> str:
    """Path params arrive still percent-encoded (see RawPathMiddleware): decode here.
    Java encodes with URLEncoder (space → '+'), and every client sends '+' as %2B."""
    raw: str = request.path_params[name]
    # Most names need no decoding (unquote_plus would return them unchanged).
    return unquote_plus(raw) if "%" in raw or "+" in raw else raw


def namespace_param(request: Request) -> NamespaceName:
    """Split on the separator BEFORE decoding, so an encoded '%2F' inside a level stays."""
    raw: str = request.path_params["namespace"]
    if "%" not in raw and "+" not in raw and "\x1f" not in raw:
        levels: tuple[str, ...] = (raw,)  # one level, nothing to decode: the common case
    else:
        levels = tuple(unquote_plus(part) for part in _SEPARATOR.split(raw))
    if any(not level for level in levels):
        raise BadRequestError(f"Invalid namespace: {unquote_plus(raw)!r}")
    return NamespaceName(levels)


def namespace_from_query(value: str) -> NamespaceName:
    levels = tuple(_SEPARATOR.split(value))
    if any(not level for level in levels):
        raise BadRequestError(f"Invalid namespace: {value!r}")
    return NamespaceName(levels)


def page_of(query: PageQuery) -> tuple[str | None, int | None]:
    """(token, size) of a paged list: everything when neither is given (spec); a token
    alone pages by 100; a size is capped at 1,000."""
    size = query.page_size
    if size is None and query.page_token is not None:
        size = 100
    return query.page_token, min(size, 1000) if size is not None else None


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

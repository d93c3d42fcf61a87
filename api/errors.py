"""Error responses in the Iceberg ErrorModel shape, for every failure."""

from __future__ import annotations

import logging

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from domain.errors import CatalogError

log = logging.getLogger("icelog.api")

_HTTP_TYPES = {
    400: "BadRequestException",
    401: "NotAuthorizedException",
    403: "ForbiddenException",
    404: "NotFoundException",
    405: "MethodNotAllowedException",
    406: "UnsupportedOperationException",
    409: "ConflictException",
    413: "PayloadTooLargeException",
    422: "UnprocessableEntityException",
}


def error_response(status: int, error_type: str, message: str, *, head: bool = False) -> Response:
    """`{"error": {"message", "type", "code"}}`; HEAD responses carry no body."""
    body = (
        b""
        if head
        else orjson.dumps({"error": {"message": message, "type": error_type, "code": status}})
    )
    return Response(body, status_code=status, media_type="application/json")


async def catalog_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CatalogError)
    return error_response(exc.status, exc.error_type, exc.message, head=request.method == "HEAD")


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    message = (
        exc.detail
        if status != 404
        else f"No route for request: {request.method} {request.url.path}"
    )
    return error_response(
        status,
        _HTTP_TYPES.get(status, "RESTException"),
        str(message),
        head=request.method == "HEAD",
    )


async def unexpected_error(request: Request, exc: Exception) -> Response:
    # Never leak internals (paths, secrets) to clients; the log keeps the traceback.
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    error_type = (
        "CommitStateUnknownException" if request.method == "POST" else "InternalServerError"
    )
    return error_response(
        500, error_type, "Internal server error; see the server log", head=request.method == "HEAD"
    )

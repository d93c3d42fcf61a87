"""Error responses in the Iceberg ErrorModel shape, for every failure."""

from __future__ import annotations

import logging
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from icelog.domain.errors import CatalogError

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


# The requests whose 5xx Iceberg clients read as "the commit may have landed"
# (Java's tableCommitHandler / viewCommitHandler, PyIceberg's commit_table): a table commit,
# a multi-table transaction, a view replace. Matched on the route template, after routing.
_COMMIT_TEMPLATES = (
    "/namespaces/{namespace}/tables/{table}",
    "/transactions/commit",
    "/namespaces/{namespace}/views/{view}",
)


def is_commit(method: str, scope: Any) -> bool:
    """Whether the routed request is a commit (its outcome may be unknown after a 5xx)."""
    route = scope.get("route")
    template = getattr(route, "path", "")
    return (
        method == "POST"
        and template.startswith("/catalog/")
        and template.endswith(_COMMIT_TEMPLATES)
    )


async def unexpected_error(request: Request, exc: Exception) -> Response:
    # Never leak internals (paths, secrets) to clients; the log keeps the traceback.
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    if is_commit(request.method, request.scope):
        error_type = "CommitStateUnknownException"
        message = "Internal server error; the commit may or may not have been applied"
    else:
        error_type, message = "InternalServerError", "Internal server error; see the server log"
    return error_response(500, error_type, message, head=request.method == "HEAD")

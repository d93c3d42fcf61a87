"""Idempotency-Key on mutating catalog routes (Iceberg REST spec, 1.11+ clients).

The first final outcome of a key (2xx, or a deterministic 4xx) is recorded as an event;
a request that repeats the key within the advertised lifetime gets that outcome back
without running again — on any replica, because the record is in the shared log. Requests
with the same key in flight in one process wait for each other. 5xx outcomes are never
recorded (the spec: they are not final).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api.errors import error_response
from api.http import context
from api.routes import prefix, services
from domain.errors import BadRequestError, CatalogError, UnprocessableEntityError

log = logging.getLogger("icelog.idempotency")
HEADER = "idempotency-key"
# Outcomes that say nothing final about the request: not recorded, so a retry runs again.
_NOT_FINAL = {401, 403, 408, 419, 429}
_in_flight: dict[str, tuple[asyncio.Lock, int]] = {}


def applies(request: Request) -> bool:
    # The header first and the scope's path, not `request.url`: building the URL object
    # cost ~3 % of the server's CPU per commit, for requests that almost never carry a key.
    if HEADER not in request.headers or request.method not in ("POST", "DELETE"):
        return False
    path: str = request.scope["path"]
    return path.startswith("/catalog/") and not path.endswith("/metrics")


def _key(request: Request) -> str:
    raw = request.headers[HEADER].strip()
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        raise BadRequestError("Idempotency-Key must be a UUID (UUIDv7 in string form)") from None


def idempotent(
    endpoint: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a catalog endpoint so that requests carrying an Idempotency-Key are replayed."""

    async def wrapped(request: Request) -> Response:
        if applies(request):
            return await run(request, lambda: endpoint(request))
        return await endpoint(request)

    return wrapped


async def run(request: Request, handler: Callable[[], Awaitable[Response]]) -> Response:
    svc = services(request)
    key = _key(request)
    lifetime_ms = svc.settings.idempotency_lifetime_seconds * 1000
    lock, users = _in_flight.get(key, (asyncio.Lock(), 0))
    _in_flight[key] = (lock, users + 1)
    try:
        async with lock:
            record = await run_in_threadpool(svc.catalog.find_idempotency, key)
            fresh = record is not None and (
                time.time() * 1000 - record.recorded_at_ms <= lifetime_ms
            )
            if record is not None and fresh:
                if (record.method, record.path) != (request.method, request.url.path):
                    raise UnprocessableEntityError(
                        "Idempotency-Key was already used for a different request"
                    )
                body = record.body.encode()
                if record.metadata_location is not None:
                    document = await run_in_threadpool(
                        svc.catalog.metadata_document,
                        svc.warehouse_for_prefix(prefix(request)),
                        record.metadata_location,
                    )
                    body = orjson.dumps({**orjson.loads(body), "metadata": document})
                return Response(
                    body or None,
                    status_code=record.status,
                    media_type="application/json" if body else None,
                )
            try:
                response = await handler()
            except CatalogError as exc:
                # Rendered here (not by the app's handler) so a final 4xx is recorded too.
                response = error_response(exc.status, exc.error_type, exc.message)
            if response.status_code < 500 and response.status_code not in _NOT_FINAL:
                try:
                    await run_in_threadpool(_record, request, key, response, lifetime_ms)
                except Exception:
                    # The outcome stands; only a retry with this key would run again.
                    log.warning("could not record Idempotency-Key outcome", exc_info=True)
            return response
    finally:
        # Forget the lock once no request with this key is running or waiting.
        lock, users = _in_flight[key]
        if users <= 1:
            del _in_flight[key]
        else:
            _in_flight[key] = (lock, users - 1)


def _record(request: Request, key: str, response: Response, lifetime_ms: int) -> None:
    body = bytes(response.body)
    location = None
    if body:
        parsed = orjson.loads(body)
        if isinstance(parsed, dict) and "metadata" in parsed and parsed.get("metadata-location"):
            # Keep the location, not the document: the file is immutable.
            location = str(parsed["metadata-location"])
            parsed.pop("metadata")
            body = orjson.dumps(parsed)
    services(request).catalog.record_idempotency(
        context(request),
        key=key,
        method=request.method,
        path=request.url.path,
        status=response.status_code,
        body=body.decode(),
        metadata_location=location,
        lifetime_ms=lifetime_ms,
    )

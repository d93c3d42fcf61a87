"""Per-request observability and limits, in one pure-ASGI middleware (one pass, no thread hop):

- request id: `X-Request-ID` from the request (1 to 128 visible ASCII characters) or a new
  one (16 random hex digits per process, then a counter); echoed in the response and set
  as the request's context variable (`logs.request_id_var`), so the events the request
  appends (api/http.py `context()`) carry the same id as its log lines;
- metrics: count and latency by route template, method and status; 409
  `CommitFailedException` answers as rejected commit conflicts (api/metrics.py);
- access log: one line per request on logger `icelog.access` (api/logs.py), without the
  query string, headers or body;
- body limit: a body over `max_body_bytes` (declared or streamed) is refused with 413 before
  any handler acts on it;
- timeout: a request still unanswered after `timeout_s` is answered 504
  (`CommitStateUnknownException` for commits, which land whole or not at all;
  `ServiceUnavailableException` for other writes, which may still complete) or 503
  `ServiceUnavailableException` (reads). A handler running in the threadpool cannot be
  interrupted: the request's `Cancellation` (domain/cancellation.py) is set, and the
  handler stops at its next safe point; whatever it answers is dropped.

The readiness probe behind `GET /ready` lives here too.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import secrets
import time
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from icelog.api.errors import error_response, is_commit, unexpected_error
from icelog.api.logs import ACCESS_LOGGER, request_id_var
from icelog.api.metrics import UNMATCHED, Metrics
from icelog.api.publishing import LogAccess
from icelog.api.services import Services
from icelog.domain.cancellation import Cancellation, bind, unbind

access_log = logging.getLogger(ACCESS_LOGGER)
log = logging.getLogger("icelog.api")

REQUEST_ID_HEADER = b"x-request-id"
_VALID_REQUEST_ID = re.compile(rb"[\x21-\x7e]{1,128}")
_WRITES = frozenset(("POST", "PUT", "DELETE", "PATCH"))
_COMMIT_FAILED = b'"CommitFailedException"'
# Generated ids: random per process, then a counter (a UUID costs a syscall per request).
_ID_PREFIX = secrets.token_hex(8)
_ID_COUNTER = itertools.count(1)


class BodyTooLarge(HTTPException):
    """Raised from `receive`: the app's HTTP error handler renders the Iceberg 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            413,
            f"Request body too large: the limit is {limit} bytes (ICELOG_MAX_REQUEST_BODY_MB)",
        )


class _Exchange:
    """The state of one request/response exchange as the middleware sees it."""

    __slots__ = (
        "cancellation",
        "declared",
        "ended",
        "finished",
        "limit",
        "method",
        "metrics",
        "read",
        "receive_app",
        "request_id",
        "request_id_header",
        "scope",
        "send_app",
        "started",
        "status",
        "timed_out",
        "timeout_task",
    )

    def __init__(
        self,
        metrics: Metrics,
        request_id: str,
        method: str,
        receive: Receive,
        send: Send,
        limit: int,
        declared: int | None,
        scope: Scope,
    ) -> None:
        self.metrics = metrics
        self.scope = scope
        self.cancellation = Cancellation()
        self.request_id = request_id
        self.request_id_header = (REQUEST_ID_HEADER, request_id.encode("ascii"))
        self.method = method
        self.receive_app = receive
        self.send_app = send
        self.limit = limit
        self.declared = declared
        self.read = 0
        self.started = False
        self.ended = False
        self.timed_out = False
        self.status = 500
        self.finished = 0.0
        self.timeout_task: asyncio.Task[None] | None = None

    async def receive(self) -> Message:
        if self.declared is not None and self.declared > self.limit:
            raise BodyTooLarge(self.limit)
        message = await self.receive_app()
        body = message.get("body")
        if body:
            self.read += len(body)
            if self.read > self.limit:
                raise BodyTooLarge(self.limit)
        return message

    async def send(self, message: Message) -> None:
        if self.timed_out:
            return  # the client already has its 503/504; this late response is dropped
        kind = message["type"]
        if kind == "http.response.start":
            self.started = True
            self.status = message["status"]
            message = {**message, "headers": [*message.get("headers", ()), self.request_id_header]}
        elif kind == "http.response.body":
            if self.status == 409 and _COMMIT_FAILED in message.get("body", b""):
                self.metrics.conflicts_rejected.inc()
            if not message.get("more_body", False):
                self.ended = True
                self.finished = time.perf_counter()
        await self.send_app(message)

    def expire(self) -> None:
        """The deadline passed: answer now unless the response is already under way."""
        if self.started or self.timed_out:
            return
        self.timed_out = True
        self.cancellation.cancel()
        self.timeout_task = asyncio.get_running_loop().create_task(self._answer_timeout())

    async def _answer_timeout(self) -> None:
        self.metrics.timeouts.inc()
        if is_commit(self.method, self.scope):
            status, error_type = 504, "CommitStateUnknownException"
            message = (
                "The request timed out; the server may still complete it (a commit is applied "
                "entirely or not at all): reload to see its outcome"
            )
        elif self.method in _WRITES:
            status, error_type = 504, "ServiceUnavailableException"
            message = "The request timed out; it may still complete: reload to see its outcome"
        else:
            status, error_type = 503, "ServiceUnavailableException"
            message = "The request timed out; retry later"
        response = error_response(status, error_type, message, head=self.method == "HEAD")
        self.status = status
        self.started = True
        await self.send_app(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [*response.raw_headers, self.request_id_header],
            }
        )
        await self.send_app({"type": "http.response.body", "body": response.body})
        self.ended = True
        self.finished = time.perf_counter()
        log.warning("request timed out; answered %d while the handler runs on", status)


class _Watch:
    """The requests in flight on one event loop, by id(exchange): (deadline, exchange)."""

    __slots__ = ("in_flight", "task")

    def __init__(self) -> None:
        self.in_flight: dict[int, tuple[float, _Exchange]] = {}
        self.task: asyncio.Task[None] | None = None  # held: the loop keeps weak references


class ObservabilityMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics,
        max_body_bytes: int,
        timeout_s: float,
        access_log: bool = True,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.timeout_s = timeout_s
        # Off below INFO (ICELOG_LOG_LEVEL=warning), whatever the logging set-up says.
        self.access_log = access_log
        # Requests in flight, watched by one task per event loop (uvicorn has one; a test
        # client may run several): a timer per request (call_later + cancel) cost half of
        # this middleware.
        self._watches: dict[asyncio.AbstractEventLoop, _Watch] = {}
        self._tick_s = min(1.0, timeout_s / 10)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id: str | None = None
        declared: int | None = None
        for name, value in scope["headers"]:
            if name == REQUEST_ID_HEADER:
                if _VALID_REQUEST_ID.fullmatch(value):
                    request_id = value.decode("ascii")
            elif name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = None
        if request_id is None:
            # Generated (or the client's was unusable). Handlers read it from the context
            # variable (api/http.py `context()`), not from the request's headers: rewriting
            # them cost a copy of the scope and its headers on most requests.
            request_id = f"{_ID_PREFIX}-{next(_ID_COUNTER):012x}"
        token = request_id_var.set(request_id)
        method: str = scope["method"]
        exchange = _Exchange(
            self.metrics, request_id, method, receive, send, self.max_body_bytes, declared, scope
        )
        watch = self._watch(exchange) if self.timeout_s > 0 else None
        cancellation = bind(exchange.cancellation)
        try:
            await self.app(scope, exchange.receive, exchange.send)
        except Exception as exc:
            if exchange.timed_out:
                log.exception("request failed after it timed out", exc_info=exc)
            elif exchange.started:
                raise  # nothing else can be sent; the server closes the connection
            else:
                # Rendered here rather than by the outermost Starlette middleware, so the
                # answer carries the request id and is counted.
                response = await unexpected_error(Request(scope), exc)
                await response(scope, receive, exchange.send)
        finally:
            if watch is not None:
                watch.in_flight.pop(id(exchange), None)
            if exchange.timeout_task is not None:
                try:
                    await exchange.timeout_task
                except Exception:  # the client went away before its 503/504
                    log.debug("could not send the timeout answer", exc_info=True)
            self._record(scope, exchange, started)
            unbind(cancellation)
            request_id_var.reset(token)

    def _watch(self, exchange: _Exchange) -> _Watch:
        loop = asyncio.get_running_loop()
        watch = self._watches.get(loop)
        if watch is None:
            watch = self._watches[loop] = _Watch()
            watch.task = loop.create_task(self._expire_overdue(loop, watch))
        watch.in_flight[id(exchange)] = (loop.time() + self.timeout_s, exchange)
        return watch

    async def _expire_overdue(self, loop: asyncio.AbstractEventLoop, watch: _Watch) -> None:
        """Answer the requests past their deadline (within a tenth of the timeout, at most
        1 s, after it); ends when nothing is in flight, and is started again on demand."""
        try:
            while watch.in_flight:
                await asyncio.sleep(self._tick_s)
                now = loop.time()
                for deadline, exchange in list(watch.in_flight.values()):
                    if deadline <= now:
                        watch.in_flight.pop(id(exchange), None)
                        exchange.expire()
        finally:
            if self._watches.get(loop) is watch:
                del self._watches[loop]

    def _record(self, scope: Scope, exchange: _Exchange, started: float) -> None:
        ended = exchange.finished or time.perf_counter()
        seconds = ended - started
        route = scope.get("route")
        template: str = getattr(route, "path", UNMATCHED) if route is not None else UNMATCHED
        status = exchange.status if exchange.started else 500
        self.metrics.observe_request(exchange.method, template, status, seconds)
        if self.access_log and access_log.isEnabledFor(logging.INFO):
            raw = scope.get("raw_path")
            # The raw path is still percent-encoded: no control characters reach the log.
            path = raw.decode("latin-1") if raw else scope["path"]
            duration_ms = round(seconds * 1000, 3)
            client = scope.get("client")
            # makeRecord + handle: logger.info() would also walk the stack for the caller,
            # a third of the cost of the line, for a field no format uses.
            record = access_log.makeRecord(
                ACCESS_LOGGER,
                logging.INFO,
                __file__,
                0,
                "%s %s %d %.1fms",
                (exchange.method, path, status, duration_ms),
                None,
                extra={
                    "method": exchange.method,
                    "route": template,
                    "path": path,
                    "status": status,
                    "duration_ms": duration_ms,
                    "client": client[0] if client else None,
                },
            )
            access_log.handle(record)


class Readiness:
    """`GET /ready`: the event store answers a trivial query (its head position) within
    `timeout_s`. One probe at a time: while the database hangs, probes share the one
    in flight instead of piling up threads."""

    def __init__(self, services: Services, timeout_s: float = 2.0) -> None:
        self.log = LogAccess(services)
        self.timeout_s = timeout_s
        self._probe: asyncio.Future[Any] | None = None

    async def check(self) -> str | None:
        """None when ready, else the reason (no secrets: only the exception's class)."""
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(asyncio.to_thread(self.log.head))
            # A probe that fails after its callers gave up is still looked at (no warning).
            self._probe.add_done_callback(lambda f: f.cancelled() or f.exception())
        try:
            await asyncio.wait_for(asyncio.shield(self._probe), self.timeout_s)
        except TimeoutError:
            return f"the database did not answer within {self.timeout_s:g} s"
        except Exception as exc:
            return f"the database did not answer ({type(exc).__name__})"
        return None

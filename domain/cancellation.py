"""Cooperative cancellation of a request's work once its client has been answered.

A request that outlives the request timeout is answered 503/504 by the API's middleware,
but its handler runs in a worker thread that cannot be interrupted. The middleware marks
the request's `Cancellation` instead, and long-running work checks it at points where
stopping is safe — between attempts of a command, between the objects of a cascade, never
between a commit's append and its acknowledgement — so that a timed-out request stops
using the server. The token travels in a context variable, which the thread hand-off copies.
"""

from __future__ import annotations

from contextvars import ContextVar, Token

from icelog.domain.errors import ServiceUnavailableError


class RequestCancelledError(ServiceUnavailableError):
    """The request timed out and was answered; its remaining work is abandoned."""


class Cancellation:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


_CURRENT: ContextVar[Cancellation | None] = ContextVar("icelog_cancellation", default=None)


def bind(cancellation: Cancellation) -> Token[Cancellation | None]:
    """Make `cancellation` the current request's (until `unbind`)."""
    return _CURRENT.set(cancellation)


def unbind(token: Token[Cancellation | None]) -> None:
    _CURRENT.reset(token)


def check_cancelled() -> None:
    """Stop here (RequestCancelledError) when the current request was cancelled."""
    current = _CURRENT.get()
    if current is not None and current.cancelled:
        raise RequestCancelledError("The request timed out and was abandoned")

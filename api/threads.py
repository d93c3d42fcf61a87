"""Handlers that block run in icelog's own thread pool, entered with asyncio's executor.

Starlette's `run_in_threadpool` goes through anyio (a capacity limiter, its own task and
backend lookups, a cancel scope) on every call; profiled on commits, that bookkeeping was
~5 % of a commit's server CPU. This is the same hand-off with less around it: the caller's
context variables (request id, cancellation) go with the call, as there, and at most
`MAX_THREADS` handlers run at once (anyio's default bound, 40).

Unlike anyio, a cancelled caller stops waiting at once while its thread finishes the
handler; icelog's own timeouts never cancel a handler (api/observability.py), so this only
changes how a server that is force-stopped lets go of its last requests.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

MAX_THREADS = 40

_P = ParamSpec("_P")
_T = TypeVar("_T")
_executor = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="icelog-handler")


async def run_in_thread(func: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """`func(*args, **kwargs)` in a worker thread, in a copy of the caller's context."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, func, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_executor, call)

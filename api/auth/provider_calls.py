"""Calls to the identity provider made on a client's behalf, kept away from everything else.

The token endpoint (`POST /catalog/v1/oauth/tokens`) and the console's login (its discovery
document and code exchange) wait on the provider for up to 10 s each. In the handler pool a
slow provider under a flood would hold every handler thread and starve all other requests.
Here they get their own small pool: `PROVIDER_THREADS` calls run at once and
`PROVIDER_WAITING` more may wait; one more is refused at once (`ProviderBusy`, answered 503
with `Retry-After`) instead of queueing behind the slow ones.

`RateLimiter` bounds how often one client address may use the token endpoint (a token
bucket per address, at most `MAX_ADDRESSES` remembered, least recently seen forgotten
first), so one client cannot keep the pool full by itself.

The verifier's own key fetches (api/auth/oidc.py) are not made here: they run one at a time
per provider already, and a full pool must never stop tokens from being checked.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

PROVIDER_THREADS = 8
PROVIDER_WAITING = 8
MAX_ADDRESSES = 10_000

_P = ParamSpec("_P")
_T = TypeVar("_T")


class ProviderBusy(Exception):
    """Every provider-call slot is taken: answer 503 at once."""


class ProviderCalls:
    def __init__(self, threads: int = PROVIDER_THREADS, waiting: int = PROVIDER_WAITING) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="icelog-idp")
        self._slots = threading.BoundedSemaphore(threads + waiting)

    def try_hold(self) -> bool:
        """Take a slot without waiting (False: none free)."""
        return self._slots.acquire(blocking=False)

    def release(self) -> None:
        self._slots.release()

    async def run(self, func: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """`func(*args, **kwargs)` in the provider pool; `ProviderBusy` when it is full."""
        if not self.try_hold():
            raise ProviderBusy("the identity provider is busy; try again shortly")
        try:
            context = contextvars.copy_context()
            call = functools.partial(context.run, func, *args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(self._executor, call)
        finally:
            self.release()


PROVIDER_CALLS = ProviderCalls()


class RateLimiter:
    """A token bucket per key: `per_minute` on average, `burst` at once. Not thread-safe:
    used on the event loop only."""

    def __init__(
        self,
        per_minute: float,
        burst: int,
        *,
        max_keys: int = MAX_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rate = per_minute / 60.0
        self._burst = float(max(1, burst))
        self._max_keys = max_keys
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self._rate > 0

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, key: str) -> int | None:
        """None when `key` may go ahead (one token taken); else the seconds to wait."""
        if not self.enabled:
            return None
        now = self._clock()
        tokens, seen = self._buckets.pop(key, (self._burst, now))
        tokens = min(self._burst, tokens + (now - seen) * self._rate)
        if tokens >= 1.0:
            self._remember(key, tokens - 1.0, now)
            return None
        self._remember(key, tokens, now)
        return max(1, math.ceil((1.0 - tokens) / self._rate))

    def _remember(self, key: str, tokens: float, now: float) -> None:
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self._max_keys:
            self._buckets.popitem(last=False)  # the least recently seen address

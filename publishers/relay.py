"""The relay: follows the log after a sink's durable position and publishes CloudEvents.

Loop: hold the sink's lease → read the next batch of stored events after the position →
map them → send, waiting for the broker's acknowledgements → advance the position (fenced
by the lease) → repeat. A failed send is retried with back-off from the same position, so
nothing is lost (at-least-once); what is re-sent carries the same CloudEvent ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import uuid4

from icelog.publishers.cloud_events import to_cloud_event, to_json
from icelog.publishers.context import ContextResolver
from icelog.publishers.sinks import OutMessage, Sink

log = logging.getLogger("icelog.publish")


@dataclass(frozen=True)
class LoggedEvent:
    position: int
    topic: str
    event: Any  # the domain event


# (after position, limit) → the next stored events, in log order.
ReadLog = Callable[[int, int], Sequence[LoggedEvent]]


class Positions(Protocol):
    """Each sink's durable position and lease (projections.publisher_positions)."""

    def ensure_schema(self) -> None: ...

    def acquire(self, sink: str, owner: str, *, now_ms: int, lease_ms: int) -> int | None:
        """Take or renew the lease; the position to continue from, or None."""

    def advance(self, sink: str, owner: str, position: int, *, now_ms: int, lease_ms: int) -> bool:
        """Record acknowledged events up to `position`; False once the lease is lost."""

    def release(self, sink: str, owner: str) -> None: ...

    def positions(self) -> dict[str, int]: ...


def now_ms() -> int:
    return int(time.time() * 1000)


class Relay:
    def __init__(
        self,
        sink: Sink,
        read_log: ReadLog,
        positions: Positions,
        resolver: ContextResolver,
        *,
        source: str,
        batch_size: int = 500,
        idle_s: float = 0.05,
        lease_s: float = 10.0,
        max_backoff_s: float = 5.0,
    ) -> None:
        self.sink = sink
        self.read_log = read_log
        self.positions = positions
        self.resolver = resolver
        self.source = source
        self.batch_size = batch_size
        self.idle_s = idle_s
        self.lease_ms = int(lease_s * 1000)
        self.max_backoff_s = max_backoff_s
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:8]}"
        self.published = 0  # events acknowledged by the broker (for benchmarks and logs)

    def to_messages(self, batch: Sequence[LoggedEvent]) -> list[OutMessage]:
        messages = []
        for item in batch:
            cloud = to_cloud_event(
                item.event,
                topic=item.topic,
                position=item.position,
                context=self.resolver.resolve(item.event),
                source=self.source,
            )
            messages.append(
                OutMessage(
                    id=cloud.get_id(),
                    kind=item.topic.removeprefix("icelog."),
                    key=str(item.event.originator_id),
                    body=to_json(cloud),
                )
            )
        return messages

    async def _acquire(self, stop: asyncio.Event) -> int | None:
        """Wait for the lease (another relay may hold it); the position to resume from."""
        while not stop.is_set():
            position = await self._try_lease()
            if position is not None:
                return position
            await _sleep(stop, self.lease_ms / 4000)
        return None

    async def run(self, stop: asyncio.Event, *, retry_start: bool = False) -> None:
        """Publish until `stop` is set; then finish the batch in hand and return.

        A sink that cannot start raises, unless `retry_start` (inside a server, where the
        relay must not die with the broker): then it is retried with back-off."""
        await asyncio.to_thread(self.positions.ensure_schema)
        delay = 0.5
        while True:
            try:
                await self.sink.start()
                break
            except Exception as exc:
                if not retry_start:
                    raise
                log.error(
                    "relay %s cannot start: %s; retrying in %.0f s", self.sink.name, exc, delay
                )
                await _sleep(stop, delay)
                if stop.is_set():
                    return
                delay = min(delay * 2, 30.0)
        try:
            while not stop.is_set():
                position = await self._acquire(stop)
                if position is None:
                    break
                log.info("relay %s publishing from position %d", self.sink.name, position)
                await self._follow(stop, position)
        finally:
            await self.sink.close()
            await asyncio.to_thread(self.positions.release, self.sink.name, self.owner)

    async def _follow(self, stop: asyncio.Event, position: int) -> None:
        """Publish while this relay holds the lease."""
        renew_at = time.monotonic()
        while not stop.is_set():
            batch = await asyncio.to_thread(self.read_log, position, self.batch_size)
            if not batch:
                if time.monotonic() >= renew_at:
                    if await self._advance(position) is False:
                        return
                    renew_at = time.monotonic() + self.lease_ms / 3000
                await _sleep(stop, self.idle_s)
                continue
            messages = self.to_messages(batch)
            try:
                await self._send(stop, messages)
            except (LeaseLostError, StoppedError):
                return  # unacknowledged: the next relay run re-sends from `position`
            last = batch[-1].position
            if not await self._advance(last):
                log.warning("relay %s lost its lease; stepping back", self.sink.name)
                return
            position = last
            self.published += len(messages)
            renew_at = time.monotonic() + self.lease_ms / 3000

    async def _advance(self, position: int) -> bool:
        return await asyncio.to_thread(
            self.positions.advance,
            self.sink.name,
            self.owner,
            position,
            now_ms=now_ms(),
            lease_ms=self.lease_ms,
        )

    async def _send(self, stop: asyncio.Event, messages: list[OutMessage]) -> None:
        """Send until acknowledged, backing off while the broker is unavailable."""
        delay = 0.05
        while True:
            try:
                await self.sink.publish(messages)
                return
            except Exception as exc:
                log.warning(
                    "relay %s: send of %d event(s) failed (%s: %s); retrying in %.2f s",
                    self.sink.name,
                    len(messages),
                    type(exc).__name__,
                    exc,
                    delay,
                )
                await _sleep(stop, delay * random.uniform(0.5, 1.0))  # noqa: S311
                if stop.is_set():
                    raise StoppedError from exc
                delay = min(delay * 2, self.max_backoff_s)
                # The lease must outlive an outage: renew it while waiting.
                if await self._advance_lease_only() is False:
                    raise LeaseLostError from exc

    async def _advance_lease_only(self) -> bool:
        return await self._try_lease() is not None

    async def _try_lease(self) -> int | None:
        """Take or renew the sink's lease; the position to resume from, None while another
        relay holds it."""
        return await asyncio.to_thread(
            self.positions.acquire,
            self.sink.name,
            self.owner,
            now_ms=now_ms(),
            lease_ms=self.lease_ms,
        )


class LeaseLostError(Exception):
    """Another relay took the sink over while this one was retrying."""


class StoppedError(Exception):
    """Asked to stop while the broker was unavailable."""


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)

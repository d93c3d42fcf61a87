"""NATS JetStream sink: one stream, one subject per event kind under a prefix.

`Nats-Msg-Id` is the CloudEvent id, so JetStream drops re-sends within its duplicate
window. Publishes are pipelined (`publish_async`, issued in log order on one
connection) and the batch counts as sent only when every acknowledgement is in; a
failed batch is re-sent on a new connection (see `_connect`).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError

from icelog.publishers.sinks import OutMessage, SinkConfigError


@dataclass(frozen=True)
class NatsSettings:
    servers: tuple[str, ...] = ("nats://127.0.0.1:4222",)
    stream: str = "ICELOG"
    subject_prefix: str = "icelog"
    duplicate_window_s: float = 120.0
    ack_timeout_s: float = 10.0
    max_in_flight: int = 1024
    connect_timeout_s: float = 10.0


class NatsSink:
    def __init__(self, settings: NatsSettings) -> None:
        self.settings = settings
        self.name = f"nats:{settings.stream}"
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None

    def subject(self, message: OutMessage) -> str:
        return f"{self.settings.subject_prefix}.{message.kind}"

    async def start(self) -> None:
        """Connect and check the stream: bad settings show here, at start-up."""
        try:
            await self._connect()
        except SinkConfigError:
            raise
        except Exception as exc:
            raise SinkConfigError(
                f"cannot connect to NATS at {', '.join(self.settings.servers)}: {exc}"
            ) from exc

    async def _connect(self) -> None:
        """A new connection, never reconnected by the client itself.

        The client's own reconnection broke per-table order: while the broker was away it
        buffered the publishes that followed the ones lost in the dying connection, and
        flushed them on reconnect, so e.g. version 53 of a table was stored before the
        relay's retry re-sent version 52 (seen in the ten-second-outage test). With one
        connection per attempt, nothing sent after a loss can land before the retry: the
        relay waits out an outage (backing off) and re-sends the batch on a fresh
        connection, and JetStream drops what had already arrived (same Nats-Msg-Id)."""
        s = self.settings
        self._nc = await asyncio.wait_for(
            nats.connect(servers=list(s.servers), allow_reconnect=False, connect_timeout=2),
            timeout=s.connect_timeout_s,
        )
        self._js = self._nc.jetstream(publish_async_max_pending=s.max_in_flight)
        wanted = f"{s.subject_prefix}.>"
        try:
            info = await self._js.stream_info(s.stream)
        except NotFoundError:
            await self._js.add_stream(
                StreamConfig(
                    name=s.stream, subjects=[wanted], duplicate_window=s.duplicate_window_s
                )
            )
            return
        if wanted not in (info.config.subjects or []):
            raise SinkConfigError(
                f"JetStream stream {s.stream} exists but does not capture {wanted} "
                f"(its subjects: {info.config.subjects})"
            )

    async def _discard(self) -> None:
        """Close the connection of a failed attempt (what it still holds is sent first, in
        order, if the connection is alive; nothing is sent on a broken one)."""
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None and not nc.is_closed:
            with contextlib.suppress(Exception):
                await nc.close()

    async def publish(self, messages: list[OutMessage]) -> None:
        if self._nc is None or not self._nc.is_connected:
            await self._discard()
            await self._connect()  # fails while the broker is away: the relay backs off
        assert self._js is not None
        futures: list[asyncio.Future[Any]] = []
        try:
            for m in messages:
                futures.append(
                    await self._js.publish_async(
                        self.subject(m),
                        m.body,
                        headers={"Nats-Msg-Id": m.id},
                        wait_stall=self.settings.ack_timeout_s,
                    )
                )
            await asyncio.wait_for(asyncio.gather(*futures), timeout=self.settings.ack_timeout_s)
        except BaseException:
            for future in futures:
                future.cancel()
            await self._discard()
            raise

    async def close(self) -> None:
        if self._nc is not None and not self._nc.is_closed:
            await self._nc.drain()
        self._nc = self._js = None

"""NATS JetStream sink: one stream, one subject per event kind under a prefix.

`Nats-Msg-Id` is the CloudEvent id, so JetStream drops re-sends within its duplicate
window. Publishes are pipelined (`publish_async`, issued in log order on one
connection) and the batch counts as sent only when every acknowledgement is in.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError

from publishers.sinks import OutMessage, SinkConfigError


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
        s = self.settings
        try:
            # Once connected, an outage is waited out (reconnect forever); the first
            # connection must succeed in time, so bad settings show at start-up.
            self._nc = await asyncio.wait_for(
                nats.connect(
                    servers=list(s.servers),
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=0.5,
                    connect_timeout=2,
                    allow_reconnect=True,
                ),
                timeout=s.connect_timeout_s,
            )
        except Exception as exc:
            raise SinkConfigError(
                f"cannot connect to NATS at {', '.join(s.servers)}: {exc}"
            ) from exc
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

    async def publish(self, messages: list[OutMessage]) -> None:
        assert self._js is not None, "start() first"
        futures = [
            await self._js.publish_async(
                self.subject(m),
                m.body,
                headers={"Nats-Msg-Id": m.id},
                wait_stall=self.settings.ack_timeout_s,
            )
            for m in messages
        ]
        try:
            await asyncio.wait_for(asyncio.gather(*futures), timeout=self.settings.ack_timeout_s)
        except BaseException:
            for future in futures:
                future.cancel()
            raise

    async def close(self) -> None:
        if self._nc is not None and not self._nc.is_closed:
            await self._nc.drain()
        self._nc = self._js = None

"""Kafka sink: an idempotent producer (`acks=all`), key = aggregate id.

The key keeps each aggregate's events in one partition, in order; idempotence keeps
librdkafka's own retries from duplicating or reordering them. The batch counts as sent
when every delivery report is in and none failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from icelog.publishers.sinks import OutMessage, SinkConfigError

# Settings the relay's guarantees depend on: not overridable.
_REQUIRED = {"enable.idempotence": True, "acks": "all"}


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap_servers: str = "127.0.0.1:9092"
    topic: str = "icelog-events"
    delivery_timeout_s: float = 30.0
    extra: Mapping[str, Any] = field(default_factory=dict)  # other librdkafka settings


class KafkaSink:
    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings
        self.name = f"kafka:{settings.topic}"
        self._producer: Producer | None = None
        self._fatal = False

    def producer_config(self) -> dict[str, Any]:
        for key, value in _REQUIRED.items():
            if key in self.settings.extra:
                raise SinkConfigError(f"Kafka setting {key} is fixed by icelog ({value})")
        return {
            "bootstrap.servers": self.settings.bootstrap_servers,
            "linger.ms": 5,
            "message.timeout.ms": int(self.settings.delivery_timeout_s * 1000),
            **dict(self.settings.extra),
            **_REQUIRED,
        }

    async def start(self) -> None:
        try:
            self._producer = Producer(self.producer_config())
        except KafkaException as exc:
            raise SinkConfigError(f"bad Kafka settings: {exc}") from exc

    def _flush_timeout_s(self) -> float:
        """Wait as long as librdkafka may keep trying a message, then a little."""
        timeout_ms = self.producer_config().get("message.timeout.ms", 300_000)
        return float(timeout_ms) / 1000 + 5

    def _replace_producer(self) -> None:
        """After a fatal error (e.g. an idempotence sequence gap) a producer refuses every
        message for good: drop it and its queue — the relay re-sends the whole batch."""
        old = self._producer
        if old is not None:
            old.purge()
        self._producer = Producer(self.producer_config())

    async def publish(self, messages: list[OutMessage]) -> None:
        assert self._producer is not None, "start() first"
        if self._fatal:
            await asyncio.to_thread(self._replace_producer)
            self._fatal = False
        producer = self._producer
        failures: list[str] = []

        def report(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                failures.append(str(err))
                if err.fatal():
                    self._fatal = True

        def produce_and_flush() -> int:
            for m in messages:
                while True:
                    try:
                        producer.produce(
                            self.settings.topic,
                            value=m.body,
                            key=m.key.encode(),
                            headers=[
                                ("ce_id", m.id.encode()),
                                ("content-type", b"application/cloudevents+json"),
                            ],
                            on_delivery=report,
                        )
                        break
                    except BufferError:
                        producer.poll(0.1)  # local queue full: let deliveries drain
            return int(producer.flush(self._flush_timeout_s()))

        try:
            remaining = await asyncio.to_thread(produce_and_flush)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.fatal():
                self._fatal = True
            raise
        if remaining:
            raise KafkaException(f"{remaining} message(s) not delivered in time")
        if failures:
            # Every distinct reason, not just the first: during an outage the first failure
            # may be a transport error while most messages timed out.
            reasons = "; ".join(list(dict.fromkeys(failures))[:3])
            raise KafkaException(f"{len(failures)} delivery failure(s): {reasons}")

    async def close(self) -> None:
        if self._producer is not None:
            await asyncio.to_thread(self._producer.flush, 10)
        self._producer = None

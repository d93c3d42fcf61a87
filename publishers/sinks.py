"""What a relay publishes to. Implementations: publishers.nats_sink, publishers.kafka_sink."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class SinkConfigError(ValueError):
    """The sink cannot be used as configured (reported at start-up)."""


@dataclass(frozen=True)
class OutMessage:
    """One CloudEvent ready to send."""

    id: str  # the CloudEvent id: de-duplication key
    kind: str  # `table.committed.v1`: the event kind, for subjects
    key: str  # the aggregate id: ordering key (Kafka partition key)
    body: bytes  # structured-mode JSON


class Sink(Protocol):
    name: str  # identifies the sink's position in the log, e.g. "nats:ICELOG"

    async def start(self) -> None:
        """Connect (and create the stream/topic when missing); raise on bad settings."""

    async def publish(self, messages: list[OutMessage]) -> None:
        """Send in order; return only once the broker acknowledged every message. Raises on
        any failure (the relay then re-sends the whole batch; ids make that safe)."""

    async def close(self) -> None:
        """Flush and disconnect."""

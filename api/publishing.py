"""Wiring of the change-event relays: the log of the running catalog → NATS / Kafka."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from icelog.api.services import Services
from icelog.api.settings import PublishSettings
from icelog.projections.publisher_positions import PositionStore
from icelog.publishers.context import ContextResolver
from icelog.publishers.relay import LoggedEvent, Relay
from icelog.publishers.sinks import Sink


def make_sink(kind: str, settings: PublishSettings) -> Sink:
    # The broker clients are imported only by a process that publishes: nats-py (with
    # aiohttp) and librdkafka cost a server that does not ~0.25 s of start-up and memory.
    from icelog.publishers.kafka_sink import KafkaSettings, KafkaSink  # noqa: PLC0415
    from icelog.publishers.nats_sink import NatsSettings, NatsSink  # noqa: PLC0415

    if kind == "nats":
        return NatsSink(
            NatsSettings(
                servers=settings.nats_urls,
                stream=settings.nats_stream,
                subject_prefix=settings.nats_subject_prefix,
                duplicate_window_s=settings.nats_duplicate_window_seconds,
            )
        )
    if kind == "kafka":
        if settings.kafka_bootstrap_servers is None:
            raise ValueError("ICELOG_KAFKA_BOOTSTRAP_SERVERS is required to publish to Kafka")
        return KafkaSink(
            KafkaSettings(
                bootstrap_servers=settings.kafka_bootstrap_servers,
                topic=settings.kafka_topic,
                extra=settings.kafka_config,
            )
        )
    raise ValueError(f"unknown sink {kind!r}")


class LogAccess:
    """Reads the catalog's log: stored events in order, and aggregates as of a version."""

    def __init__(self, services: Services) -> None:
        self.catalog = services.catalog

    def read(self, after: int, limit: int) -> Sequence[LoggedEvent]:
        found = self.catalog.app.recorder.select_notifications(
            start=after, limit=limit, inclusive_of_start=False
        )
        return [
            LoggedEvent(n.id, n.topic, self.catalog.app.mapper.to_domain_event(n)) for n in found
        ]

    def load_at(self, aggregate_id: UUID, version: int) -> Any:
        try:
            return self.catalog.app.repository.get(aggregate_id, version=version)
        except AggregateNotFoundError:
            return None

    def head(self) -> int:
        return int(self.catalog.app.recorder.max_notification_id() or 0)

    def time_of(self, position: int) -> float | None:
        """When the event at `position` happened (epoch seconds)."""
        found = self.read(position - 1, 1)
        return found[0].event.timestamp.timestamp() if found else None


def build_relay(services: Services, kind: str, sink: Sink | None = None) -> Relay:
    settings = services.settings.publish
    log = LogAccess(services)
    return Relay(
        sink or make_sink(kind, settings),
        log.read,
        PositionStore(services.catalog.app.recorder.datastore),  # type: ignore[attr-defined]
        ContextResolver(log.load_at),
        source=settings.source,
        batch_size=settings.batch_size,
        lease_s=settings.lease_seconds,
    )


def publisher_lag(services: Services) -> dict[str, tuple[int, int, float]]:
    """Per sink: (position, events behind, seconds behind the oldest unpublished event)."""
    store = PositionStore(services.catalog.app.recorder.datastore)  # type: ignore[attr-defined]
    log = LogAccess(services)
    head = log.head()
    found = {}
    for sink, position in store.positions().items():
        behind = max(0, head - position)
        seconds = 0.0
        if behind:
            oldest = log.time_of(position + 1)
            seconds = max(0.0, time.time() - oldest) if oldest is not None else 0.0
        found[sink] = (position, behind, seconds)
    return found


async def run_relays(services: Services, kinds: Sequence[str], stop: asyncio.Event) -> None:
    relays = [build_relay(services, kind) for kind in kinds]
    await asyncio.gather(*(relay.run(stop, retry_start=True) for relay in relays))

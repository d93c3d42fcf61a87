"""Prometheus `/metrics`. Publisher lag is computed at scrape time from the database, so
any replica reports the lag of every relay, wherever the relays run."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from api.publishing import LogAccess, publisher_lag
from api.services import Services


class LogCollector(Collector):
    def __init__(self, services: Services) -> None:
        self.services = services

    def collect(self) -> Iterator[GaugeMetricFamily]:
        head = GaugeMetricFamily("icelog_log_head_position", "Position of the newest event")
        head.add_metric([], LogAccess(self.services).head())
        yield head
        position = GaugeMetricFamily(
            "icelog_publisher_position", "Last log position the sink acknowledged", labels=["sink"]
        )
        behind = GaugeMetricFamily(
            "icelog_publisher_lag_events",
            "Events not yet acknowledged by the sink",
            labels=["sink"],
        )
        seconds = GaugeMetricFamily(
            "icelog_publisher_lag_seconds",
            "Age of the oldest event not yet acknowledged by the sink (0 when caught up)",
            labels=["sink"],
        )
        for sink, (at, lag_events, lag_seconds) in sorted(publisher_lag(self.services).items()):
            position.add_metric([sink], at)
            behind.add_metric([sink], lag_events)
            seconds.add_metric([sink], lag_seconds)
        yield position
        yield behind
        yield seconds


def registry_for(services: Services) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(LogCollector(services))
    return registry


async def metrics(request: Request) -> Response:
    registry: CollectorRegistry = request.app.state.metrics
    body = await asyncio.to_thread(generate_latest, registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)

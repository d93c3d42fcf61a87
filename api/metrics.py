"""Prometheus `/metrics`.

Two kinds of figures:
- counted in this process as things happen: requests by route template, method and status
  (the observability middleware), server-side commit retries and 409 commit failures,
  event-store append latency and group-commit batch sizes (hooks of the write side);
- read from the database at scrape time: log head, relay positions and lag, projection
  positions and lag, connection-pool usage. Any replica therefore reports the lag of every
  relay and projection, wherever they run.

Labels hold only bounded values: route templates (never raw paths), known HTTP methods,
status codes, sink and projection names.
"""

from __future__ import annotations

import asyncio
import logging
from bisect import bisect_left
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client import Histogram as PromHistogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from psycopg_pool import ConnectionPool
from starlette.requests import Request
from starlette.responses import Response

from icelog.api.publishing import LogAccess, publisher_lag
from icelog.api.services import Services
from icelog.projections.audit_chain import AuditChain
from icelog.projections.event_index import EventIndex

log = logging.getLogger("icelog.metrics")

# Request latency: loadTable answers in about a millisecond, commits in a few; the top buckets
# are for the request timeout.
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
APPEND_BUCKETS = (
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)  # fmt: skip
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"))
UNMATCHED = "unmatched"  # the route label of a request no route matched

# No `_created` series beside every counter and histogram: they double the series count and
# Prometheus does not need them (a process-wide switch; this process serves one catalog).
disable_created_metrics()  # type: ignore[no-untyped-call]


class Metrics:
    """The figures of one app: its registry, the counters the middleware and the write
    side feed, and (after `attach`) the collectors that read the database at scrape time."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = RequestFigures()
        self.registry.register(self.requests)
        conflicts = Counter(
            "icelog_commit_conflicts",
            "Commit conflicts: 'retried' = a concurrent writer appended first and the server "
            "reloaded, re-checked and retried; 'rejected' = a 409 CommitFailedException answer",
            ["outcome"],
            registry=self.registry,
        )
        self.conflicts_retried = conflicts.labels(outcome="retried")
        self.conflicts_rejected = conflicts.labels(outcome="rejected")
        self.append_seconds = PromHistogram(
            "icelog_event_store_append_duration_seconds",
            "Duration of each successful append transaction (events + inline read model)",
            buckets=APPEND_BUCKETS,
            registry=self.registry,
        )
        self.append_batch = PromHistogram(
            "icelog_event_store_append_batch_commands",
            "Commands whose events one group-commit append transaction carried",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.timeouts = Counter(
            "icelog_http_request_timeouts",
            "Requests answered 503/504 because they ran past ICELOG_REQUEST_TIMEOUT_SECONDS",
            registry=self.registry,
        )
        self._attached: list[Collector] = []

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        if method not in METHODS:  # the method is the client's word: bound it
            method = "other"
        self.requests.observe((method, route, status), seconds)

    def observe_append(self, seconds: float, commands: int) -> None:
        self.append_seconds.observe(seconds)
        self.append_batch.observe(commands)

    def attach(self, services: Services) -> None:
        """Read `services`' database at scrape time and take the write side's hooks."""
        for collector in (LogCollector(services), PoolCollector(services)):
            self.registry.register(collector)
            self._attached.append(collector)
        app = services.catalog.app
        app.on_commit_conflict = self.conflicts_retried.inc
        app.on_append = self.observe_append

    def detach(self, services: Services) -> None:
        for collector in self._attached:
            self.registry.unregister(collector)
        self._attached.clear()
        # Back to the class's no-ops (the services may outlive this app, as in tests).
        for hook in ("on_commit_conflict", "on_append"):
            services.catalog.app.__dict__.pop(hook, None)


def _guarded(what: str, read: Callable[[], Iterator[Metric]]) -> Iterator[Metric]:
    """A scrape must answer even when the database does not: skip what cannot be read."""
    try:
        yield from list(read())
    except Exception:
        log.warning("metrics: could not read %s", what, exc_info=True)


# The `le` labels of LATENCY_BUCKETS, written as prometheus_client writes them.
_LATENCY_LES = [floatToGoString(b) for b in LATENCY_BUCKETS] + ["+Inf"]  # type: ignore[no-untyped-call]


class RequestFigures(Collector):
    """Requests answered and their latency, by (method, route template, status): the
    series `icelog_http_requests_total` and the histogram
    `icelog_http_request_duration_seconds` (LATENCY_BUCKETS), as prometheus_client's
    Counter and Histogram would expose them.

    Kept as plain numbers and turned into metric families at scrape time: a Counter's and
    a Histogram's child each take a lock per update and the histogram walks its buckets in
    Python — about a tenth of the observability middleware's cost on a small loadTable.
    Every request is observed on the event loop's thread (the middleware), so nothing is
    locked; a scrape copies what it reads."""

    def __init__(self) -> None:
        # key -> [count, sum of seconds, count per bucket (the last one: above them all)]
        self._figures: dict[tuple[str, str, int], list[Any]] = {}

    def observe(self, key: tuple[str, str, int], seconds: float) -> None:
        found = self._figures.get(key)
        if found is None:
            found = self._figures[key] = [0, 0.0, [0] * (len(LATENCY_BUCKETS) + 1)]
        found[0] += 1
        found[1] += seconds
        # `le` is inclusive: a value equal to a bound counts in that bound's bucket.
        found[2][bisect_left(LATENCY_BUCKETS, seconds)] += 1

    def collect(self) -> Iterator[Metric]:
        labels = ["method", "route", "status"]
        counts = CounterMetricFamily(
            "icelog_http_requests",
            "HTTP requests answered, by route template, method and status",
            labels=labels,
        )
        latency = HistogramMetricFamily(
            "icelog_http_request_duration_seconds",
            "Time from the request to the last byte of the response",
            labels=labels,
        )
        for (method, route, status), (count, total, buckets) in list(self._figures.items()):
            values = [method, route, str(status)]
            counts.add_metric(values, count)
            cumulative = list(accumulate(buckets))
            latency.add_metric(values, list(zip(_LATENCY_LES, cumulative, strict=True)), total)
        yield counts
        yield latency


class LogCollector(Collector):
    """Log head, relay positions and lag, projection positions and lag."""

    def __init__(self, services: Services) -> None:
        self.services = services
        datastore = services.catalog.app.recorder.datastore  # type: ignore[attr-defined]
        self.event_index = EventIndex(datastore)
        self.audit_chain = AuditChain(services.catalog.app.recorder)

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "icelog_database_up", "1 when the event store answered this scrape's first query"
        )
        try:
            head_at = LogAccess(self.services).head()
        except Exception:
            log.warning("metrics: the event store did not answer", exc_info=True)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        head = GaugeMetricFamily("icelog_log_head_position", "Position of the newest event")
        head.add_metric([], head_at)
        yield head
        yield from _guarded("relay positions", self._publishers)
        yield from _guarded("projection positions", lambda: self._projections(head_at))

    def _publishers(self) -> Iterator[Metric]:
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

    def _projections(self, head_at: int) -> Iterator[Metric]:
        """The asynchronous projections (the REST read model is inline: never behind)."""
        position = GaugeMetricFamily(
            "icelog_projection_position",
            "Last log position the asynchronous projection has processed",
            labels=["projection"],
        )
        behind = GaugeMetricFamily(
            "icelog_projection_lag_events",
            "Events the asynchronous projection has not processed yet",
            labels=["projection"],
        )
        found = {
            "audit_chain": self.audit_chain.head()[0],
            "event_index": self.event_index.position(),
        }
        for name, at in found.items():
            position.add_metric([name], at)
            behind.add_metric([name], max(0, head_at - at))
        yield position
        yield behind


# psycopg_pool.ConnectionPool.get_stats() keys -> (metric, help); counters are cumulative.
_POOL_GAUGES = {
    "pool_size": ("icelog_db_pool_connections", "Connections the pool holds (idle or in use)"),
    "pool_available": ("icelog_db_pool_connections_idle", "Idle connections in the pool"),
    "pool_max": ("icelog_db_pool_connections_max", "Most connections the pool may open"),
    "requests_waiting": (
        "icelog_db_pool_requests_waiting",
        "Callers waiting for a connection right now",
    ),
}
_POOL_COUNTERS = {
    "requests_num": ("icelog_db_pool_requests", "Connections requested from the pool"),
    "requests_queued": (
        "icelog_db_pool_requests_queued",
        "Requests that had to wait for a connection",
    ),
    "requests_errors": (
        "icelog_db_pool_requests_errors",
        "Requests that got no connection (timeout, pool full)",
    ),
    "connections_errors": (
        "icelog_db_pool_connection_errors",
        "Failed attempts to open a connection to the database",
    ),
    "connections_lost": ("icelog_db_pool_connections_lost", "Connections found broken"),
}


class PoolCollector(Collector):
    """Connection pools: the write side's psycopg pool (PostgreSQL only; the embedded SQLite
    store has no pool) and, when they are reachable, the read-replica pool and the async
    loadTable reader's connections."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def _pools(self) -> dict[str, dict[str, int]]:
        found: dict[str, dict[str, int]] = {}
        datastore = self.services.catalog.app.recorder.datastore  # type: ignore[attr-defined]
        pool = getattr(datastore, "pool", None)
        if isinstance(pool, ConnectionPool):
            found["events"] = pool.get_stats()
        # The read-replica pool (ICELOG_DATABASE_READ_URL), once Services keeps it public.
        replica = getattr(self.services, "read_pool", None)
        if isinstance(replica, ConnectionPool):
            found["replica"] = replica.get_stats()
        # The async reader (projections/fast_reads.py) reports its connections only if it
        # offers a public `pool_stats()` in the same keys (pool_size, pool_available, ...).
        reader_stats = getattr(self.services.reader, "pool_stats", None)
        if callable(reader_stats):
            found["reads"] = dict(reader_stats())
        return found

    def collect(self) -> Iterator[Metric]:
        pools = self._pools()
        if not pools:
            return
        for key, (name, text) in _POOL_GAUGES.items():
            gauge = GaugeMetricFamily(name, text, labels=["pool"])
            for pool, stats in pools.items():
                if key in stats:
                    gauge.add_metric([pool], stats[key])
            yield gauge
        for key, (name, text) in _POOL_COUNTERS.items():
            counter = CounterMetricFamily(name, text, labels=["pool"])
            for pool, stats in pools.items():
                counter.add_metric([pool], stats.get(key, 0))
            yield counter
        wait = CounterMetricFamily(
            "icelog_db_pool_wait_seconds",
            "Time callers spent waiting for a connection",
            labels=["pool"],
        )
        for pool, stats in pools.items():
            wait.add_metric([pool], stats.get("requests_wait_ms", 0) / 1000)
        yield wait


async def metrics(request: Request) -> Response:
    registry: CollectorRegistry = request.app.state.metrics
    body = await asyncio.to_thread(generate_latest, registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)

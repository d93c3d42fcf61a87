"""Change-event relay benchmarks: throughput to NATS JetStream and end-to-end lag.

    .venv/bin/python bench/publish.py --backend sqlite|postgres [--events 20000] [--out FILE]

1. Throughput: a log of N events is written first (in-process commands), then one relay
   publishes it from position 0 to a private JetStream server; events/s = N / time until
   the relay's durable position reaches the head (every event acknowledged by JetStream).
2. Lag: `icelog serve` with the relay inside (ICELOG_PUBLISH=nats); a writer commits over
   REST at a steady rate and records when each commit was acknowledged; a JetStream
   consumer records when the commit's event arrived. Lag = arrival - acknowledgement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import nats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from report import emit  # noqa: E402

from icelog.api.publishing import build_relay  # noqa: E402
from icelog.api.services import Services  # noqa: E402
from icelog.api.settings import Settings  # noqa: E402
from icelog.commands.tabular_values import Change  # noqa: E402
from tests.support.commands import ONE_COLUMN, bench_tables  # noqa: E402
from tests.support.nats_server import start_nats  # noqa: E402
from tests.support.postgres import TEST_SECRETS_KEY, drop_database  # noqa: E402
from tests.support.postgres import create_database as make_database  # noqa: E402
from tests.support.server import start_server  # noqa: E402

SCHEMA = ONE_COLUMN


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fill_log(services: Services, events: int) -> int:
    """Commits through the commands (no HTTP): about one event per commit."""
    ctx, wid, tables = bench_tables(services, 20)
    n = 0
    while int(services.catalog.app.recorder.max_notification_id() or 0) < events:
        name = tables[n % len(tables)]
        services.catalog.tables.commit_table(
            Change(ctx, wid, name, [], [{"action": "set-properties", "updates": {"n": str(n)}}])
        )
        n += 1
    return int(services.catalog.app.recorder.max_notification_id() or 0)


def throughput(backend: str, events: int, work: Path, nats_url: str) -> dict[str, Any]:
    url = make_database() if backend == "postgres" else None
    token = secrets.token_hex(3)
    env = {
        "ICELOG_DATA_DIR": str(work / f"tp-{backend}"),
        "ICELOG_TASK_WORKERS": "0",
        "ICELOG_NATS_URL": nats_url,
        "ICELOG_NATS_STREAM": f"BENCH_{token}",
        "ICELOG_NATS_SUBJECT_PREFIX": f"bench{token}",
    }
    if url:
        env["ICELOG_DATABASE_URL"] = url
        env["ICELOG_SECRETS_KEY"] = TEST_SECRETS_KEY
    services = Services.build(Settings.from_env(env))
    try:
        services.ensure_defaults()
        head = fill_log(services, events)
        relay = build_relay(services, "nats")

        async def run() -> float:
            stop = asyncio.Event()
            started = time.perf_counter()
            task = asyncio.create_task(relay.run(stop))
            while relay.positions.positions().get(relay.sink.name, 0) < head:
                await asyncio.sleep(0.01)
            elapsed = time.perf_counter() - started
            stop.set()
            await task
            return elapsed

        elapsed = asyncio.run(run())
        return {"events": head, "seconds": round(elapsed, 2), "events_per_s": round(head / elapsed)}
    finally:
        services.close()
        if url:
            drop_database(url)


def lag(backend: str, commits: int, rate: float, work: Path, nats_url: str) -> dict[str, Any]:
    url = make_database() if backend == "postgres" else None
    token = secrets.token_hex(3)
    stream, prefix = f"LAG_{token}", f"lag{token}"
    env = {
        "ICELOG_PUBLISH": "nats",
        "ICELOG_NATS_URL": nats_url,
        "ICELOG_NATS_STREAM": stream,
        "ICELOG_NATS_SUBJECT_PREFIX": prefix,
        "ICELOG_TASK_WORKERS": "0",
        "ICELOG_LOG_LEVEL": "warning",
    }
    server = start_server(work / f"lag-{backend}", backend=backend, database_url=url, env=env)
    acked: dict[tuple[str, int], float] = {}
    arrived: dict[tuple[str, int], float] = {}
    try:
        base = f"{server.uri}/v1"
        http = httpx.Client(timeout=30)
        http.post(f"{base}/namespaces", json={"namespace": ["lag"]})
        tables = [f"t{i}" for i in range(8)]
        for table in tables:
            http.post(f"{base}/namespaces/lag/tables", json={"name": table, "schema": SCHEMA})
        ready = threading.Event()
        done = threading.Event()

        async def consume() -> None:
            nc = await nats.connect(nats_url)
            js = nc.jetstream()

            async def on_message(msg: Any) -> None:
                event = json.loads(msg.data)
                arrived[(event["name"], int(event["version"]))] = time.perf_counter()

            await js.subscribe(
                f"{prefix}.table.committed.v1", cb=on_message, stream=stream, ordered_consumer=True
            )
            ready.set()
            while not done.is_set():
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)
            await nc.close()

        consumer = threading.Thread(target=lambda: asyncio.run(consume()))
        consumer.start()
        ready.wait(10)
        interval = 1.0 / rate
        next_at = time.perf_counter()
        versions = dict.fromkeys(tables, 1)
        for n in range(commits):
            table = tables[n % len(tables)]
            response = http.post(
                f"{base}/namespaces/lag/tables/{table}",
                json={"updates": [{"action": "set-properties", "updates": {"n": str(n)}}]},
            )
            assert response.status_code == 200, response.text
            versions[table] += 1
            acked[(table, versions[table])] = time.perf_counter()
            next_at += interval
            time.sleep(max(0.0, next_at - time.perf_counter()))
        deadline = time.monotonic() + 30
        while len(arrived) < len(acked) and time.monotonic() < deadline:
            time.sleep(0.05)
        done.set()
        consumer.join()
    finally:
        server.stop()
        if url:
            drop_database(url)
    lags = [(arrived[k] - acked[k]) * 1000 for k in acked if k in arrived]
    return {
        "commits": len(acked),
        "received": len(lags),
        "rate_per_s": rate,
        "lag_ms_p50": round(statistics.median(lags), 1),
        "lag_ms_p99": round(pct(lags, 0.99), 1),
        "lag_ms_max": round(max(lags), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--commits", type=int, default=2_000)
    parser.add_argument("--rate", type=float, default=200.0, help="commits per second")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="icelog-bench-publish-") as tmp:
        work = Path(tmp)
        broker = start_nats(work / "nats")
        try:
            result = {
                "benchmark": "publish",
                "backend": args.backend,
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "relay_throughput": throughput(args.backend, args.events, work, broker.url),
                "end_to_end_lag": lag(args.backend, args.commits, args.rate, work, broker.url),
            }
        finally:
            broker.stop()
    emit(result, args.out)


if __name__ == "__main__":
    main()

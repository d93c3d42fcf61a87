"""Event-log API benchmark: page latency of GET /management/v1/events.

    .venv/bin/python bench/audit.py --backend sqlite|postgres [--events 20000] [--out FILE]

Fills a log with N events (in-process commands), starts `icelog serve` on it, lets the
indexer catch up (first request), then measures pages: whole-log pages at random positions
(limit 100 and 1,000), one table's history, and a type + time-range filter.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from publish import fill_log, pct  # noqa: E402
from report import emit  # noqa: E402

from icelog.api.services import Services  # noqa: E402
from icelog.api.settings import Settings  # noqa: E402
from tests.support.postgres import TEST_SECRETS_KEY, drop_database  # noqa: E402
from tests.support.postgres import create_database as make_database  # noqa: E402
from tests.support.server import start_server  # noqa: E402


def timed(client: httpx.Client, url: str, params: dict[str, Any], n: int) -> dict[str, Any]:
    latencies = []
    for _ in range(n):
        query = {k: (v() if callable(v) else v) for k, v in params.items()}
        started = time.perf_counter()
        response = client.get(url, params=query)
        latencies.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.text
    return {
        "requests": n,
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(pct(latencies, 0.99), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    url = make_database() if args.backend == "postgres" else None
    with tempfile.TemporaryDirectory(prefix="icelog-bench-audit-") as tmp:
        data = Path(tmp) / "data"
        env = {"ICELOG_DATA_DIR": str(data), "ICELOG_TASK_WORKERS": "0"}
        if url:
            env["ICELOG_DATABASE_URL"] = url
            env["ICELOG_SECRETS_KEY"] = TEST_SECRETS_KEY
        services = Services.build(Settings.from_env(env))
        services.ensure_defaults()
        head = fill_log(services, args.events)
        services.close()
        server = start_server(data, backend=args.backend, database_url=url, env=env)
        try:
            client = httpx.Client(timeout=120)
            base = f"{server.base}/management/v1"
            started = time.perf_counter()
            first = client.get(f"{base}/events", params={"limit": 1})
            catch_up_s = time.perf_counter() - started
            assert first.status_code == 200
            table = client.get(
                f"{base}/events", params={"type": "io.icelog.table.created", "limit": 1}
            ).json()["events"][0]
            wid = table["warehouse-id"]
            random_after = lambda: random.randrange(head)  # noqa: E731
            result = {
                "benchmark": "audit-events-api",
                "backend": args.backend,
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "events": head,
                "first_request_catching_up_index_s": round(catch_up_s, 2),
                "index_rate_events_per_s": round(head / catch_up_s),
                "page_100": timed(client, f"{base}/events", {"after": random_after}, 200),
                "page_1000": timed(
                    client, f"{base}/events", {"after": random_after, "limit": 1000}, 50
                ),
                "table_history_100": timed(
                    client,
                    f"{base}/warehouse/{wid}/table/{table['aggregate-id']}/history",
                    {},
                    200,
                ),
                "type_and_time_filter_100": timed(
                    client,
                    f"{base}/events",
                    {"type": "io.icelog.table.committed", "since": "2000-01-01T00:00:00Z"},
                    200,
                ),
            }
        finally:
            server.stop()
            if url:
                drop_database(url)
    emit(result, args.out)


if __name__ == "__main__":
    main()

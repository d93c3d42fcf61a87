"""What the Iceberg events API (`POST /v1/{prefix}/events`) costs, on PostgreSQL.

    .venv/bin/python bench/iceberg_events.py --tables 100 --commits 5000 --rows 1000000

1. Real events: `--tables` tables get `--commits` appended snapshots through the REST API
   (8 writers); then one consumer reads the whole stream page by page (`page-size` 1000)
   from the start: events per second served, end to end over HTTP.
2. At scale: the read model is filled with synthetic rows up to `--rows` events (copies of
   a real `update-table` row at new positions; the log itself is not grown — appending a
   million events through the API takes hours here). Then the latency of one page of 100
   at the start, the middle and the end of the stream, unfiltered and with filters that
   match rarely (by table uuid, by name), which the bounded scan keeps cheap.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from ab import ADMIN, TreeServer  # noqa: E402
from loadgen import build_request, run_clients  # noqa: E402
from run import SCHEMA, append_body  # noqa: E402

from icelog.projections.iceberg_events import Cursor, EventsFilter  # noqa: E402

WRITERS = 8


def make_events(server: TreeServer, tables: int, commits: int) -> None:
    for t in range(tables):
        made = httpx.post(
            server.catalog + "/namespaces/bench/tables", json={"name": f"t{t}", "schema": SCHEMA}
        )
        made.raise_for_status()
    state: dict[int, dict[str, Any]] = {t: {"parent": None, "seq": 0} for t in range(tables)}
    host = f"127.0.0.1:{server.port}"
    sent: dict[int, tuple[int, int]] = {}  # client → (table, snapshot id) of its request
    owned = max(1, tables // WRITERS)  # client c owns tables c, c + 8, ...: no conflicts

    def make(cid: int, i: int) -> bytes:
        table = (cid + WRITERS * (i % owned)) % tables
        st = state[table]
        snapshot = (cid + 1) * 10_000_000 + i
        sent[cid] = (table, snapshot)
        body = json.dumps(append_body(st["parent"], snapshot, st["seq"] + 1)).encode()
        path = f"/catalog/v1/{server.prefix}/namespaces/bench/tables/t{table}"
        return build_request("POST", path, host, body)

    def on_response(cid: int, status: int, _body: bytes) -> None:
        if status == 200:
            table, snapshot = sent[cid]
            state[table]["parent"], state[table]["seq"] = snapshot, state[table]["seq"] + 1

    per_client = commits // WRITERS
    ran = asyncio.run(
        run_clients("127.0.0.1", server.port, WRITERS, 3600, make, on_response, per_client)
    )
    print(f"# {commits} commits on {tables} tables: {ran.summary()}", flush=True)


def consume(server: TreeServer, size: int) -> tuple[int, float]:
    ask: dict[str, Any] = {"page-size": size}
    count = 0
    started = time.perf_counter()
    with httpx.Client(timeout=120) as http:
        while True:
            page = http.post(server.catalog + "/events", json=ask)
            page.raise_for_status()
            found = page.json()
            count += len(found["events"])
            if not found["events"]:
                return count, time.perf_counter() - started
            ask = {"continuation-token": found["continuation-token"]}


def fill(server: TreeServer, rows: int) -> tuple[int, str, int]:
    """Synthetic rows up to `rows`; (highest position, a table uuid that occurs once, the
    time of the middle event)."""
    url = f"postgresql://postgres@127.0.0.1:5432/{server.db}"
    with psycopg.connect(url, autocommit=True) as c:
        have = c.execute("SELECT count(*), max(position) FROM icelog_iceberg_events").fetchone()
        assert have is not None
        count, top = int(have[0]), int(have[1])
        sample = c.execute(
            "SELECT position FROM icelog_iceberg_events WHERE operation_type = 'update-table' "
            "ORDER BY position DESC LIMIT 1"
        ).fetchone()
        assert sample is not None
        missing = rows - count
        started = time.perf_counter()
        # Each synthetic row: another table (its own uuid and name), the sample's operation.
        c.execute(
            "INSERT INTO icelog_iceberg_events (position, stream, object_type, object_uuid, "
            "path, from_path, operation_type, event_id, request_id, request_group, "
            "timestamp_ms, actor, operation) "
            "SELECT %s + g, s.stream, s.object_type, md5(g::text)::uuid::text, "
            "'synthetic' || chr(31) || 't' || g, NULL, s.operation_type, "
            "md5('e' || g)::uuid::text, md5('r' || g)::uuid::text, %s + g, "
            "s.timestamp_ms + g, s.actor, s.operation "
            "FROM icelog_iceberg_events s, generate_series(1, %s) g WHERE s.position = %s",
            (top, top, missing, sample[0]),
        )
        c.execute("ANALYZE icelog_iceberg_events")
        print(f"# filled {missing} synthetic rows in {time.perf_counter() - started:.0f} s")
        rare = c.execute("SELECT md5(%s::text)::uuid::text", (missing // 2,)).fetchone()
        middle = c.execute(
            "SELECT timestamp_ms FROM icelog_iceberg_events WHERE position = %s",
            ((top + missing) // 2,),
        ).fetchone()
        assert rare is not None and middle is not None
        return top + missing, str(rare[0]), int(middle[0])


def page_latency(server: TreeServer, body: dict[str, Any], rounds: int) -> dict[str, Any]:
    times: list[float] = []
    found = 0
    with httpx.Client(timeout=120) as http:
        for _ in range(rounds):
            t0 = time.perf_counter()
            answer = http.post(server.catalog + "/events", json=body)
            times.append((time.perf_counter() - t0) * 1000)
            answer.raise_for_status()
            found = len(answer.json()["events"])
    times.sort()
    return {
        "events": found,
        "p50_ms": round(statistics.median(times), 1),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--commits", type=int, default=5000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    server = TreeServer(ROOT)
    try:
        make_events(server, args.tables, args.commits)
        for size in (1000, 100):
            count, seconds = consume(server, size)
            print(f"consume page-size {size:4}: {count} events in {seconds:.2f} s = "
                  f"{count / seconds:,.0f} events/s", flush=True)  # fmt: skip
        top, rare, middle_ms = fill(server, args.rows)
        warehouse = server.prefix
        cases: list[tuple[str, dict[str, Any]]] = []
        for label, position in (("start", 0), ("middle", top // 2), ("end", top - 100)):
            token = Cursor(warehouse, position).encode()
            cases.append((f"page of 100 at the {label}", {"continuation-token": token,
                                                          "page-size": 100}))  # fmt: skip
        middle = top // 2
        by_uuid = Cursor(warehouse, middle - 5000, EventsFilter(uuids=(rare,))).encode()
        cases.append(("uuid filter (1 match), near it", {"continuation-token": by_uuid}))
        far = Cursor(warehouse, 0, EventsFilter(uuids=(rare,))).encode()
        cases.append(("uuid filter, from the start", {"continuation-token": far}))
        names = Cursor(warehouse, middle, EventsFilter(names=(("bench",),))).encode()
        cases.append(("name filter (real tables only)", {"continuation-token": names}))
        since = {"since-timestamp-ms": middle_ms, "page-size": 100}
        cases.append(("since-timestamp-ms (the middle)", since))
        print(f"\n# {top:,} events in the read model", flush=True)
        for label, body in cases:
            print(f"{label:34} {json.dumps(page_latency(server, body, args.rounds))}", flush=True)
    finally:
        server.stop()
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{server.db}" WITH (FORCE)')


if __name__ == "__main__":
    main()

"""Peak PostgreSQL connections of one `icelog serve` under a mixed load.

    .venv/bin/python bench/connections.py [--tree DIR] [--workers N] [--env KEY=VALUE ...]
        [--via-port PORT]

Starts `icelog serve` from a source tree (default: this checkout) on a fresh database and
drives every kind of request that takes a database connection at once: loadTable (its own
async pool), commits and creates (the group committer), list and get calls, the Iceberg
events endpoint and the event-log API (snapshot reads, the event index catching up). A
sampler counts the server's backends in `pg_stat_activity` every 50 ms (its own
connection goes to another database, so it is never counted). Prints JSON: the peak, the
connections held when idle before and after the load, and each load's summary — any 5xx
(a pool timeout answers 503) shows in the statuses. docs/operations.md, "Connection
budget", quotes the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import build_request, run_clients
from run import SCHEMA, append_body, create_database, free_port, wait_healthy

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
KEY = "BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY="  # benchmark-only secrets key


class Sampler:
    """The database's backends (all, and those running a statement), every `interval`."""

    def __init__(self, db: str, interval: float = 0.05) -> None:
        self.db, self.interval = db, interval
        self.peak = self.peak_active = 0
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def count(self) -> tuple[int, int]:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            return self._count(conn)

    def _count(self, conn: psycopg.Connection[Any]) -> tuple[int, int]:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE state = 'active') "
            "FROM pg_stat_activity WHERE datname = %s",
            (self.db,),
        ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    def _run(self) -> None:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            while not self._stop.is_set():
                total, active = self._count(conn)
                self.samples.append(total)
                self.peak = max(self.peak, total)
                self.peak_active = max(self.peak_active, active)
                self._stop.wait(self.interval)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


class Server:
    def __init__(self, tree: Path, workers: int, extra_env: dict[str, str], via: int) -> None:
        self.db = create_database("icelog_conn")
        self.tmp = tempfile.mkdtemp(prefix="icelog-conn-")
        self.port = free_port()
        env = dict(
            os.environ,
            PYTHONPATH=str(tree),
            ICELOG_DATA_DIR=self.tmp,
            ICELOG_LOG_LEVEL="warning",
            ICELOG_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{via}/{self.db}",
            ICELOG_SECRETS_KEY=KEY,
            **extra_env,
        )
        self.log = Path(self.tmp, "server.log")
        command = [sys.executable, "-m", "icelog.api", "serve", "--port", str(self.port)]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [*command, "--workers", str(workers)],
                cwd=tree,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        self.base = f"http://127.0.0.1:{self.port}"
        wait_healthy(self.base, self.proc, self.log, 90)
        config = httpx.get(self.base + "/catalog/v1/config", params={"warehouse": "default"})
        self.prefix = config.json()["overrides"]["prefix"]
        self.catalog = f"{self.base}/catalog/v1/{self.prefix}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # e.g. a connect waiting on a full pooler
            self.proc.kill()
            self.proc.wait()
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
        shutil.rmtree(self.tmp, ignore_errors=True)


async def mixed_load(server: Server, clients: int, duration: float) -> dict[str, Any]:
    """Every kind of request at once: `clients` connections per kind (4 times as many for
    loadTable)."""
    host = f"127.0.0.1:{server.port}"
    base = f"/catalog/v1/{server.prefix}"
    state: dict[int, dict[str, Any]] = {c: {"parent": None, "seq": 0} for c in range(clients)}

    def commit(cid: int, i: int) -> bytes:
        st = state[cid]
        st["next"] = (cid + 1) * 1_000_000 + i
        body = json.dumps(append_body(st["parent"], st["next"], st["seq"] + 1)).encode()
        return build_request("POST", f"{base}/namespaces/bench/tables/w{cid}", host, body)

    def committed(cid: int, status: int, _body: bytes) -> None:
        if status == 200:
            st = state[cid]
            st["parent"], st["seq"] = st["next"], st["seq"] + 1

    def create(cid: int, i: int) -> bytes:
        body = json.dumps({"name": f"c{cid}_{i}", "schema": SCHEMA}).encode()
        return build_request("POST", f"{base}/namespaces/created/tables", host, body)

    def load(_cid: int, _i: int) -> bytes:
        return build_request("GET", f"{base}/namespaces/bench/tables/one", host)

    lists = [
        f"{base}/namespaces/bench/tables",
        f"{base}/namespaces",
        f"{base}/namespaces/bench",
        "/catalog/v1/config?warehouse=default",
    ]

    def listing(cid: int, i: int) -> bytes:
        return build_request("GET", lists[(cid + i) % len(lists)], host)

    def events(cid: int, i: int) -> bytes:
        if (cid + i) % 2:
            return build_request("GET", "/management/v1/events?page-size=100", host)
        return build_request("POST", f"{base}/events", host, b'{"page-size": 100}')

    def run(kind: Any, n: int, on: Any = None) -> Any:
        return run_clients("127.0.0.1", server.port, n, duration, kind, on)

    results = await asyncio.gather(
        run(load, 4 * clients),
        run(commit, clients, committed),
        run(create, clients),
        run(listing, clients),
        run(events, clients),
    )
    names = ("loadTable", "commits", "creates", "lists", "events")
    return {name: r.summary() for name, r in zip(names, results, strict=True)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--clients", type=int, default=8, help="connections per request kind")
    parser.add_argument("--duration", type=float, default=15)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server")
    parser.add_argument(
        "--via-port",
        type=int,
        default=5432,
        help="the port the server connects to (a PgBouncer in front of 127.0.0.1:5432)",
    )
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    server = Server(args.tree.resolve(), args.workers, extra, args.via_port)
    try:
        http = httpx.Client(base_url=server.catalog, timeout=60)
        for ns in ("bench", "created"):
            http.post("/namespaces", json={"namespace": [ns]}).raise_for_status()
        for name in ["one", *(f"w{c}" for c in range(args.clients))]:
            r = http.post("/namespaces/bench/tables", json={"name": name, "schema": SCHEMA})
            r.raise_for_status()
        sampler = Sampler(server.db)
        time.sleep(1.0)
        idle_before = sampler.count()[0]
        with sampler:
            loads = asyncio.run(mixed_load(server, args.clients, args.duration))
        idle_after = sampler.count()[0]
        out = {
            "tree": str(args.tree),
            "workers": args.workers,
            "env": extra,
            "via_port": args.via_port,
            "clients_per_kind": args.clients,
            "duration_s": args.duration,
            "connections": {
                "idle_before_load": idle_before,
                "peak": sampler.peak,
                "peak_running_a_statement": sampler.peak_active,
                "idle_after_load": idle_after,
            },
            "loads": loads,
        }
        print(json.dumps(out, indent=2))
    finally:
        server.stop()


if __name__ == "__main__":
    main()

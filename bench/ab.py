"""A/B: the same load against two source trees, alternating, on PostgreSQL.

    git worktree add /tmp/icelog-before <rev>
    .venv/bin/python bench/ab.py /tmp/icelog-before . --scenario commits --rounds 3

This machine's speed drifts by tens of percent within minutes, so two benchmark runs made
one after the other do not show a 10 % change. Here both servers run at once (each from its
own tree, on its own fresh database) and are driven in turns, A B A B ..., by the same
load, so the drift hits both alike. Scenarios: `load` (wrk, loadTable of a 1-snapshot
table), `commits` (8 writers appending snapshots to their own tables, with the committer's
append time and batch size from /metrics), `create` (8 clients creating tables in one
namespace). The trees run with this checkout's virtualenv (PYTHONPATH = the tree).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import build_request, run_clients
from run import SCHEMA, append_body, free_port, wait_healthy

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
KEY = "BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY="  # benchmark-only secrets key


class TreeServer:
    """`icelog serve` from one source tree, on a fresh database."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree.resolve()
        self.db = f"icelog_ab_{secrets.token_hex(4)}"
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{self.db}"')
        self.tmp = tempfile.mkdtemp(prefix="icelog-ab-")
        self.port = free_port()
        env = dict(
            os.environ,
            PYTHONPATH=str(self.tree),
            ICELOG_DATA_DIR=self.tmp,
            ICELOG_LOG_LEVEL="warning",
            ICELOG_DATABASE_URL=f"postgresql://postgres@127.0.0.1:5432/{self.db}",
            ICELOG_SECRETS_KEY=KEY,
        )
        log = Path(self.tmp, "server.log").open("wb")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "icelog.api", "serve", "--port", str(self.port)],
            cwd=self.tree,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        wait_healthy(self.base, self.proc, Path(self.tmp, "server.log"), 60)
        config = httpx.get(self.base + "/catalog/v1/config", params={"warehouse": "default"})
        self.prefix = config.json()["overrides"]["prefix"]
        self.catalog = f"{self.base}/catalog/v1/{self.prefix}"
        self.has_table = False  # the loadTable scenario's table, made on first use
        httpx.post(self.catalog + "/namespaces", json={"namespace": ["bench"]}).raise_for_status()

    def make_table(self) -> None:
        """The loadTable scenarios' table bench.one (a 1-snapshot table), once."""
        if not self.has_table:
            httpx.post(
                self.catalog + "/namespaces/bench/tables", json={"name": "one", "schema": SCHEMA}
            ).raise_for_status()
            self.has_table = True

    def append_stats(self) -> tuple[float, float, float]:
        """(appends, seconds in them, commands they carried) from /metrics."""
        text = httpx.get(self.base + "/metrics").text

        def value(name: str) -> float:
            found = re.search(rf"^{name} (\S+)", text, re.M)
            return float(found.group(1)) if found else 0.0

        return (
            value("icelog_event_store_append_duration_seconds_count"),
            value("icelog_event_store_append_duration_seconds_sum"),
            value("icelog_event_store_append_batch_commands_sum"),
        )

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
        shutil.rmtree(self.tmp, ignore_errors=True)


def commits(server: TreeServer, tag: str, writers: int, duration: float) -> dict[str, Any]:
    http = httpx.Client(base_url=server.catalog, timeout=60)
    for w in range(writers):
        http.post("/namespaces/bench/tables", json={"name": f"{tag}{w}", "schema": SCHEMA})
    state: dict[int, dict[str, Any]] = {w: {"parent": None, "seq": 0} for w in range(writers)}
    host = f"127.0.0.1:{server.port}"

    def make(cid: int, i: int) -> bytes:
        st = state[cid]
        st["next"] = (cid + 1) * 1_000_000 + i
        body = json.dumps(append_body(st["parent"], st["next"], st["seq"] + 1)).encode()
        path = f"/catalog/v1/{server.prefix}/namespaces/bench/tables/{tag}{cid}"
        return build_request("POST", path, host, body)

    def done(cid: int, status: int, _body: bytes) -> None:
        if status == 200:
            st = state[cid]
            st["parent"], st["seq"] = st["next"], st["seq"] + 1

    before = server.append_stats()
    result = asyncio.run(run_clients("127.0.0.1", server.port, writers, duration, make, done))
    after = server.append_stats()
    appends = after[0] - before[0]
    summary: dict[str, Any] = result.summary()
    if appends:
        summary["append_ms"] = round(1000 * (after[1] - before[1]) / appends, 2)
        summary["append_batch"] = round((after[2] - before[2]) / appends, 2)
    return summary


def creates(server: TreeServer, tag: str, clients: int, duration: float) -> dict[str, Any]:
    httpx.post(server.catalog + "/namespaces", json={"namespace": [tag]}).raise_for_status()
    host = f"127.0.0.1:{server.port}"

    def make(cid: int, i: int) -> bytes:
        body = json.dumps({"name": f"t{cid}_{i}", "schema": SCHEMA}).encode()
        return build_request(
            "POST", f"/catalog/v1/{server.prefix}/namespaces/{tag}/tables", host, body
        )

    return asyncio.run(run_clients("127.0.0.1", server.port, clients, duration, make)).summary()


def loads(server: TreeServer, clients: int, duration: float) -> dict[str, Any]:
    server.make_table()
    url = f"{server.catalog}/namespaces/bench/tables/one?snapshots=all"
    out = subprocess.run(
        ["wrk", f"-t{min(2, clients)}", f"-c{clients}", f"-d{int(duration)}s", "--latency", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = dict(re.findall(r"^\s*(50%|99%)\s+(\S+)", out, re.M))
    rps = re.search(r"Requests/sec:\s+(\S+)", out)
    return {
        "rps": float(rps.group(1)) if rps else 0.0,
        "p50": found.get("50%"),
        "p99": found.get("99%"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trees", nargs=2, type=Path, help="source trees A and B")
    parser.add_argument("--scenario", choices=["load", "commits", "create"], default="commits")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument(
        "--clients", type=int, default=8, help="writers, creators or wrk connections"
    )
    args = parser.parse_args()
    servers = [TreeServer(tree) for tree in args.trees]
    try:
        for r in range(args.rounds):
            for label, server in zip("AB", servers, strict=True):
                if args.scenario == "commits":
                    found = commits(server, f"r{r}w", args.clients, args.duration)
                elif args.scenario == "create":
                    found = creates(server, f"r{r}c", args.clients, args.duration)
                else:
                    found = loads(server, args.clients, args.duration)
                print(f"{label} {server.tree}: {json.dumps(found)}", flush=True)
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()

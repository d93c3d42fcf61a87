"""What authentication and authorization cost per request: the same checkout served twice on
PostgreSQL, once without an identity provider (allow-all) and once with the local test
provider (tests/support/idp.py), driven in turns (A B A B ..., so the machine's drift hits
both alike). Needs `wrk` (apt-get install wrk).

    .venv/bin/python bench/auth_overhead.py --rounds 3

Each server holds `--namespaces` x `--tables` tables (default 100 x 100 = 10,000). On the
grants server a user, `reader`, holds `modify` on one namespace (a subtree: describe, select
and modify reach its tables) and nothing else; allow-all is driven as `anonymous`.
Scenarios, all inside that namespace: `list-tables` (its 100 tables), `load` (loadTable),
`commit` (8 writers appending snapshots to their own tables). `list-namespaces` is shown
for information only: allow-all lists all of them, the reader only the one on their way
(the filter runs inside the list query), so the two are not the same work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from loadgen import build_request, run_clients  # noqa: E402
from run import append_body, create_database, drop_database, wait_healthy  # noqa: E402

from tests.support.idp import TestIdentityProvider  # noqa: E402

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
KEY = "BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY="  # benchmark-only secrets key
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": True}]}


class Server:
    def __init__(self, env: dict[str, str], token: str | None) -> None:
        self.db = create_database("icelog_auth")
        self.tmp = tempfile.mkdtemp(prefix="icelog-auth-")
        with socket_port() as port:
            self.port = port
        full = dict(
            os.environ, ICELOG_DATA_DIR=self.tmp, ICELOG_LOG_LEVEL="warning",
            ICELOG_DATABASE_URL=f"postgresql://postgres@127.0.0.1:5432/{self.db}",
            ICELOG_SECRETS_KEY=KEY, **env,
        )  # fmt: skip
        log = Path(self.tmp, "server.log").open("wb")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "icelog.api", "serve", "--port", str(self.port)],
            cwd=ROOT, env=full, stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
        self.base = f"http://127.0.0.1:{self.port}"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        wait_healthy(self.base, self.proc, Path(self.tmp, "server.log"), 60)
        if token:
            self.post("/management/v1/bootstrap", {"accept-terms-of-use": True})
        config = httpx.get(
            self.base + "/catalog/v1/config", params={"warehouse": "default"},
            headers=self.headers,
        )  # fmt: skip
        self.prefix = config.json()["overrides"]["prefix"]
        self.catalog = f"/catalog/v1/{self.prefix}"

    def post(self, path: str, body: Any) -> Any:
        response = httpx.post(self.base + path, json=body, headers=self.headers, timeout=60)
        response.raise_for_status()
        return response.json() if response.content else None

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        drop_database(self.db)
        shutil.rmtree(self.tmp, ignore_errors=True)


class socket_port:
    def __enter__(self) -> int:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *_: object) -> None:
        self.sock.close()


def wrk(url: str, token: str | None, clients: int, duration: float) -> dict[str, Any]:
    header = ["-H", f"Authorization: Bearer {token}"] if token else []
    run = ["wrk", "-t2", f"-c{clients}", f"-d{int(duration)}s", "--latency", *header, url]
    out = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    rps = float(_find(r"Requests/sec:\s+(\S+)", out))
    p50, p99 = _find(r"(?m)^\s+50%\s+(\S+)", out), _find(r"(?m)^\s+99%\s+(\S+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": rps, "p50": p50, "p99": p99, "errors": int(non2xx.group(1)) if non2xx else 0}


def _find(pattern: str, text: str) -> str:
    found = re.search(pattern, text)
    if found is None:
        raise RuntimeError(f"wrk printed no {pattern!r}:\n{text}")
    return found.group(1)


SUBTREE = "n000"  # the namespace the reader holds `modify` on (first: any size has it)
WRITERS = 8


def populate(server: Server, namespaces: int, tables: int) -> None:
    """`namespaces` x `tables` empty tables, made by 8 clients at once."""
    names = [f"n{n:03d}" for n in range(namespaces)]
    for name in names:
        server.post(server.catalog + "/namespaces", {"namespace": [name]})

    def make(namespace: str) -> None:
        with httpx.Client(base_url=server.base, headers=server.headers, timeout=60) as http:
            for t in range(tables):
                made = http.post(
                    f"{server.catalog}/namespaces/{namespace}/tables",
                    json={"name": f"t{t:03d}", "schema": SCHEMA},
                )
                made.raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(make, names))


def grant_subtree(server: Server, idp: TestIdentityProvider, reader: str) -> None:
    """The reader calls once (so they exist), then holds `modify` on the subtree."""
    whoami = httpx.get(
        server.base + "/management/v1/whoami", headers={"Authorization": f"Bearer {reader}"}
    )
    whoami.raise_for_status()
    found = httpx.get(
        f"{server.base}/management/v1/warehouse/{server.prefix}/namespace-id",
        params={"namespace": SUBTREE}, headers=server.headers,
    )  # fmt: skip
    found.raise_for_status()
    server.post(
        f"/management/v1/permissions/namespace/{found.json()['namespace-id']}/assignments",
        {"writes": [{"type": "modify", "user": whoami.json()["id"]}]},
    )


class Writers:
    """Each writer appends snapshots to its own table, keeping its chain across rounds."""

    def __init__(self, server: Server, token: str | None) -> None:
        self.server = server
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.state: dict[int, dict[str, Any]] = {
            w: {"parent": None, "seq": 0, "next": 0} for w in range(WRITERS)
        }
        self.made = 0

    def run(self, duration: float) -> dict[str, Any]:
        host = f"127.0.0.1:{self.server.port}"

        def make(cid: int, i: int) -> bytes:
            st = self.state[cid]
            self.made += 1
            st["next"] = (cid + 1) * 10_000_000 + self.made
            body = json.dumps(append_body(st["parent"], st["next"], st["seq"] + 1)).encode()
            path = f"{self.server.catalog}/namespaces/{SUBTREE}/tables/t{cid:03d}"
            return build_request("POST", path, host, body, self.headers)

        def done(cid: int, status: int, _body: bytes) -> None:
            if status == 200:
                st = self.state[cid]
                st["parent"], st["seq"] = st["next"], st["seq"] + 1

        ran = asyncio.run(run_clients("127.0.0.1", self.server.port, WRITERS, duration, make, done))
        summary = ran.summary()
        failed = sum(n for status, n in ran.statuses.items() if status != 200)
        return {
            "rps": summary["rps"], "p50": f"{summary['p50_ms']}ms",
            "p99": f"{summary['p99_ms']}ms", "errors": failed,
        }  # fmt: skip


SCENARIOS = ("list-tables", "load", "commit", "list-namespaces")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(servers: dict[str, Server], limit_s: float = 600) -> None:
    """Wait until no server works in the background any more (the audit chain and the
    event indexer catching up with what populating appended): under 5 % of a core for 3 s.
    Measuring before that compares a busy server with an idle one."""
    deadline = time.monotonic() + limit_s
    for name, server in servers.items():
        started = time.monotonic()
        while time.monotonic() < deadline:
            before = cpu_seconds(server.proc.pid)
            time.sleep(3)
            if cpu_seconds(server.proc.pid) - before < 0.15:
                break
        print(f"# {name}: idle after {time.monotonic() - started:.0f} s", flush=True)


def measure(
    scenario: str, server: Server, who: str | None, writers: Writers, args: argparse.Namespace
) -> dict[str, Any]:
    """The scenario's figures, with the server's CPU per request (user + system time of its
    process): less moved by what else the machine runs than requests per second."""
    before = cpu_seconds(server.proc.pid)
    found = _drive(scenario, server, who, writers, args)
    spent = cpu_seconds(server.proc.pid) - before
    found["cpu_ms"] = round(1000 * spent / max(1.0, found["rps"] * args.duration), 3)
    return found


def _drive(
    scenario: str, server: Server, who: str | None, writers: Writers, args: argparse.Namespace
) -> dict[str, Any]:
    if scenario == "commit":
        return writers.run(args.duration)
    base = server.base + server.catalog + "/namespaces"
    url = {
        "list-tables": f"{base}/{SUBTREE}/tables",
        "load": f"{base}/{SUBTREE}/tables/t{WRITERS:03d}",  # no writer touches it
        "list-namespaces": base,
    }[scenario]
    return wrk(url, who, args.clients, args.duration)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--tables", type=int, default=100, help=f"per namespace, > {WRITERS}")
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help=f"comma list of {', '.join(SCENARIOS)}"
    )
    parser.add_argument(
        "--control", action="store_true",
        help="A/A: two allow-all servers, to size the noise of the comparison",
    )  # fmt: skip
    args = parser.parse_args()
    with TestIdentityProvider() as idp:
        admin = idp.issue("admin", expires_in=24 * 3600)
        reader = idp.issue("reader", expires_in=24 * 3600)
        env = {"ICELOG_OPENID_PROVIDER_URI": idp.uri, "ICELOG_OPENID_AUDIENCE": "icelog"}
        second = "allow-all-2" if args.control else "grants"
        servers = {
            "allow-all": Server({}, None),
            second: Server({}, None) if args.control else Server(env, admin),
        }
        try:
            for name, server in servers.items():
                t0 = time.monotonic()
                populate(server, args.namespaces, args.tables)
                if server.headers:
                    grant_subtree(server, idp, reader)
                print(f"# {name}: {args.namespaces * args.tables} tables made in "
                      f"{time.monotonic() - t0:.0f} s", flush=True)  # fmt: skip
            settle(servers)
            writers = {n: Writers(s, reader if s.headers else None) for n, s in servers.items()}
            results: dict[str, list[dict[str, Any]]] = {}
            for _ in range(args.rounds):
                for name, server in servers.items():
                    for scenario in args.scenarios.split(","):
                        who = reader if server.headers else None
                        found = measure(scenario, server, who, writers[name], args)
                        results.setdefault(scenario, []).append({"mode": name, **found})
                        print(f"{scenario:16} {name:11} {json.dumps(found)}", flush=True)
            print(f"\nmean requests/s ({second} / allow-all), and server CPU per request:")
            for scenario, rows in results.items():
                mean = {
                    mode: sum(r["rps"] for r in rows if r["mode"] == mode)
                    / max(1, sum(1 for r in rows if r["mode"] == mode))
                    for mode in servers
                }
                ratio = mean[second] / mean["allow-all"] if mean["allow-all"] else 0.0
                cpu = {
                    mode: min(r["cpu_ms"] for r in rows if r["mode"] == mode) for mode in servers
                }
                note = "  (not the same work: see above)" if scenario == "list-namespaces" else ""
                print(
                    f"  {scenario:16} allow-all {mean['allow-all']:8.1f}   {second} "
                    f"{mean[second]:8.1f}   {100 * ratio:5.1f} %   server CPU per request "
                    f"(least of the rounds) {cpu['allow-all']:.3f} / {cpu[second]:.3f} ms{note}"
                )
        finally:
            for server in servers.values():
                server.stop()


if __name__ == "__main__":
    main()

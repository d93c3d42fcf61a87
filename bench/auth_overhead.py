"""What authentication and authorization cost per request: the same checkout served twice on
PostgreSQL, once without an identity provider (allow-all) and once with the local test
provider (tests/support/idp.py), driven in turns by wrk (A B A B ..., so the machine's drift
hits both alike).

    .venv/bin/python bench/auth_overhead.py --rounds 3 --tables 1000

Scenarios: `load` (loadTable of a 1-snapshot table, as the project admin who created it),
`list` (listTables of a namespace holding `--tables` tables, as the admin — no filter — and
as a user granted `select` on every tenth table — filtered in the list query).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.idp import TestIdentityProvider  # noqa: E402

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
KEY = "BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY="  # benchmark-only secrets key
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": True}]}


class Server:
    def __init__(self, env: dict[str, str], token: str | None) -> None:
        self.db = f"icelog_auth_{secrets.token_hex(4)}"
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{self.db}"')
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
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(self.base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(Path(self.tmp, "server.log").read_text())
            time.sleep(0.1)
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
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
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
    p50, p99 = _find(r"50%\s+(\S+)", out), _find(r"99%\s+(\S+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": rps, "p50": p50, "p99": p99, "errors": int(non2xx.group(1)) if non2xx else 0}


def _find(pattern: str, text: str) -> str:
    found = re.search(pattern, text)
    if found is None:
        raise RuntimeError(f"wrk printed no {pattern!r}:\n{text}")
    return found.group(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    with TestIdentityProvider() as idp:
        admin = idp.issue("admin", expires_in=24 * 3600)
        reader = idp.issue("reader", expires_in=24 * 3600)
        env = {"ICELOG_OPENID_PROVIDER_URI": idp.uri, "ICELOG_OPENID_AUDIENCE": "icelog"}
        servers = {"allow-all": Server({}, None), "grants": Server(env, admin)}
        try:
            for server in servers.values():
                server.post(server.catalog + "/namespaces", {"namespace": ["bench"]})
                for n in range(args.tables):
                    made = server.post(
                        server.catalog + "/namespaces/bench/tables",
                        {"name": f"t{n:05d}", "schema": SCHEMA},
                    )
                    if server.headers and n % 10 == 0:
                        uuid = made["metadata"]["table-uuid"]
                        server.post(
                            f"/management/v1/permissions/warehouse/{server.prefix}/table/"
                            f"{uuid}/assignments",
                            {"writes": [{"type": "select", "user": "oidc~reader"}]},
                        )
            results: dict[str, list[dict[str, Any]]] = {}
            for _ in range(args.rounds):
                for name, server in servers.items():
                    token = admin if server.headers else None
                    base = server.base + server.catalog + "/namespaces/bench/tables"
                    for scenario, url, who in (
                        ("load", f"{base}/t00000", token),
                        ("list-all", base, token),
                        ("list-filtered", base, reader if server.headers else None),
                    ):
                        found = wrk(url, who, args.clients, args.duration)
                        results.setdefault(f"{scenario} {name}", []).append(found)
                        print(f"{scenario:14} {name:9} {json.dumps(found)}", flush=True)
            print("\nmean requests/s:")
            for key, rows in sorted(results.items()):
                print(f"  {key:24} {sum(r['rps'] for r in rows) / len(rows):9.1f}")
        finally:
            for server in servers.values():
                server.stop()


if __name__ == "__main__":
    main()

"""Many clients, each on its own table: namespace, create, then 3 x (commit, load, list).

    .venv/bin/python bench/many_clients.py [CLIENTS] [BUDGET]

Found on 2026-11-27, open: on PostgreSQL with 45 clients a
commit (`POST .../tables/t`) is never answered (the client's 170 s timeout ends the run),
with `ICELOG_PG_MAX_CONNECTIONS` 3 or 100 alike, and on the code of 3926830
as well; with 8 or 30 clients every request answers 200 in 2-5 s. The handler thread pool
holds 40 threads (api/threads.py), which points at thread starvation in the commit path
(the group committer), not at the connection pools; it still hangs with uvicorn's own
protocol (no batched writes, checked the same day). Prints the statuses, the time, and
the server log's errors.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import subprocess
import sys
import tempfile
import time

import httpx

from tests.support import postgres
from tests.support.server import free_port

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}],
}


def _work(base: str, i: int) -> list[int]:
    with httpx.Client(timeout=170) as c:
        out = [c.post(f"{base}/namespaces", json={"namespace": [f"n{i}"]}).status_code]
        out.append(
            c.post(
                f"{base}/namespaces/n{i}/tables", json={"name": "t", "schema": SCHEMA}
            ).status_code
        )
        for k in range(3):
            update = {"updates": [{"action": "set-properties", "updates": {"k": str(k)}}]}
            out.append(c.post(f"{base}/namespaces/n{i}/tables/t", json=update).status_code)
            out.append(c.get(f"{base}/namespaces/n{i}/tables/t").status_code)
            out.append(c.get(f"{base}/namespaces").status_code)
        return out


def main(clients: int, budget: str) -> None:
    with postgres.temporary_database() as url:
        port = free_port()
        env = {
            **os.environ,
            "ICELOG_DATABASE_URL": url,
            "ICELOG_SECRETS_KEY": postgres.TEST_SECRETS_KEY,
            "ICELOG_PG_MAX_CONNECTIONS": budget,
            "ICELOG_DATA_DIR": tempfile.mkdtemp(prefix="icelog-many-clients-"),
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "icelog.api", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert server.stdout is not None
            for line in server.stdout:
                if "icelog serving" in line:
                    break
            root = f"http://127.0.0.1:{port}/catalog/v1"
            config = httpx.get(f"{root}/config", timeout=30).json()
            base = f"{root}/{config['overrides']['prefix']}"
            started = time.monotonic()
            with cf.ThreadPoolExecutor(clients) as pool:
                done = [s for r in pool.map(lambda i: _work(base, i), range(clients)) for s in r]
            statuses = {s: done.count(s) for s in set(done)}
            print(f"{clients} clients: {statuses} in {time.monotonic() - started:.1f} s")
        finally:
            server.terminate()
            try:
                log = server.communicate(timeout=20)[0]
            except subprocess.TimeoutExpired:
                server.kill()
                log = ""
            errors = [x for x in log.splitlines() if "Timeout" in x or "ERROR" in x]
            print("server log errors:", len(errors), errors[:8])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 45, sys.argv[2] if len(sys.argv) > 2 else "")

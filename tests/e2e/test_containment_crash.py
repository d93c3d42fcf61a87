"""Metadata files are written whole, with the umask's mode, and a killed server leaves no
temporary file behind.

A real `icelog serve` (umask 022) takes concurrent commits to tables with large metadata
documents (so that writes take a while) and view replaces, and is SIGKILLed several times.
At the end the warehouse holds no `.tmp-*` / `.part` file, every metadata file is complete
JSON with mode 0644, nothing was created outside the warehouse, and `icelog audit verify`,
`projections verify` and `metadata verify` pass.
"""

from __future__ import annotations

import gzip
import os
import random
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson
import pytest

from tests.integration.conftest import SCHEMA
from tests.support.hostile import World, view_body
from tests.support.load import run_icelog, warehouse_prefix
from tests.support.server import CatalogServer, start_server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

KILLS = 6
CLIENTS = 6
PAD = 2 * 1024 * 1024  # a 2 MB property: every commit writes a 2 MB metadata file


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


class Committer(threading.Thread):
    """Commits to its own table (and replaces its own view) until stopped, through kills."""

    def __init__(self, base: Callable[[], str], prefix: str, n: int) -> None:
        super().__init__(daemon=True)
        self.base, self.prefix, self.n = base, prefix, n
        self.stop = threading.Event()
        self.acknowledged = 0
        self.server_errors: list[str] = []

    def run(self) -> None:
        count = 0
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                count += 1
                url = f"{self.base()}/catalog/v1/{self.prefix}/namespaces/crash"
                if count % 5 == 0:
                    url, body = (
                        f"{url}/views/v{self.n}",
                        {"updates": [{"action": "set-properties", "updates": {"n": str(count)}}]},
                    )
                else:
                    url, body = (
                        f"{url}/tables/t{self.n}",
                        {"updates": [{"action": "set-properties", "updates": {"n": str(count)}}]},
                    )
                try:
                    response = client.post(url, json=body)
                except httpx.HTTPError:
                    time.sleep(0.05)  # the server is down: it is being restarted
                    continue
                if response.status_code == 200:
                    self.acknowledged += 1
                elif response.status_code >= 500 and response.status_code != 503:
                    self.server_errors.append(f"{response.status_code} {response.text[:300]}")


@pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"]
)
def test_sigkill_during_commits_leaves_no_temporary_files(
    backend: str, tmp_path: Path, pg_database_factory: Callable[[], str]
) -> None:
    url = pg_database_factory() if backend == "postgres" else None
    base = tmp_path / "base"
    data_dir = base / "data"
    incarnations: list[CatalogServer] = []

    def start() -> CatalogServer:
        log = data_dir / "server.log"
        if log.exists():
            log.rename(data_dir / f"server.log.{len(incarnations)}")
        with umask(0o022):
            server = start_server(
                data_dir,
                backend=backend,
                database_url=url,
                env={"ICELOG_LOG_LEVEL": "warning"},
                timeout=60,
            )
        incarnations.append(server)
        return server

    server = start()
    world = World(base)  # the sentinels next to the data directory, from now on
    world.allow(data_dir / "warehouse")
    try:
        prefix = warehouse_prefix(server.base)
        root = f"{server.base}/catalog/v1/{prefix}/namespaces"
        httpx.post(root, json={"namespace": ["crash"]}).raise_for_status()
        for n in range(CLIENTS):
            created = httpx.post(
                f"{root}/crash/tables",
                json={"name": f"t{n}", "schema": SCHEMA, "properties": {"pad": "p" * PAD}},
                timeout=30,
            )
            created.raise_for_status()
            httpx.post(f"{root}/crash/views", json=view_body(f"v{n}", ["crash"])).raise_for_status()
        workers = [Committer(lambda: incarnations[-1].base, prefix, n) for n in range(CLIENTS)]
        for worker in workers:
            worker.start()
        rng = random.Random(15)
        for _ in range(KILLS):
            before = sum(w.acknowledged for w in workers)
            deadline = time.monotonic() + 15
            while (
                sum(w.acknowledged for w in workers) < before + 10 and time.monotonic() < deadline
            ):
                time.sleep(0.02)
            time.sleep(rng.uniform(0.05, 0.4))
            server.process.send_signal(signal.SIGKILL)
            server.process.wait(timeout=10)
            server = start()
        time.sleep(1.0)
        for worker in workers:
            worker.stop.set()
        for worker in workers:
            worker.join(30)
        acknowledged = sum(w.acknowledged for w in workers)
        assert acknowledged >= KILLS * 10
        assert [e for w in workers for e in w.server_errors] == []
        server.stop()

        warehouse = data_dir / "warehouse"
        leftovers, wrong_mode, partial = [], [], []
        metadata_files = 0
        for directory, _dirs, files in os.walk(warehouse):
            for name in files:
                path = Path(directory) / name
                if name.startswith((".tmp-", ".")) or name.endswith(".part"):
                    leftovers.append(str(path))
                    continue
                if not name.endswith(".metadata.json"):
                    continue
                metadata_files += 1
                mode = stat.S_IMODE(os.lstat(path).st_mode)
                if mode != 0o644:
                    wrong_mode.append(f"{path}: {oct(mode)}")
                data = path.read_bytes()
                try:
                    orjson.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
                except (orjson.JSONDecodeError, OSError, EOFError):
                    partial.append(str(path))
        print(f"\ncontainment crash ({backend}): {acknowledged} commits, {metadata_files} files")
        assert leftovers == [], f"temporary files left by killed servers: {leftovers[:20]}"
        assert partial == [], f"incomplete metadata files: {partial[:20]}"
        assert wrong_mode == [], f"metadata files not 0644 under umask 022: {wrong_mode[:20]}"
        world.assert_untouched()
        problems = []
        for args in (
            ("audit", "chain"),
            ("audit", "verify"),
            ("projections", "verify"),
            ("metadata", "verify"),
        ):
            done = run_icelog(server, *args)
            if done.returncode != 0:
                problems.append(
                    f"icelog {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
                )
        assert problems == [], "\n".join(problems)
    finally:
        for incarnation in incarnations:
            incarnation.stop()

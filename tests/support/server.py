"""Run ``icelog serve`` as a subprocess on a free port, for end-to-end tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.postgres import SERVER_CONNECTIONS

REPO_ROOT = Path(__file__).resolve().parents[2]
ICELOG_BIN = Path(sys.executable).with_name("icelog")
WAREHOUSE = "default"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class CatalogServer:
    """A running ``icelog serve`` process."""

    port: int
    data_dir: Path
    database_url: str | None
    backend: str
    process: subprocess.Popen[bytes]
    log_path: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    # With an identity provider (an `-auth` deployment): the bearer token clients use.
    token: str | None = None

    def headers(self) -> dict[str, str]:
        """What a plain HTTP call to this server sends to be the clients' user."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def uri(self) -> str:
        return f"{self.base}/catalog"

    @property
    def warehouse(self) -> str:
        return WAREHOUSE

    @property
    def warehouse_dir(self) -> Path:
        return self.data_dir / "warehouse"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)


def start_server(
    data_dir: Path,
    *,
    backend: str = "sqlite",
    database_url: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 30.0,
    icelog: Sequence[str] = (str(ICELOG_BIN),),
) -> CatalogServer:
    """Start ``icelog serve`` and wait until ``GET /health`` answers 200 (`icelog`: the
    command that stands for `icelog`, e.g. a test-support entry point with hooks)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    child_env = dict(os.environ)
    child_env.pop("ICELOG_DATABASE_URL", None)
    child_env.pop("ICELOG_DEFAULT_WAREHOUSE_LOCATION", None)
    child_env["ICELOG_DATA_DIR"] = str(data_dir)
    child_env.setdefault("ICELOG_PG_MAX_CONNECTIONS", str(SERVER_CONNECTIONS))
    if database_url is not None:
        child_env["ICELOG_DATABASE_URL"] = database_url
    child_env.update(env or {})
    log_path = data_dir / "server.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [*icelog, "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO_ROOT,
            env=child_env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    server = CatalogServer(
        port=port,
        data_dir=data_dir,
        database_url=database_url,
        backend=backend,
        process=process,
        log_path=log_path,
        extra_env=dict(env or {}),
    )
    deadline = time.monotonic() + timeout
    last_error = "no attempt"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"icelog serve exited with {process.returncode} before becoming healthy:\n"
                f"{server.log()}"
            )
        try:
            response = httpx.get(f"{server.base}/health", timeout=2.0)
            if response.status_code == 200:
                return server
            last_error = f"GET /health -> {response.status_code} {response.text[:500]}"
        except httpx.HTTPError as exc:
            last_error = repr(exc)
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(
        f"icelog serve did not become healthy within {timeout:.0f}s ({last_error}):\n{server.log()}"
    )


def start_icelog(
    server: CatalogServer, args: list[str], env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    """Another `icelog` process (a relay, a task worker) on `server`'s store, output to `log`."""
    child = dict(os.environ)
    child.pop("ICELOG_DATABASE_URL", None)
    child["ICELOG_DATA_DIR"] = str(server.data_dir)
    child.setdefault("ICELOG_PG_MAX_CONNECTIONS", str(SERVER_CONNECTIONS))
    if server.database_url:
        child["ICELOG_DATABASE_URL"] = server.database_url
    child.update(env)
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(ICELOG_BIN), *args],
            cwd=REPO_ROOT,
            env=child,
            stdout=out,
            stderr=subprocess.STDOUT,
        )

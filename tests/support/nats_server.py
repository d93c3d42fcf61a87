"""A private NATS JetStream server per test (free port, own store dir) that tests may stop
and restart — the shared one on 127.0.0.1:4222 is left alone."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.server import free_port


def nats_binary() -> str:
    found = shutil.which("nats-server") or shutil.which("/usr/sbin/nats-server")
    if found is None:
        raise RuntimeError("nats-server is not installed (apt-get install nats-server)")
    return found


@dataclass
class NatsServer:
    store: Path
    port: int
    monitor_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        log = (self.store.parent / "nats.log").open("ab")
        self.process = subprocess.Popen(
            [
                nats_binary(),
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-m",
                str(self.monitor_port),
                "-js",
                "-sd",
                str(self.store),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                health = httpx.get(
                    f"http://127.0.0.1:{self.monitor_port}/healthz",
                    params={"js-enabled-only": "true"},
                    timeout=1.0,
                )
                if health.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("nats-server did not become healthy")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None


def start_nats(directory: Path) -> NatsServer:
    store = directory / "jetstream"
    store.mkdir(parents=True, exist_ok=True)
    server = NatsServer(store=store, port=free_port(), monitor_port=free_port())
    server.start()
    return server


@pytest.fixture(name="broker")
def nats_broker(tmp_path: Path) -> Iterator[NatsServer]:
    """A NATS server for one test: a module takes it in with `broker = nats_broker`."""
    server = start_nats(tmp_path / "nats")
    yield server
    server.stop()

"""An S3-compatible server for tests: moto in server mode on a free loopback port."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.server import free_port


@contextmanager
def moto_s3(log: Path) -> Iterator[str]:
    """Yields the endpoint URL (`http://127.0.0.1:PORT`)."""
    port = free_port()
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("moto_server")),
                "-H",
                "127.0.0.1",
                "-p",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(endpoint, timeout=1).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("moto_server did not start")
            time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)

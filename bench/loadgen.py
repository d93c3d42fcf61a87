"""A small asyncio HTTP/1.1 load generator (keep-alive, no client library overhead).

The machine has 2 cores shared by the server and the load generator, so the client
must be cheap: raw streams, pre-built requests, one connection per virtual client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Result:
    latencies_ms: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def record(self, status: int, ms: float) -> None:
        self.latencies_ms.append(ms)
        self.statuses[status] = self.statuses.get(status, 0) + 1

    def pct(self, p: float) -> float:
        data = sorted(self.latencies_ms)
        if not data:
            return float("nan")
        return data[min(len(data) - 1, round(p / 100 * (len(data) - 1)))]

    def summary(self) -> dict[str, object]:
        n = len(self.latencies_ms)
        return {
            "requests": n,
            "rps": round(n / self.elapsed_s, 1) if self.elapsed_s else 0.0,
            "p50_ms": round(self.pct(50), 2),
            "p90_ms": round(self.pct(90), 2),
            "p99_ms": round(self.pct(99), 2),
            "max_ms": round(max(self.latencies_ms), 2) if n else None,
            "statuses": self.statuses,
        }


def build_request(
    method: str, path: str, host: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    status_line = await reader.readline()
    status = int(status_line.split()[1])
    length = 0
    chunked = False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        lname = name.strip().lower()
        if lname == "content-length":
            length = int(value.strip())
        elif lname == "transfer-encoding" and "chunked" in value:
            chunked = True
    if chunked:
        body = b""
        while True:
            size = int((await reader.readline()).strip(), 16)
            if size == 0:
                await reader.readline()
                break
            body += await reader.readexactly(size)
            await reader.readline()
        return status, body
    return status, await reader.readexactly(length) if length else b""


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(raw)
        await self.writer.drain()
        return await read_response(self.reader)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def run_clients(
    host: str,
    port: int,
    clients: int,
    duration_s: float,
    make_request: Callable[[int, int], bytes],
    on_response: Callable[[int, int, bytes], None] | None = None,
    max_requests_per_client: int | None = None,
) -> Result:
    """`clients` connections each send requests back to back until `duration_s` elapses."""
    result = Result()
    deadline = time.perf_counter() + duration_s

    async def client(cid: int) -> None:
        conn = Connection(host, port)
        i = 0
        try:
            while time.perf_counter() < deadline:
                if max_requests_per_client is not None and i >= max_requests_per_client:
                    break
                raw = make_request(cid, i)
                t0 = time.perf_counter()
                status, body = await conn.request(raw)
                result.record(status, (time.perf_counter() - t0) * 1000)
                if on_response is not None:
                    on_response(cid, status, body)
                i += 1
        finally:
            await conn.close()

    start = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    result.elapsed_s = time.perf_counter() - start
    return result

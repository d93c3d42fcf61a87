"""A real uvicorn server with icelog's BatchedHttpProtocol (api/adapters/uvicorn.py): under
many concurrent keep-alive requests every response arrives whole and to the request it
answers, streamed bodies far larger than what is held arrive intact, and responses without
a body (204, HEAD) are not held back forever."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from icelog.api.adapters.uvicorn import BatchedHttpProtocol

CHUNK = b"0123456789abcdef" * 1024  # 16 KiB
CHUNKS = 64  # 1 MiB: sixteen times FLUSH_BYTES


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/big":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(CHUNKS):  # no real await in between: all produced in one turn
            await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/empty":
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    body = scope["query_string"]
    if scope["method"] != "HEAD":
        await asyncio.sleep(0.001)  # keep several requests in flight at once
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=BatchedHttpProtocol, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_concurrent_responses_arrive_whole_and_in_their_place(base_url: str) -> None:
    async def run() -> None:
        limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
        async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=30) as client:

            async def small(i: int) -> None:
                answer = await client.get("/small", params={"i": str(i) * (i % 50 + 1)})
                assert answer.status_code == 200
                assert answer.content == f"i={str(i) * (i % 50 + 1)}".encode()

            async def big() -> None:
                answer = await client.get("/big")
                assert answer.content == CHUNK * CHUNKS

            async def bodiless() -> None:
                assert (await client.get("/empty")).status_code == 204
                head = await client.head("/small", params={"i": "7"})
                assert head.status_code == 200 and head.content == b""

            jobs = [small(i) for i in range(400)] + [big() for _ in range(4)]
            jobs += [bodiless() for _ in range(20)]
            await asyncio.wait_for(asyncio.gather(*jobs), timeout=60)

    asyncio.run(run())


def test_a_lone_request_is_answered_on_a_fresh_connection(base_url: str) -> None:
    for i in range(20):
        answer = httpx.get(f"{base_url}/small", params={"i": str(i)})
        assert answer.content == f"i={i}".encode()
    assert httpx.get(f"{base_url}/empty").status_code == 204

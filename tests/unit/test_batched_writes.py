"""BatchedTransport (api/batched_writes.py): a lone request's writes go out at once; while
other requests are in flight they are held and written together when the loop has run
what was ready, in order; large output and closing connections are not held back."""

from __future__ import annotations

import asyncio
from typing import Any

from icelog.api.batched_writes import FLUSH_BYTES, BatchedTransport


class Recording(asyncio.Transport):
    """What reached the socket, write by write (a unit-test stand-in for uvloop's)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True


async def _turn() -> None:
    await asyncio.sleep(0)


def test_a_lone_request_is_written_at_once() -> None:
    async def run() -> None:
        real = Recording()
        batched = BatchedTransport(real, asyncio.get_running_loop(), busy={"me"})
        batched.write(b"head")
        batched.write(b"body")
        assert real.writes == [b"head", b"body"]

    asyncio.run(run())


def test_while_busy_writes_are_held_for_the_end_of_the_turn_and_kept_in_order() -> None:
    async def run() -> None:
        real = Recording()
        busy = {"me", "another"}
        batched = BatchedTransport(real, asyncio.get_running_loop(), busy=busy)
        batched.write(b"HTTP/1.1 200 OK\r\n\r\n")
        batched.write(memoryview(b"first"))
        busy.discard("another")  # alone now: still behind what is held
        batched.writelines([b"-", b"second"])
        assert real.writes == []
        assert batched.get_write_buffer_size() == len(b"HTTP/1.1 200 OK\r\n\r\nfirst-second")
        await _turn()
        assert real.writes == [b"HTTP/1.1 200 OK\r\n\r\nfirst-second"]
        batched.write(b"next")  # nothing held, alone: at once
        assert real.writes[-1] == b"next"

    asyncio.run(run())


def test_large_output_is_not_held_back() -> None:
    async def run() -> None:
        real = Recording()
        batched = BatchedTransport(real, asyncio.get_running_loop(), busy={"me", "another"})
        chunk = b"x" * (FLUSH_BYTES // 4)
        for _ in range(4):
            batched.write(chunk)
        assert real.writes == [chunk * 4], "written once the held bytes reach FLUSH_BYTES"
        batched.write(b"tail")
        await _turn()
        assert real.writes[-1] == b"tail"

    asyncio.run(run())


def test_close_writes_what_is_held_and_abort_drops_it() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        real = Recording()
        batched = BatchedTransport(real, loop, busy={"me", "another"})
        batched.write(b"last words")
        batched.close()
        assert real.writes == [b"last words"] and real.closed

        dropped = Recording()
        batched = BatchedTransport(dropped, loop, busy={"me", "another"})
        batched.write(b"never")
        batched.abort()
        await _turn()
        assert dropped.writes == [] and dropped.aborted

        gone = Recording()
        batched = BatchedTransport(gone, loop, busy={"me", "another"})
        batched.write(b"too late")
        gone.closed = True  # the peer went away before the turn ended
        await _turn()
        assert gone.writes == []

    asyncio.run(run())

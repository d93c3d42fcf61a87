"""Responses written at the end of the event loop's turn while the server is busy.

uvicorn writes each response as it is produced: its head, then its body, each a `write`
syscall made with the GIL held (uvloop does not release it). Profiled with 32 clients
loading tables, those syscalls were ~30 % of the server's GIL time: on loopback a write
also runs the receiver's TCP processing and wakes the client, in the middle of the turn.

While other requests are in flight, writes are instead held and made when the loop has run
everything that was ready (`call_soon`) — head and body in one syscall, after the turn's
other requests have been parsed and answered (Redis answers its clients this way, before
it polls again). A lone request is written at once: waiting for the next turn would add
its latency (one client: -15 % loadTable/s when every response waited). Held bytes are
written at once past `FLUSH_BYTES`, so a long response streams with the transport's own
flow control, and before the connection closes.

Measured (docs/benchmarks.md, session 11): loadTable +11-25 % at 32 clients. uvicorn
writes through it by api/adapters/uvicorn.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sized
from typing import Any

FLUSH_BYTES = 64 * 1024


class BatchedTransport(asyncio.Transport):
    """`transport` with writes held (see the module) while `busy()` says so."""

    def __init__(
        self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop, busy: Sized
    ) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._busy = busy  # the server's running request tasks (one of them is the writer)
        self._held: list[bytes] = []
        self._held_bytes = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._held and len(self._busy) <= 1:
            self._transport.write(data)
            return
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(bytes(data))
        self._held_bytes += len(data)
        if self._held_bytes >= FLUSH_BYTES:
            self.flush()

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Write what is held, in one syscall (called by the loop, or before a close)."""
        if not self._held:
            return
        data = b"".join(self._held)
        self._held.clear()
        self._held_bytes = 0
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held.clear()
        self._held_bytes = 0
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._held_bytes

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

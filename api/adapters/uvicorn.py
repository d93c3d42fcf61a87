"""uvicorn's HTTP protocol with its writes batched (written for uvicorn 0.30 to 0.x).

`BatchedHttpProtocol` is uvicorn's httptools protocol with the connection's transport
wrapped in a `BatchedTransport` (api/batched_writes.py). It relies on three things of
`HttpToolsProtocol` that are not uvicorn's public API:

- it writes every byte of a response through the transport `connection_made` was given;
- `self.loop` is the event loop the protocol runs on;
- `self.tasks` is the server's set of running request tasks (its size tells whether other
  requests are in flight).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from icelog.api.batched_writes import BatchedTransport

WRITTEN_FOR = ((0, 30), (1, 0))  # uvicorn versions: from, up to (excluded)


class BatchedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, writing through a `BatchedTransport`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(BatchedTransport(transport, self.loop, self.tasks))

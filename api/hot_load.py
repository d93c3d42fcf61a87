"""loadTable's route as a plain ASGI app: the same answer, without Starlette's endpoint layer.

A Starlette route wraps a function endpoint in `request_response` (a Request, an exception
wrapper, a Response object and its header rendering) and the typed edge (`serve`) adds its
own call layer: together about a tenth of a small loadTable's CPU, profiled. loadTable is
the request every engine sends most (each Spark task, each refresh), so its route takes a
shorter way for GET: it runs the route's guard as `serve` does, builds the answer with the
same function as the endpoint (`tables.load_table_answer`) and sends it as two ASGI
messages. Everything else is unchanged: routing and the path parameters, the middleware
(request ids, metrics, access log, timeouts), and errors — raised here, they are rendered
by the app's exception handlers as on every route. HEAD goes to the regular endpoint.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import request_response
from starlette.types import Receive, Scope, Send

from icelog.api.edge import Operation, guard_request, serve
from icelog.api.routes.tables import load_table_answer

_JSON = (b"content-type", b"application/json")


class HotLoadTable:
    """The ASGI app of the loadTable route (GET; HEAD through the regular endpoint)."""

    def __init__(self, operation: Operation) -> None:
        self.operation = operation
        self.regular = request_response(serve(operation))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "GET":
            await self.regular(scope, receive, send)
            return
        request = Request(scope, receive)
        await guard_request(self.operation, request, {})
        answer = await load_table_answer(request)
        assert answer is not None, "only HEAD has no answer"
        status, body, etag = answer
        headers: list[tuple[bytes, bytes]] = []
        if etag is not None:
            headers.append((b"etag", etag.encode("latin-1")))
        if status != 304:
            headers += [(b"content-length", str(len(body)).encode("latin-1")), _JSON]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

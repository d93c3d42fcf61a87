"""Idempotency-Key on mutating catalog routes (Iceberg REST spec, 1.11+ clients; ADR 0012).

One outcome per key, on any replica and any `--workers` process, because every step is in
the shared log:

1. the request claims the key (an append: of two requests claiming at once, one wins);
2. its command's first append lands the key in the same transaction (`CatalogApplication.save_all`):
   a request that took over an abandoned claim can therefore never apply the change a
   second time — the other's append would conflict on the key;
3. the final response is recorded (2xx, or a deterministic 4xx); a 5xx is not final, and
   the key is released for a retry unless the command landed.

A request that finds the key claimed waits for that request's outcome and answers with
it; finds it landed without an outcome (its request died between append and answer),
answers from the log; finds it recorded, replays it. Recorded answers never hold the
metadata document or storage configuration (vended credentials are secrets): they are
rebuilt from the immutable metadata location, with fresh credentials.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from icelog.api.auth.guards import authorization_on, data_rights, new_table_rights
from icelog.api.errors import error_response
from icelog.api.http import context, json_response, namespace_param, path_param
from icelog.api.routes import prefix, services
from icelog.api.routes.tables import table_access
from icelog.api.services import Services
from icelog.api.storage_access import TableAccess
from icelog.api.threads import run_in_thread
from icelog.domain.context import RequestContext
from icelog.domain.errors import (
    BadRequestError,
    CatalogError,
    ServiceUnavailableError,
    UnprocessableEntityError,
)
from icelog.domain.idempotency import (
    HeldClaim,
    IdempotencyRecord,
    IdempotentReplay,
    hold,
    release_hold,
)
from icelog.domain.identifiers import TabularName
from icelog.domain.permissions import ALL_DATA, NO_DATA, DataRights, ObjectRef

log = logging.getLogger("icelog.idempotency")
HEADER = "idempotency-key"
# Outcomes that say nothing final about the request: not recorded, so a retry runs again.
_NOT_FINAL = {401, 403, 408, 419, 429}
# Never recorded: rebuilt on replay (the document is immutable at its location; the
# storage configuration may hold vended credentials and is vended afresh).
_REBUILT = ("metadata", "config", "storage-credentials")
_POLL_S = 0.02
# How long a request that landed its command may take to record its answer before
# another request with the key answers from the log instead.
_LANDED_GRACE_MS = 2_000


# The catalog operations that take an Idempotency-Key (the spec's mutating operations):
# (method, route template below the prefix). Not signing (its answer is a signature, a
# credential for 15 minutes), metrics or credentials.
KEYED_ROUTES = frozenset(
    {
        ("POST", "/namespaces"),
        ("DELETE", "/namespaces/{namespace}"),
        ("POST", "/namespaces/{namespace}/properties"),
        ("POST", "/namespaces/{namespace}/tables"),
        ("POST", "/namespaces/{namespace}/tables/{table}"),
        ("DELETE", "/namespaces/{namespace}/tables/{table}"),
        ("POST", "/namespaces/{namespace}/tables/{table}/unregister"),
        ("POST", "/namespaces/{namespace}/register"),
        ("POST", "/tables/rename"),
        ("POST", "/transactions/commit"),
        ("POST", "/namespaces/{namespace}/views"),
        ("POST", "/namespaces/{namespace}/views/{view}"),
        ("DELETE", "/namespaces/{namespace}/views/{view}"),
        ("POST", "/namespaces/{namespace}/register-view"),
        ("POST", "/views/rename"),
    }
)


def applies(request: Request) -> bool:
    return HEADER in request.headers and request.method in ("POST", "DELETE")


def _key(request: Request) -> str:
    raw = request.headers[HEADER].strip()
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        raise BadRequestError("Idempotency-Key must be a UUID (UUIDv7 in string form)") from None


def idempotent(
    endpoint: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a catalog endpoint (one of KEYED_ROUTES) so that requests carrying an
    Idempotency-Key are replayed."""

    async def wrapped(request: Request) -> Response:
        if applies(request):
            return await KeyedRequest(request).run(lambda: endpoint(request))
        return await endpoint(request)

    return wrapped


class KeyedRequest:
    """One request carrying an Idempotency-Key, through claim, command and outcome."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.svc: Services = services(request)
        self.key = _key(request)
        self.ctx: RequestContext = context(request)
        self.token = uuid.uuid4().hex
        self.method = request.method
        self.path = request.url.path
        settings = self.svc.settings
        self.lifetime_ms = settings.idempotency_lifetime_seconds * 1000
        timeout_s = settings.request_timeout_seconds or 60.0
        # A claimant may run as long as a request may, and a little longer (its handler
        # stops at the next safe point after the timeout); then the key can be taken over.
        self.lease_ms = int((timeout_s + 10) * 1000)
        # A waiter stops waiting before its own request times out.
        self.wait_s = max(1.0, timeout_s - 1.0)

    async def run(self, handler: Callable[[], Awaitable[Response]]) -> Response:
        # The whole body first: one over the size limit is refused (413) before the key is
        # claimed, so that nothing is appended for it.
        await self.request.body()
        deadline = time.monotonic() + self.wait_s
        while True:
            attempt = await run_in_thread(
                self.svc.catalog.idempotency.claim_idempotency,
                self.ctx,
                key=self.key,
                method=self.method,
                path=self.path,
                token=self.token,
                lease_ms=self.lease_ms,
                lifetime_ms=self.lifetime_ms,
            )
            if attempt.claimed:
                outcome = await self._run_claimed(attempt.record, handler)
                if outcome is not None:
                    return outcome
                # Taken over while it ran (its lease ran out): the other request's
                # outcome is this request's too.
            else:
                answer = await self._answer_from(attempt.record)
                if answer is not None:
                    return answer
            if time.monotonic() > deadline:
                raise ServiceUnavailableError(
                    "A request with the same Idempotency-Key is still in progress; retry later"
                )
            await asyncio.sleep(_POLL_S)

    async def _run_claimed(
        self, record: IdempotencyRecord, handler: Callable[[], Awaitable[Response]]
    ) -> Response | None:
        held = HeldClaim(record.id, self.token, self.ctx.actor, self.ctx.request_id)
        binding = hold(held)
        unexpected: Exception | None = None
        try:
            response = await handler()
        except IdempotentReplay:
            return None
        except CatalogError as exc:
            # Rendered here (not by the app's handler) so a final 4xx is recorded too.
            response = error_response(exc.status, exc.error_type, exc.message)
        except Exception as exc:
            unexpected = exc
        finally:
            release_hold(binding)  # before the key's own appends: they land nothing
        if unexpected is not None:
            # Not final (a 500): free the key for a retry unless the command landed.
            await run_in_thread(
                self.svc.catalog.idempotency.release_idempotency,
                self.ctx,
                key=self.key,
                token=self.token,
            )
            raise unexpected
        status = response.status_code
        try:
            if status < 500 and status not in _NOT_FINAL:
                body, location = _recordable(bytes(response.body))
                recorded = await self._complete(status, body, location)
                if recorded is not None and recorded.claim_token != self.token:
                    return None  # taken over: the other request's outcome is the answer
            else:
                await run_in_thread(
                    self.svc.catalog.idempotency.release_idempotency,
                    self.ctx,
                    key=self.key,
                    token=self.token,
                )
        except Exception:
            # The answer stands. The key's claim says whether the command landed, so a
            # retry still gets one outcome: answered from the log, or run again.
            log.warning("could not record the Idempotency-Key outcome", exc_info=True)
        return response

    async def _answer_from(self, record: IdempotencyRecord) -> Response | None:
        """The answer another request's claim gives this one, or None to keep waiting."""
        if (record.method, record.path) != (self.method, self.path) or not record.used_by(
            self.ctx.actor
        ):
            # Another user's key answers as a different request would (422, the same
            # words): its outcome is theirs, and whether they used it is theirs too.
            raise UnprocessableEntityError(
                "Idempotency-Key was already used for a different request"
            )
        if record.has_outcome:
            return await self._replay(record.status or 200, record.body, record.metadata_location)
        if not record.landed:
            return None
        if time.time() * 1000 - record.landed_at_ms < _LANDED_GRACE_MS:
            return None  # its request is most likely recording its answer right now
        body = _landed_body(self.request, await self._request_json(), record.landed_location)
        status = 204 if body is None else 200
        text = orjson.dumps(body).decode() if body is not None else ""
        recorded = await self._complete(status, text, record.landed_location)
        if recorded is None or not recorded.has_outcome:
            return None
        return await self._replay(recorded.status or 200, recorded.body, recorded.metadata_location)

    async def _complete(
        self, status: int, body: str, metadata_location: str | None
    ) -> IdempotencyRecord | None:
        """Record the key's outcome (None: the key is gone)."""
        return await run_in_thread(
            self.svc.catalog.idempotency.complete_idempotency,
            self.ctx,
            key=self.key,
            token=self.token,
            status=status,
            body=body,
            metadata_location=metadata_location,
        )

    async def _replay(self, status: int, body: str, metadata_location: str | None) -> Response:
        if not body:
            return Response(status_code=status)
        answer = orjson.loads(body)
        if not isinstance(answer, dict) or (metadata_location is None and "config" not in answer):
            return Response(body.encode(), status_code=status, media_type="application/json")
        warehouse_id = self.svc.warehouse_for_prefix(prefix(self.request))
        if metadata_location is not None:
            answer["metadata"] = await run_in_thread(
                self.svc.catalog.app.metadata_document, warehouse_id, metadata_location
            )
        document = answer.get("metadata") or {}
        if "config" in answer and "location" in document:
            answer.pop("config")
            name = _tabular_name(self.request, await self._request_json())
            if _is_view_route(self.request) or name is None:
                answer["config"] = {}
            else:
                body = await self._request_json()
                access = await run_in_thread(
                    self._table_access, warehouse_id, name, str(document["location"]), body
                )
                answer |= access.response_fields()
        return json_response(answer, status)

    def _table_access(
        self, warehouse_id: uuid.UUID, name: TabularName, location: str, body: Any
    ) -> TableAccess:
        """A replayed table answer's storage access, vended afresh by the caller's rights
        now (no guard ran: the replay answers before it): on the table that holds the
        answer's location under that name; for a staged create (no such table), by the
        staged-create rule; else none."""
        return table_access(
            self.request, warehouse_id, name, location, _replay_rights(self, name, location, body)
        )

    async def _request_json(self) -> Any:
        raw = await self.request.body()
        try:
            return orjson.loads(raw) if raw.strip() else None
        except orjson.JSONDecodeError:
            return None


def _replay_rights(keyed: KeyedRequest, name: TabularName, location: str, body: Any) -> DataRights:
    request, svc = keyed.request, keyed.svc
    if not authorization_on(request):
        return ALL_DATA
    warehouse_id = str(svc.warehouse_for_prefix(prefix(request)))
    row = svc.queries.load_tabular(warehouse_id, name.namespace, name.name, "table")
    if row is not None and svc.queries.tabular_location(row.id) == location:
        return data_rights(request, ObjectRef("table", str(row.id)))
    data = body if isinstance(body, dict) else {}
    if row is None and data.get("stage-create") is True:
        return new_table_rights(
            request, name.namespace, None, chosen_location=bool(data.get("location"))
        )
    return NO_DATA


def _recordable(body: bytes) -> tuple[str, str | None]:
    """The response body to record, and its metadata location when it is a table or view
    answer: never the storage configuration (kept as `{}`, a marker that the answer
    carries one: it may hold vended credentials, and is vended afresh on replay), and
    without the document when its immutable location is known (re-read on replay)."""
    if not body:
        return "", None
    parsed = orjson.loads(body)
    if not isinstance(parsed, dict):
        return body.decode(), None
    location = parsed.get("metadata-location")
    dropped = _REBUILT if location else ("config", "storage-credentials")
    kept = {k: v for k, v in parsed.items() if k not in dropped}
    if "config" in parsed:
        kept["config"] = {}
    return orjson.dumps(kept).decode(), str(location) if location else None


def _template(request: Request) -> str:
    route = request.scope.get("route")
    return str(getattr(route, "path", ""))


def _is_view_route(request: Request) -> bool:
    template = _template(request)
    return "/views" in template or template.endswith("/register-view")


def _tabular_name(request: Request, body: Any) -> TabularName | None:
    """The table a create/register (name in the body) or commit (name in the path) is for."""
    params = request.path_params
    if "namespace" not in params:
        return None
    ns = namespace_param(request)
    for key in ("table", "view"):
        if key in params:
            return TabularName(ns, path_param(request, key))
    if isinstance(body, dict) and isinstance(body.get("name"), str):
        return TabularName(ns, body["name"])
    return None


def _landed_body(request: Request, body: Any, location: str | None) -> dict[str, Any] | None:
    """What a request whose command landed would have answered, rebuilt from the request
    and the log (its request died before answering). None: 204, no content."""
    if location is not None:
        template = _template(request)
        answer: dict[str, Any] = {"metadata-location": location}
        if not template.endswith("/tables/{table}"):  # a load result, not a commit result
            answer["config"] = {}
        return answer
    if request.method == "DELETE" or _template(request).endswith(
        ("/transactions/commit", "/rename")
    ):
        return None
    data = body if isinstance(body, dict) else {}
    if _template(request).endswith("/properties"):
        removals = data.get("removals") or []
        updates = data.get("updates") or {}
        return {"updated": sorted(updates), "removed": sorted(removals), "missing": []}
    if _template(request).endswith("/namespaces"):
        return {"namespace": data.get("namespace"), "properties": data.get("properties") or {}}
    return {}

"""The Starlette application: Iceberg REST at /catalog/v1, management at /management/v1."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from icelog.api.adapters.starlette import IndexedRouter
from icelog.api.audit import Chainer
from icelog.api.auth.authenticate import AuthenticationMiddleware, KnownUsers, token_verifier
from icelog.api.auth.authorizer import AllowAll, GrantAuthorizer
from icelog.api.auth.token_endpoint import tokens
from icelog.api.catalog_api import CATALOG_OPERATIONS, CONFIG
from icelog.api.console import ConsoleHeaders, console_routes
from icelog.api.edge import serve
from icelog.api.errors import catalog_error, error_response, http_error, unexpected_error
from icelog.api.event_log import make_indexer
from icelog.api.hot_load import HotLoadTable, LoadTableLane
from icelog.api.http import RawPathMiddleware, json_response
from icelog.api.idempotency import KEYED_ROUTES, idempotent
from icelog.api.logs import configure_logging, level_number
from icelog.api.management_api import MANAGEMENT_OPERATIONS
from icelog.api.metrics import Metrics, metrics
from icelog.api.observability import ObservabilityMiddleware, Readiness
from icelog.api.openapi import openapi_routes
from icelog.api.publishing import run_relays
from icelog.api.services import Services
from icelog.api.settings import Settings
from icelog.domain.errors import CatalogError

# How long a process trusts the grants it read: a revoke made on another replica takes
# effect within this; refusals, and this process's own grant writes, never wait for it.
GRANT_CACHE_SECONDS = 1.0


def _health(request: Request) -> Response:
    """Liveness: the process serves HTTP (nothing else is asked)."""
    return json_response({"status": "ok"})


async def _ready(request: Request) -> Response:
    """Readiness: the database answers; 503 in the Iceberg error shape otherwise."""
    readiness: Readiness = request.app.state.readiness
    reason = await readiness.check()
    if reason is not None:
        return error_response(503, "ServiceUnavailableException", f"Not ready: {reason}")
    return json_response({"status": "ready"})


def routes() -> list[BaseRoute]:
    found: list[BaseRoute] = [
        Route("/health", _health, methods=["GET"]),
        Route("/ready", _ready, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/catalog/v1/config", serve(CONFIG), methods=["GET"]),
        Route("/catalog/v1/oauth/tokens", tokens, methods=["POST"]),
    ]
    # Unprefixed first: "/v1/namespaces/..." must not be read as prefix "namespaces".
    for base in ("/catalog/v1", "/catalog/v1/{prefix}"):
        for op in CATALOG_OPERATIONS:
            if op.name == "loadTable":
                # The request engines send most takes a shorter way (api/hot_load.py).
                hot = HotLoadTable(op)
                found.append(Route(base + op.path, hot, methods=op.methods, name=op.name))
                continue
            served = serve(op)
            if (op.method, op.path) in KEYED_ROUTES:
                served = idempotent(served)
            found.append(Route(base + op.path, served, methods=op.methods))
    for op in MANAGEMENT_OPERATIONS:
        found.append(Route("/management/v1" + op.path, serve(op), methods=op.methods))
    return [*found, *openapi_routes(), *console_routes()]


def create_app(settings: Settings, services: Services | None = None) -> Starlette:
    figures = Metrics()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        svc = services or Services.build(settings)
        svc.ensure_defaults()
        await svc.reader.open()
        app.state.services = svc
        # Without an identity provider everyone may do everything (docs/auth.md).
        app.state.authorizer = (
            GrantAuthorizer(svc.primary, ttl_s=GRANT_CACHE_SECONDS)
            if settings.auth.enabled
            else AllowAll()
        )
        # An object or principal gone (also by a task, outside any request): no cached
        # decision may go on with the grants that ended with it.
        authorizer = app.state.authorizer
        svc.catalog.app.on_grants_ended = lambda _ended: authorizer.forget()
        app.state.readiness = Readiness(svc)
        figures.attach(svc)
        svc.tasks.start()
        indexer = make_indexer(app.state, svc)
        chainer = Chainer(svc, indexer)
        chainer.start()
        stop_relays = asyncio.Event()
        relays = None
        if settings.publish.run_in_serve:
            relays = asyncio.create_task(
                run_relays(svc, settings.publish.run_in_serve, stop_relays)
            )
        try:
            yield
        finally:
            stop_relays.set()
            if relays is not None:
                await relays
            await asyncio.to_thread(chainer.stop)
            # Let tasks in hand finish (a purge stops at its next lease check).
            await asyncio.to_thread(svc.tasks.stop)
            await svc.reader.close()
            figures.detach(svc)
            if services is None:
                svc.close()

    found = routes()
    app = Starlette(
        routes=found,
        lifespan=lifespan,
        exception_handlers={
            CatalogError: catalog_error,
            HTTPException: http_error,
            Exception: unexpected_error,
        },
    )
    # Same routes, matched through an index (api/adapters/starlette.py); set before the
    # first request builds the middleware stack around it.
    app.router = IndexedRouter(app.router.routes, lifespan=lifespan)
    app.state.metrics = figures.registry
    app.state.known_users = KnownUsers()
    # Innermost (inside authentication): GET loadTable goes past the router (api/hot_load.py).
    app.add_middleware(
        LoadTableLane,
        routes=found,
        handlers={CatalogError: catalog_error, HTTPException: http_error},
    )
    # Inside RawPathMiddleware, which copies the scope: the router's `route` (the template
    # the metrics and the access log name) is set on the scope this middleware holds.
    if settings.auth.enabled:
        verifier = token_verifier(settings.auth)
        app.state.token_verifier = verifier  # also the token endpoint's way to the provider
        # Innermost: a 401 is logged and counted like any other answer.
        app.add_middleware(
            AuthenticationMiddleware,
            verifier=verifier,
            settings=settings.auth,
            known=app.state.known_users,
        )
    app.add_middleware(
        ObservabilityMiddleware,
        metrics=figures,
        max_body_bytes=settings.max_request_body_bytes,
        timeout_s=settings.request_timeout_seconds,
        access_log=level_number(settings.log_level) <= logging.INFO,
    )
    app.add_middleware(ConsoleHeaders)
    app.add_middleware(RawPathMiddleware)
    return app


def create_app_from_env() -> Starlette:
    """Factory for `uvicorn --factory` (used with several workers): each worker process
    starts afresh, so it sets up logging itself."""
    settings = Settings.from_env()
    configure_logging(settings.log_format, settings.log_level)
    app = create_app(settings)
    freeze_startup_heap()
    return app


def freeze_startup_heap() -> None:
    """Called by the server once everything is imported and built, before serving.

    What exists at that point (libraries, schemas, the app) lives as long as the process:
    keep it out of the cyclic collector. Without this, each full collection walked the
    whole start-up heap and paused the event loop for 60-85 ms — the loadTable p99 under
    load. Not called by tests, which build many apps in one process."""
    gc.collect()
    gc.freeze()

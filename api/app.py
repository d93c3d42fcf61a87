"""The Starlette application: Iceberg REST at /catalog/v1, management at /management/v1."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from icelog.api.audit import Chainer
from icelog.api.errors import catalog_error, error_response, http_error, unexpected_error
from icelog.api.event_log import as_of, list_events, make_indexer, tabular_history
from icelog.api.http import AsyncHandler, RawPathMiddleware, endpoint, json_response
from icelog.api.idempotency import KEYED_ROUTES, idempotent
from icelog.api.logs import configure_logging, level_number
from icelog.api.metrics import Metrics, metrics
from icelog.api.observability import ObservabilityMiddleware, Readiness
from icelog.api.openapi import openapi_routes
from icelog.api.publishing import run_relays
from icelog.api.routes import config, lifecycle, management, namespaces, signing, tables, views
from icelog.api.routing import IndexedRouter
from icelog.api.services import Services
from icelog.api.settings import Settings
from icelog.domain.errors import CatalogError

Handler = Callable[[Request, Any], Response] | AsyncHandler

# (methods, path below /v1 or /v1/{prefix}, handler). Every route is served with and
# without the warehouse prefix: clients drop the segment when no prefix is configured.
CATALOG_ROUTES: list[tuple[list[str], str, Handler]] = [
    (["GET"], "/namespaces", namespaces.list_namespaces),
    (["POST"], "/namespaces", namespaces.create_namespace),
    (["GET", "HEAD"], "/namespaces/{namespace}", namespaces.load_namespace),
    (["DELETE"], "/namespaces/{namespace}", namespaces.drop_namespace),
    (["POST"], "/namespaces/{namespace}/properties", namespaces.update_properties),
    (["GET"], "/namespaces/{namespace}/tables", tables.list_tables),
    (["POST"], "/namespaces/{namespace}/tables", tables.create_table),
    (["GET", "HEAD"], "/namespaces/{namespace}/tables/{table}", tables.load_table),
    (["POST"], "/namespaces/{namespace}/tables/{table}", tables.commit_table),
    (["DELETE"], "/namespaces/{namespace}/tables/{table}", tables.drop_table),
    (["POST"], "/namespaces/{namespace}/tables/{table}/metrics", tables.report_metrics),
    (["POST"], "/namespaces/{namespace}/register", tables.register_table),
    (["POST"], "/tables/rename", tables.rename_table),
    (["POST"], "/transactions/commit", tables.commit_transaction),
    (["GET"], "/namespaces/{namespace}/tables/{table}/credentials", tables.load_credentials),
    (["POST"], "/namespaces/{namespace}/tables/{table}/sign", signing.sign_table_request),
    (["POST"], "/v1/aws/s3/sign", signing.sign_warehouse_request),
    (["GET"], "/namespaces/{namespace}/views", views.list_views),
    (["POST"], "/namespaces/{namespace}/views", views.create_view),
    (["GET", "HEAD"], "/namespaces/{namespace}/views/{view}", views.load_view),
    (["POST"], "/namespaces/{namespace}/views/{view}", views.replace_view),
    (["DELETE"], "/namespaces/{namespace}/views/{view}", views.drop_view),
    (["POST"], "/namespaces/{namespace}/register-view", views.register_view),
    (["POST"], "/views/rename", views.rename_view),
]

MANAGEMENT_ROUTES: list[tuple[list[str], str, Handler]] = [
    (["GET"], "/info", management.info),
    (["POST"], "/bootstrap", management.bootstrap),
    (["POST"], "/project", management.create_project),
    (["GET"], "/project", management.get_project),
    (["DELETE"], "/project", management.delete_project),
    (["POST"], "/project/rename", management.rename_project),
    (["GET"], "/project-list", management.list_projects),
    (["GET"], "/project/{project_id}", management.get_project),
    (["DELETE"], "/project/{project_id}", management.delete_project),
    (["POST"], "/project/{project_id}/rename", management.rename_project),
    (["POST"], "/warehouse", management.create_warehouse),
    (["GET"], "/warehouse", management.list_warehouses),
    (["GET"], "/warehouse/{warehouse_id}", management.get_warehouse),
    (["DELETE"], "/warehouse/{warehouse_id}", management.delete_warehouse),
    (["POST"], "/warehouse/{warehouse_id}/rename", management.rename_warehouse),
    (["POST"], "/warehouse/{warehouse_id}/delete-profile", management.update_delete_profile),
    (["POST"], "/warehouse/{warehouse_id}/storage", management.update_storage),
    (
        ["POST"],
        "/warehouse/{warehouse_id}/storage-credential",
        management.update_storage_credential,
    ),
    (
        ["DELETE"],
        "/warehouse/{warehouse_id}/namespace/{namespace_id}",
        management.drop_namespace_by_id,
    ),
    (["GET"], "/warehouse/{warehouse_id}/deleted-tabulars", lifecycle.list_deleted_tabulars),
    (["POST"], "/warehouse/{warehouse_id}/deleted-tabulars/undrop", lifecycle.undrop_tabulars),
    # Lakekeeper's deprecated spelling, still sent by older clients.
    (["POST"], "/warehouse/{warehouse_id}/deleted_tabulars/undrop", lifecycle.undrop_tabulars),
    (["POST"], "/warehouse/{warehouse_id}/task/list", lifecycle.list_tasks),
    (["GET"], "/warehouse/{warehouse_id}/task/by-id/{task_id}", lifecycle.get_task),
    (["GET"], "/events", list_events),
    (["GET"], "/as-of", as_of),
    (["GET"], "/warehouse/{warehouse_id}/table/{table_id}/history", tabular_history),
    (["GET"], "/warehouse/{warehouse_id}/view/{view_id}/history", tabular_history),
    (["GET"], "/warehouse/{warehouse_id}/protection", management.get_protection),
    (["POST"], "/warehouse/{warehouse_id}/protection", management.set_protection),
    *(
        (methods, f"/warehouse/{{warehouse_id}}/{kind}/{{{kind}_id}}/protection", handler)
        for kind in ("table", "view", "namespace")
        for methods, handler in (
            (["GET"], management.get_protection),
            (["POST"], management.set_protection),
        )
    ),
]


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
        Route("/catalog/v1/config", endpoint(config.get_config), methods=["GET"]),
    ]
    # Unprefixed first: "/v1/namespaces/..." must not be read as prefix "namespaces".
    for base in ("/catalog/v1", "/catalog/v1/{prefix}"):
        for methods, path, handler in CATALOG_ROUTES:
            served = endpoint(handler)
            if any((method, path) in KEYED_ROUTES for method in methods):
                served = idempotent(served)
            found.append(Route(base + path, served, methods=methods))
    for methods, path, handler in MANAGEMENT_ROUTES:
        found.append(Route("/management/v1" + path, endpoint(handler), methods=methods))
    return [*found, *openapi_routes()]


def create_app(settings: Settings, services: Services | None = None) -> Starlette:
    figures = Metrics()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        svc = services or Services.build(settings)
        svc.ensure_defaults()
        await svc.reader.open()
        app.state.services = svc
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

    app = Starlette(
        routes=routes(),
        lifespan=lifespan,
        exception_handlers={
            CatalogError: catalog_error,
            HTTPException: http_error,
            Exception: unexpected_error,
        },
    )
    # Same routes, matched through an index (api/routing.py); set before the first request
    # builds the middleware stack around it.
    app.router = IndexedRouter(app.router.routes, lifespan=lifespan)
    app.state.metrics = figures.registry
    # Inside RawPathMiddleware, which copies the scope: the router's `route` (the template
    # the metrics and the access log name) is set on the scope this middleware holds.
    app.add_middleware(
        ObservabilityMiddleware,
        metrics=figures,
        max_body_bytes=settings.max_request_body_bytes,
        timeout_s=settings.request_timeout_seconds,
        access_log=level_number(settings.log_level) <= logging.INFO,
    )
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

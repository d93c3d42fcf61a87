"""GET /v1/config: how a client finds its warehouse and what the server serves."""

from __future__ import annotations

from uuid import UUID

from starlette.requests import Request

from icelog.api.auth.guards import require
from icelog.api.models.catalog import CatalogConfig, ConfigQuery
from icelog.api.routes import services
from icelog.domain.errors import BadRequestError, NoSuchWarehouseError
from icelog.domain.identifiers import NIL_UUID, reject_control_characters
from icelog.domain.permissions import ObjectRef

# Exactly the routes this server serves: clients treat the list as a contract, and
# DuckDB sends all commits to transactions/commit whenever it is listed.
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/tables/rename",
    # Atomic: all table changes are one append (DuckDB sends every commit here when listed).
    "POST /v1/{prefix}/transactions/commit",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign",
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/register-view",
    "POST /v1/{prefix}/views/rename",
    "GET /v1/{prefix}/namespaces/{namespace}/functions",
    "GET /v1/{prefix}/namespaces/{namespace}/functions/{function}",
    "POST /v1/{prefix}/events",
]


def project_id(request: Request) -> str:
    raw = request.headers.get("x-project-id")
    if not raw:
        return str(NIL_UUID)
    try:
        return str(UUID(raw))
    except ValueError:
        raise BadRequestError(f"x-project-id must be a UUID, got {raw!r}") from None


def get_config(request: Request, query: ConfigQuery) -> CatalogConfig:
    svc = services(request)
    wanted = query.warehouse
    if wanted:
        reject_control_characters(wanted, "warehouse")
        warehouse = svc.queries.warehouse_by_name(project_id(request), wanted)
        if warehouse is None:
            try:
                warehouse = svc.queries.warehouse(str(UUID(wanted)))
            except ValueError:
                warehouse = None
        if warehouse is None:
            raise NoSuchWarehouseError(f"Warehouse does not exist: {wanted}")
        warehouse_id = str(warehouse["id"])
    else:
        warehouse_id = svc.default_warehouse_id()
    if request.app.state.authorizer.enabled:
        # `get_config` is `navigate`: a grant anywhere in the warehouse (a namespace, a
        # table, a view) is enough to reach it — an engine configures itself here before
        # it touches the one object it may use. Anyone else: "does not exist", as asked.
        require(request, ObjectRef("warehouse", warehouse_id), "get_config", wanted or "")
    return CatalogConfig(
        defaults={},
        overrides={"prefix": warehouse_id, "namespace-separator": "%1F"},
        endpoints=ENDPOINTS,
        idempotency_key_lifetime=f"PT{svc.settings.idempotency_lifetime_seconds}S",
    )

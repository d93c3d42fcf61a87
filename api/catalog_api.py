"""The Iceberg REST catalog's operations (`/catalog/v1` and `/catalog/v1/{prefix}`): every route
is served with and without the warehouse prefix; clients drop the segment when no prefix is
configured. Documented by the official spec (api/openapi.py); the models here check what the
handlers take."""

from __future__ import annotations

from icelog.api.auth import guards as g
from icelog.api.edge import Operation
from icelog.api.models.catalog import (
    CatalogConfig,
    CommitTableRequest,
    CommitTransactionRequest,
    CommitViewRequest,
    ConfigQuery,
    CreateNamespaceRequest,
    CreateNamespaceResponse,
    CreateTableRequest,
    CreateViewRequest,
    DropNamespaceQuery,
    DropTableQuery,
    ListNamespacesQuery,
    ListNamespacesResponse,
    ListTablesResponse,
    LoadCredentialsResponse,
    PageQuery,
    RegisterTableRequest,
    RegisterViewRequest,
    RenameTableRequest,
    ReportMetricsRequest,
    S3SignRequest,
    S3SignResponse,
    UpdateNamespacePropertiesRequest,
    UpdateNamespacePropertiesResponse,
    ViewResult,
)
from icelog.api.models.events import QueryEventsRequest
from icelog.api.models.functions import ListFunctionsResponse
from icelog.api.routes import config, functions, iceberg_events, namespaces, signing, tables, views

CONFIG = Operation("GET", "/config", config.get_config, query=ConfigQuery, response=CatalogConfig)

NS = "/namespaces/{namespace}"
TABLE = NS + "/tables/{table}"
VIEW = NS + "/views/{view}"
FUNCTION = NS + "/functions/{function}"


def _on(kind: str, action: str) -> g.Guard:
    """The right `action` on the table or view the path names (its parameter is the kind)."""
    return g.on_tabular(kind, action, kind)


# In the order they are matched: a route with the warehouse prefix may read like another
# without it (`/namespaces/namespaces`), and the first wins.
CATALOG_OPERATIONS: list[Operation] = [
    # -- namespaces
    Operation("GET", "/namespaces", namespaces.list_namespaces, query=ListNamespacesQuery,
              response=ListNamespacesResponse, guard=g.on_list("namespace")),
    Operation("POST", "/namespaces", namespaces.create_namespace, body=CreateNamespaceRequest,
              response=CreateNamespaceResponse, guard=g.on_new_namespace),
    Operation("GET", NS, namespaces.load_namespace, response=CreateNamespaceResponse,
              also_head=True, guard=g.on_namespace("get_metadata")),
    Operation("DELETE", NS, namespaces.drop_namespace, query=DropNamespaceQuery,
              guard=g.on_namespace("delete")),
    Operation("POST", NS + "/properties", namespaces.update_properties,
              body=UpdateNamespacePropertiesRequest, response=UpdateNamespacePropertiesResponse,
              guard=g.on_namespace("update_properties")),
    # -- tables
    Operation("GET", NS + "/tables", tables.list_tables, query=PageQuery,
              response=ListTablesResponse, guard=g.on_list("table")),
    Operation("POST", NS + "/tables", tables.create_table, body=CreateTableRequest,
              guard=g.on_namespace("create_table")),
    Operation("GET", TABLE, tables.load_table, also_head=True, guard=_on("table", "get_metadata")),
    Operation("POST", TABLE, tables.commit_table, body=CommitTableRequest, guard=g.on_table_commit),
    Operation("DELETE", TABLE, tables.drop_table, query=DropTableQuery, guard=_on("table", "drop")),
    Operation("POST", TABLE + "/metrics", tables.report_metrics, body=ReportMetricsRequest,
              guard=_on("table", "get_metadata")),
    Operation("POST", TABLE + "/unregister", tables.unregister_table, guard=_on("table", "drop")),
    Operation("POST", NS + "/register", tables.register_table, body=RegisterTableRequest,
              guard=g.on_register),
    Operation("POST", "/tables/rename", tables.rename_table, body=RenameTableRequest,
              guard=g.on_rename("table")),
    Operation("POST", "/transactions/commit", tables.commit_transaction,
              body=CommitTransactionRequest, guard=g.on_transaction),
    Operation("GET", TABLE + "/credentials", tables.load_credentials,
              response=LoadCredentialsResponse, guard=_on("table", "read_data")),
    Operation("POST", TABLE + "/sign", signing.sign_table_request, body=S3SignRequest,
              response=S3SignResponse, guard=g.on_sign),
    Operation("POST", "/v1/aws/s3/sign", signing.sign_warehouse_request, body=S3SignRequest,
              response=S3SignResponse, guard=g.on_warehouse_sign),
    # -- views
    Operation("GET", NS + "/views", views.list_views, query=PageQuery,
              response=ListTablesResponse, guard=g.on_list("view")),
    Operation("POST", NS + "/views", views.create_view, body=CreateViewRequest,
              response=ViewResult, guard=g.on_namespace("create_view")),
    Operation("GET", VIEW, views.load_view, also_head=True, guard=_on("view", "get_metadata")),
    Operation("POST", VIEW, views.replace_view, body=CommitViewRequest, response=ViewResult,
              guard=_on("view", "commit")),
    Operation("DELETE", VIEW, views.drop_view, guard=_on("view", "drop")),
    Operation("POST", NS + "/register-view", views.register_view, body=RegisterViewRequest,
              response=ViewResult, guard=g.on_namespace("create_view")),
    Operation("POST", "/views/rename", views.rename_view, body=RenameTableRequest,
              guard=g.on_rename("view")),
    # -- functions: main's spec (after 1.11), read only; written through the management API.
    Operation("GET", NS + "/functions", functions.list_functions, query=PageQuery,
              response=ListFunctionsResponse, guard=g.on_namespace("list_functions")),
    Operation("GET", FUNCTION, functions.load_function, guard=g.on_namespace("load_function")),
    # apache/iceberg PR #12584 (not in a released spec yet): the warehouse's changes, all
    # of them (unfiltered): describe on the warehouse, not just a way into it.
    Operation("POST", "/events", iceberg_events.query_events, body=QueryEventsRequest,
              guard=g.on_warehouse("list_everything")),
]  # fmt: skip

"""The Iceberg REST catalog's operations (`/catalog/v1` and `/catalog/v1/{prefix}`): every route
is served with and without the warehouse prefix; clients drop the segment when no prefix is
configured. Documented by the official spec (api/openapi.py); the models here check what the
handlers take."""

from __future__ import annotations

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
from icelog.api.routes import config, namespaces, signing, tables, views

CONFIG = Operation("GET", "/config", config.get_config, query=ConfigQuery, response=CatalogConfig)

NS = "/namespaces/{namespace}"
TABLE = NS + "/tables/{table}"
VIEW = NS + "/views/{view}"

CATALOG_OPERATIONS: list[Operation] = [
    Operation(
        "GET",
        "/namespaces",
        namespaces.list_namespaces,
        query=ListNamespacesQuery,
        response=ListNamespacesResponse,
    ),
    Operation(
        "POST",
        "/namespaces",
        namespaces.create_namespace,
        body=CreateNamespaceRequest,
        response=CreateNamespaceResponse,
    ),
    Operation(
        "GET", NS, namespaces.load_namespace, response=CreateNamespaceResponse, also_head=True
    ),
    Operation("DELETE", NS, namespaces.drop_namespace, query=DropNamespaceQuery),
    Operation(
        "POST",
        NS + "/properties",
        namespaces.update_properties,
        body=UpdateNamespacePropertiesRequest,
        response=UpdateNamespacePropertiesResponse,
    ),
    Operation(
        "GET", NS + "/tables", tables.list_tables, query=PageQuery, response=ListTablesResponse
    ),
    Operation("POST", NS + "/tables", tables.create_table, body=CreateTableRequest),
    Operation("GET", TABLE, tables.load_table, also_head=True),
    Operation("POST", TABLE, tables.commit_table, body=CommitTableRequest),
    Operation("DELETE", TABLE, tables.drop_table, query=DropTableQuery),
    Operation("POST", TABLE + "/metrics", tables.report_metrics, body=ReportMetricsRequest),
    Operation("POST", NS + "/register", tables.register_table, body=RegisterTableRequest),
    Operation("POST", "/tables/rename", tables.rename_table, body=RenameTableRequest),
    Operation(
        "POST", "/transactions/commit", tables.commit_transaction, body=CommitTransactionRequest
    ),
    Operation(
        "GET", TABLE + "/credentials", tables.load_credentials, response=LoadCredentialsResponse
    ),
    Operation(
        "POST",
        TABLE + "/sign",
        signing.sign_table_request,
        body=S3SignRequest,
        response=S3SignResponse,
    ),
    Operation(
        "POST",
        "/v1/aws/s3/sign",
        signing.sign_warehouse_request,
        body=S3SignRequest,
        response=S3SignResponse,
    ),
    Operation("GET", NS + "/views", views.list_views, query=PageQuery, response=ListTablesResponse),
    Operation(
        "POST", NS + "/views", views.create_view, body=CreateViewRequest, response=ViewResult
    ),
    Operation("GET", VIEW, views.load_view, also_head=True),
    Operation("POST", VIEW, views.replace_view, body=CommitViewRequest, response=ViewResult),
    Operation("DELETE", VIEW, views.drop_view),
    Operation(
        "POST",
        NS + "/register-view",
        views.register_view,
        body=RegisterViewRequest,
        response=ViewResult,
    ),
    Operation("POST", "/views/rename", views.rename_view, body=RenameTableRequest),
]

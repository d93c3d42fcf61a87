"""The Iceberg REST catalog's operations (`/catalog/v1` and `/catalog/v1/{prefix}`): every route
is served with and without the warehouse prefix; clients drop the segment when no prefix is
configured. Documented by the official spec (api/openapi.py)."""

from __future__ import annotations

from icelog.api.edge import Operation, legacy
from icelog.api.routes import namespaces, signing, tables, views

CATALOG_OPERATIONS: list[Operation] = [
    legacy("GET", "/namespaces", namespaces.list_namespaces),
    legacy("POST", "/namespaces", namespaces.create_namespace),
    legacy("GET", "/namespaces/{namespace}", namespaces.load_namespace, also_head=True),
    legacy("DELETE", "/namespaces/{namespace}", namespaces.drop_namespace),
    legacy("POST", "/namespaces/{namespace}/properties", namespaces.update_properties),
    legacy("GET", "/namespaces/{namespace}/tables", tables.list_tables),
    legacy("POST", "/namespaces/{namespace}/tables", tables.create_table),
    legacy("GET", "/namespaces/{namespace}/tables/{table}", tables.load_table, also_head=True),
    legacy("POST", "/namespaces/{namespace}/tables/{table}", tables.commit_table),
    legacy("DELETE", "/namespaces/{namespace}/tables/{table}", tables.drop_table),
    legacy("POST", "/namespaces/{namespace}/tables/{table}/metrics", tables.report_metrics),
    legacy("POST", "/namespaces/{namespace}/register", tables.register_table),
    legacy("POST", "/tables/rename", tables.rename_table),
    legacy("POST", "/transactions/commit", tables.commit_transaction),
    legacy("GET", "/namespaces/{namespace}/tables/{table}/credentials", tables.load_credentials),
    legacy("POST", "/namespaces/{namespace}/tables/{table}/sign", signing.sign_table_request),
    legacy("POST", "/v1/aws/s3/sign", signing.sign_warehouse_request),
    legacy("GET", "/namespaces/{namespace}/views", views.list_views),
    legacy("POST", "/namespaces/{namespace}/views", views.create_view),
    legacy("GET", "/namespaces/{namespace}/views/{view}", views.load_view, also_head=True),
    legacy("POST", "/namespaces/{namespace}/views/{view}", views.replace_view),
    legacy("DELETE", "/namespaces/{namespace}/views/{view}", views.drop_view),
    legacy("POST", "/namespaces/{namespace}/register-view", views.register_view),
    legacy("POST", "/views/rename", views.rename_view),
]

"""OpenAPI documents for what icelog serves, and a Swagger UI page that lists them.

- ``GET /api-docs/catalog/v1/openapi.json``: the official Iceberg REST catalog spec (Apache
  Iceberg 1.10.2, shipped in ``api/specs/``), filtered to exactly the operations advertised in
  ``GET /v1/config`` ``endpoints`` (``api.routes.config.ENDPOINTS``), served under ``/catalog``;
  plus S3 remote signing, which the 1.10.2 catalog spec lacks (`_signing_paths`).
- ``GET /api-docs/management/v1/openapi.json``: the management API (``/management/v1``).
- ``GET /swagger-ui``: Swagger UI, from the files of the ``swagger-ui-bundle-v2`` package
  (served locally, so it works offline).
"""

from __future__ import annotations

import copy
import functools
import importlib.util
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from icelog.api.routes.config import ENDPOINTS

SPEC_PATH = Path(__file__).resolve().parent / "specs" / "rest-catalog-open-api-1.10.2.yaml"
CATALOG_DOC_PATH = "/api-docs/catalog/v1/openapi.json"
MANAGEMENT_DOC_PATH = "/api-docs/management/v1/openapi.json"
SWAGGER_UI_PATH = "/swagger-ui"

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_COMPONENT_REF = "#/components/"


# Served and advertised, but newer than the 1.10.2 spec this document is built from
# (registerView arrived in the 1.11 spec). Integration tests cover it instead.
NEWER_THAN_SPEC = frozenset({("post", "/v1/{prefix}/namespaces/{namespace}/register-view")})


# S3 remote signing, absent from the 1.10.2 catalog spec: the table-scoped `signRequest` path
# of later catalog specs (advertised), and the 1.10.2 S3 signer spec's `/v1/aws/s3/sign` under
# the prefix (not advertised: clients find it through `s3.signer.*`). Both take the signer
# spec's S3SignRequest and answer its S3SignResponse.
TABLE_SIGN_PATH = "/v1/{prefix}/namespaces/{namespace}/tables/{table}/sign"
WAREHOUSE_SIGN_PATH = "/v1/{prefix}/v1/aws/s3/sign"
UNADVERTISED = frozenset({("post", WAREHOUSE_SIGN_PATH)})


def advertised_operations(endpoints: Iterable[str] = ENDPOINTS) -> set[tuple[str, str]]:
    """``"VERB /v1/{prefix}/path"`` entries as ``(method, path)`` pairs, method lower-case,
    without the operations the 1.10.2 spec does not define (`NEWER_THAN_SPEC`)."""
    found: set[tuple[str, str]] = set()
    for entry in endpoints:
        verb, _, path = entry.partition(" ")
        found.add((verb.lower(), path.strip()))
    return found - NEWER_THAN_SPEC


def document_operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    """Every ``(method, path)`` a document defines."""
    return {
        (method, path)
        for path, item in document.get("paths", {}).items()
        for method in item
        if method in HTTP_METHODS
    }


@functools.cache
def official_catalog_spec() -> dict[str, Any]:
    """The Iceberg 1.10.2 REST catalog spec as shipped (parsed once)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with SPEC_PATH.open("rb") as handle:
        spec: dict[str, Any] = _string_keys(yaml.load(handle, Loader=loader))  # noqa: S506 - safe
    return spec


def _string_keys(node: Any) -> Any:
    """YAML reads response codes (``200:``) as integers; JSON and OpenAPI want strings."""
    if isinstance(node, dict):
        return {str(key): _string_keys(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_string_keys(item) for item in node]
    return node


def _refs(node: Any) -> Iterator[str]:
    """Every component reference below ``node`` (``$ref`` and discriminator mappings)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            elif key == "mapping" and isinstance(value, dict):
                yield from (v for v in value.values() if isinstance(v, str))
                yield from _refs(value)
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _prune_components(document: dict[str, Any]) -> None:
    """Drop the components that nothing kept refers to (views, scan planning, ...)."""
    components: dict[str, dict[str, Any]] = document.get("components", {})
    reachable: set[tuple[str, str]] = set()
    pending = [ref for ref in _refs(document.get("paths", {})) if ref.startswith(_COMPONENT_REF)]
    while pending:
        ref = pending.pop()
        if not ref.startswith(_COMPONENT_REF):
            continue
        kind, _, name = ref[len(_COMPONENT_REF) :].partition("/")
        if (kind, name) in reachable or name not in components.get(kind, {}):
            continue
        reachable.add((kind, name))
        pending.extend(_refs(components[kind][name]))
    for kind in list(components):
        kept = {name: v for name, v in components[kind].items() if (kind, name) in reachable}
        if kept:
            components[kind] = kept
        else:
            del components[kind]


def _ref(kind: str, name: str) -> dict[str, str]:
    return {"$ref": f"{_COMPONENT_REF}{kind}/{name}"}


def _signing_components() -> dict[str, dict[str, Any]]:
    """S3Headers, S3SignRequest and S3SignResponse as the 1.10.2 S3 signer spec defines them
    (``aws/src/main/resources/s3-signer-open-api.yaml``, git blob 1e4dafa6c1b7)."""
    headers = {
        "type": "object",
        "additionalProperties": {"type": "array", "items": {"type": "string"}},
    }
    methods = ["PUT", "GET", "HEAD", "POST", "DELETE", "PATCH", "OPTIONS"]
    request = {
        "type": "object",  # as RemoteSignRequest, its successor, says; icelog requires it
        "required": ["region", "uri", "method", "headers"],
        "properties": {
            "region": {"type": "string"},
            "uri": {"type": "string"},
            "method": {"type": "string", "enum": methods},
            "headers": _ref("schemas", "S3Headers"),
            "properties": {"type": "object", "additionalProperties": {"type": "string"}},
            "body": {
                "type": "string",
                "description": "Optional body of the S3 request to send to the signing API. "
                "This should only be populated for S3 requests which do not have the relevant "
                "data in the URI itself (e.g. DeleteObjects requests)",
            },
        },
    }
    response = {
        "description": "The response containing signed & unsigned headers. The server will also "
        "send a Cache-Control header, indicating whether the response can be cached (Cache-Control "
        '= ["private"]) or not (Cache-Control = ["no-cache"]). icelog always sends `no-cache`.',
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["uri", "headers"],
                    "properties": {
                        "uri": {"type": "string"},
                        "headers": _ref("schemas", "S3Headers"),
                    },
                }
            }
        },
    }
    return {
        "schemas": {"S3Headers": headers, "S3SignRequest": request},
        "responses": {"S3SignResponse": response},
    }


def _signing_paths() -> dict[str, Any]:
    """The two sign routes (``api/routes/signing.py``). 403: outside every table's location,
    another region, or remote signing off (file warehouses); 404: no such table/warehouse."""

    def sign(operation_id: str, summary: str, missing: str) -> dict[str, Any]:
        return {
            "tags": ["Catalog API"],
            "summary": summary,
            "operationId": operation_id,
            "requestBody": {
                "description": "The S3 request to sign",
                "content": {"application/json": {"schema": _ref("schemas", "S3SignRequest")}},
                "required": True,
            },
            "responses": {
                "200": _ref("responses", "S3SignResponse"),
                "400": _ref("responses", "BadRequestErrorResponse"),
                "401": _ref("responses", "UnauthorizedResponse"),
                "403": _ref("responses", "ForbiddenResponse"),
                "404": {
                    "description": f"Not Found - {missing}",
                    "content": {
                        "application/json": {"schema": _ref("schemas", "IcebergErrorResponse")}
                    },
                },
                "419": _ref("responses", "AuthenticationTimeoutResponse"),
                "503": _ref("responses", "ServiceUnavailableResponse"),
                "5XX": _ref("responses", "ServerErrorResponse"),
            },
        }

    prefix, namespace, table = (
        _ref("parameters", name) for name in ("prefix", "namespace", "table")
    )
    return {
        TABLE_SIGN_PATH: {
            "parameters": [prefix, namespace, table],
            "post": sign(
                "signRequest",
                "Remotely signs an S3 request inside the table's location",
                "NoSuchTableException, the table does not exist",
            ),
        },
        WAREHOUSE_SIGN_PATH: {
            "parameters": [prefix],
            "post": sign(
                "signS3Request",
                "Remotely signs an S3 request inside the location of a table of the warehouse "
                "(the S3 signer spec's path, under the prefix)",
                "NoSuchWarehouseException, the warehouse does not exist",
            ),
        },
    }


def catalog_document(endpoints: Iterable[str] = ENDPOINTS) -> dict[str, Any]:
    """The Iceberg REST catalog spec restricted to the advertised ``endpoints``, with the
    signing routes (`_signing_paths`)."""
    wanted = advertised_operations(endpoints) | UNADVERTISED
    document = copy.deepcopy(official_catalog_spec())
    document["paths"].update(_signing_paths())
    for kind, found in _signing_components().items():
        document["components"][kind].update(found)
    missing = wanted - document_operations(document)
    if missing:
        raise ValueError(f"advertised endpoints missing from the spec: {sorted(missing)}")
    paths: dict[str, Any] = {}
    for path, item in document["paths"].items():
        kept = {
            key: value
            for key, value in item.items()
            if key not in HTTP_METHODS or (key, path) in wanted
        }
        if any(key in HTTP_METHODS for key in kept):
            paths[path] = kept
    document["paths"] = paths
    # icelog does not authenticate: no security requirements, no token endpoint.
    document.pop("security", None)
    document.get("components", {}).pop("securitySchemes", None)
    _prune_components(document)
    used_tags = {
        tag for item in paths.values() for key, op in item.items() if key in HTTP_METHODS
        for tag in op.get("tags", [])
    }  # fmt: skip
    if "tags" in document:
        document["tags"] = [t for t in document["tags"] if t.get("name") in used_tags]
    document["servers"] = [
        {
            "url": "/catalog",
            "description": "icelog; {prefix} is the warehouse id that GET /v1/config returns",
        }
    ]
    info = document["info"]
    info["description"] = (
        f"{info.get('description', '').strip()}\n\n"
        "Served by icelog: the Apache Iceberg 1.10.2 REST catalog spec, restricted to the "
        "operations icelog advertises in `GET /v1/config` `endpoints`, plus S3 remote signing "
        "(the 1.10.2 S3 signer spec's request and response, at the table-scoped path of later "
        "specs and at the signer's own path under the prefix). Every route is also served "
        "without the `{prefix}` segment (the `default` warehouse)."
    )
    info["x-iceberg-version"] = "1.10.2"
    return document


# -- management API -------------------------------------------------------------------------
def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _ok(description: str, schema_name: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": _json({"$ref": f"#/components/schemas/{schema_name}"}),
    }


def _errors(*codes: int) -> dict[str, Any]:
    names = {
        400: "BadRequest",
        404: "NotFound",
        409: "Conflict",
        500: "ServerError",
        503: "ServiceUnavailable",
    }
    return {str(code): {"$ref": f"#/components/responses/{names[code]}"} for code in codes}


def _body(schema_name: str) -> dict[str, Any]:
    return {"required": True, "content": _json({"$ref": f"#/components/schemas/{schema_name}"})}


_NO_CONTENT = {"204": {"description": "Done; no content"}}
_PROJECT_HEADER = {"$ref": "#/components/parameters/x-project-id"}
_PROJECT_ID = {"$ref": "#/components/parameters/project-id"}
_WAREHOUSE_ID = {"$ref": "#/components/parameters/warehouse-id"}


def _path_id(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "string", "format": "uuid"},
    }


def _protection_ops(kind: str, params: list[dict[str, Any]]) -> dict[str, Any]:
    """GET and POST of one entity kind's protection (Lakekeeper's shape)."""
    title = kind.capitalize()
    return {
        "get": {
            "operationId": f"get{title}Protection",
            "tags": ["protection"],
            "summary": f"Is the {kind} protected from being dropped?",
            "parameters": params,
            "responses": {
                "200": _ok("The protection", "ProtectionResponse"),
                **_errors(400, 404, 500),
            },
        },
        "post": {
            "operationId": f"set{title}Protection",
            "tags": ["protection"],
            "summary": f"Protect the {kind} from being dropped, or remove the protection",
            "parameters": params,
            "requestBody": _body("SetProtectionRequest"),
            "responses": {
                "200": _ok("The protection now", "ProtectionResponse"),
                **_errors(400, 404, 500),
            },
        },
    }


def _lifecycle_paths() -> dict[str, Any]:
    """Delete profile, protections and cascade drop (issue 4's management routes)."""
    paths: dict[str, Any] = {
        "/v1/warehouse/{warehouse_id}/delete-profile": {
            "post": {
                "operationId": "updateDeleteProfile",
                "tags": ["warehouse"],
                "summary": "Change the warehouse's delete profile (hard or soft)",
                "parameters": [_WAREHOUSE_ID],
                "requestBody": _body("UpdateDeleteProfileRequest"),
                "responses": {**_NO_CONTENT, **_errors(400, 404, 500)},
            }
        },
        "/v1/warehouse/{warehouse_id}/protection": _protection_ops("warehouse", [_WAREHOUSE_ID]),
        "/v1/warehouse/{warehouse_id}/namespace/{namespace_id}": {
            "delete": {
                "operationId": "dropNamespaceById",
                "tags": ["warehouse"],
                "summary": "Drop a namespace by id; `recursive=true` drops everything inside",
                "parameters": [
                    _WAREHOUSE_ID,
                    _path_id("namespace_id"),
                    {"name": "recursive", "in": "query", "schema": {"type": "boolean"}},
                    {"name": "purge", "in": "query", "schema": {"type": "boolean"}},
                ],
                "responses": {**_NO_CONTENT, **_errors(400, 404, 409, 500)},
            }
        },
    }
    for kind in ("table", "view", "namespace"):
        paths[f"/v1/warehouse/{{warehouse_id}}/{kind}/{{{kind}_id}}/protection"] = _protection_ops(
            kind, [_WAREHOUSE_ID, _path_id(f"{kind}_id")]
        )
    return {**paths, **_soft_delete_paths(), **_audit_paths()}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": schema, "description": description}


def _audit_paths() -> dict[str, Any]:
    """The event log, per-entity history and point-in-time reads (issue 6)."""
    uuid = {"type": "string", "format": "uuid"}
    page = [
        _query("after", {"type": "integer", "minimum": 0}, "Start after this log position"),
        _query("limit", {"type": "integer", "minimum": 0, "maximum": 1000}, "Page size (100)"),
    ]
    events = {
        "operationId": "listEvents",
        "tags": ["audit"],
        "summary": "The event log, paged by position, with filters",
        "parameters": [
            *page,
            _query("warehouse-id", uuid, "Only this warehouse"),
            _query("namespace", {"type": "string"}, "Dotted namespace, nested ones included"),
            _query("tabular-id", uuid, "Only events about this table or view"),
            _query("aggregate-id", uuid, "Only this aggregate's events"),
            _query("type", {"type": "string"}, "Type prefix, e.g. io.icelog.table."),
            _query("actor", {"type": "string"}, "Only this actor"),
            _query("since", {"type": "string", "format": "date-time"}, "From (inclusive)"),
            _query("until", {"type": "string", "format": "date-time"}, "To (exclusive)"),
        ],
        "responses": {"200": _ok("A page of events", "EventPage"), **_errors(400, 500)},
    }
    paths: dict[str, Any] = {
        "/v1/events": {"get": events},
        "/v1/as-of": {
            "get": {
                "operationId": "getCatalogAsOf",
                "tags": ["audit"],
                "summary": "The catalog as of a log position or a time, one page at a time",
                "description": (
                    "Projects, warehouses, namespaces, tables and views as they were after "
                    "the last event at or before `position` (or `time`), read from the "
                    "catalog history. A page holds at most `page-size` namespaces, tables "
                    "and views, in the order (warehouse id, namespace levels, kind, name, "
                    "id), nested under their warehouses and namespaces; a namespace that "
                    "started on an earlier page is repeated as a container with "
                    '`"continued": true`. Every page lists all projects. Pass '
                    "`next-page-token` as `page-token` (with the same other parameters) "
                    "for the next page; it is null on the last. A page may hold fewer "
                    "objects than `page-size` (it reads a bounded number of rows) and "
                    "still have a next one. Later pages answer as of the position of the "
                    "first."
                ),
                "parameters": [
                    _query("position", {"type": "integer", "minimum": 0}, "A log position"),
                    _query("time", {"type": "string", "format": "date-time"}, "Or a time"),
                    _query("warehouse-id", uuid, "Only this warehouse"),
                    _query(
                        "page-size",
                        {"type": "integer", "minimum": 1, "maximum": 1000},
                        "Namespaces, tables and views per page at most (1000)",
                    ),
                    _query(
                        "page-token",
                        {"type": "string"},
                        "The previous page's next-page-token",
                    ),
                ],
                "responses": {
                    "200": _ok("The catalog then", "CatalogAsOf"),
                    **_errors(400, 500),
                },
            }
        },
    }
    for kind in ("table", "view"):
        paths[f"/v1/warehouse/{{warehouse_id}}/{kind}/{{{kind}_id}}/history"] = {
            "get": {
                "operationId": f"get{kind.capitalize()}History",
                "tags": ["audit"],
                "summary": f"Every event of one {kind}, in order",
                "parameters": [_WAREHOUSE_ID, _path_id(f"{kind}_id"), *page],
                "responses": {
                    "200": _ok("A page of events", "EventPage"),
                    **_errors(400, 404, 500),
                },
            }
        }
    return paths


def _audit_schemas() -> dict[str, Any]:
    text_or_null = {"type": ["string", "null"]}
    return {
        "LoggedEvent": {
            "type": "object",
            "required": ["position", "time", "type", "aggregate-id", "version", "data"],
            "properties": {
                "position": {"type": "integer"},
                "time": {"type": "string"},
                "type": {"type": "string"},
                "aggregate-id": {"type": "string"},
                "version": {"type": "integer"},
                "actor": text_or_null,
                "request-id": text_or_null,
                "warehouse-id": text_or_null,
                "namespace": text_or_null,
                "tabular-id": text_or_null,
                "subject": text_or_null,
                "data": {"type": "object"},
            },
        },
        "EventPage": {
            "type": "object",
            "required": ["events", "next-after"],
            "properties": {
                "events": {"type": "array", "items": {"$ref": "#/components/schemas/LoggedEvent"}},
                "next-after": {"type": ["integer", "null"]},
            },
        },
        "CatalogAsOf": {
            "type": "object",
            "required": ["position", "time", "projects", "warehouses", "next-page-token"],
            "properties": {
                "position": {"type": "integer"},
                "time": text_or_null,
                "projects": {"type": "array", "items": {"type": "object"}},
                "warehouses": {"type": "array", "items": {"type": "object"}},
                "next-page-token": text_or_null,
            },
        },
    }


def _soft_delete_paths() -> dict[str, Any]:
    """Soft-deleted tabulars, undrop and the task queue."""
    undrop = {
        "operationId": "undropTabulars",
        "tags": ["soft-delete"],
        "summary": "Restore soft-deleted tables and views (all or none)",
        "parameters": [_WAREHOUSE_ID],
        "requestBody": _body("UndropTabularsRequest"),
        "responses": {**_NO_CONTENT, **_errors(400, 404, 409, 500)},
    }
    return {
        "/v1/warehouse/{warehouse_id}/deleted-tabulars": {
            "get": {
                "operationId": "listDeletedTabulars",
                "tags": ["soft-delete"],
                "summary": "Soft-deleted tables and views, oldest drop first",
                "parameters": [
                    _WAREHOUSE_ID,
                    {
                        "name": "namespaceId",
                        "in": "query",
                        "schema": {"type": "string", "format": "uuid"},
                    },
                    {"name": "pageToken", "in": "query", "schema": {"type": "string"}},
                    {
                        "name": "pageSize",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1},
                    },
                ],
                "responses": {
                    "200": _ok("A page of soft-deleted tabulars", "ListDeletedTabularsResponse"),
                    **_errors(400, 404, 500),
                },
            }
        },
        "/v1/warehouse/{warehouse_id}/deleted-tabulars/undrop": {"post": undrop},
        "/v1/warehouse/{warehouse_id}/deleted_tabulars/undrop": {
            "post": {
                **undrop,
                "operationId": "undropTabularsDeprecated",
                "deprecated": True,
                "summary": "Deprecated spelling of deleted-tabulars/undrop (Lakekeeper)",
            }
        },
        "/v1/warehouse/{warehouse_id}/task/list": {
            "post": {
                "operationId": "listTasks",
                "tags": ["tasks"],
                "summary": "Tasks of the warehouse (expirations and purges), with their state",
                "parameters": [_WAREHOUSE_ID],
                "requestBody": {
                    "required": False,
                    "content": _json({"$ref": "#/components/schemas/ListTasksRequest"}),
                },
                "responses": {
                    "200": _ok("The tasks", "ListTasksResponse"),
                    **_errors(400, 404, 500),
                },
            }
        },
        "/v1/warehouse/{warehouse_id}/task/by-id/{task_id}": {
            "get": {
                "operationId": "getTask",
                "tags": ["tasks"],
                "summary": "One task",
                "parameters": [_WAREHOUSE_ID, _path_id("task_id")],
                "responses": {"200": _ok("The task", "Task"), **_errors(400, 404, 500)},
            }
        },
    }


def _soft_delete_schemas() -> dict[str, Any]:
    uuid = {"type": "string", "format": "uuid"}
    stamp = {"type": "string", "format": "date-time"}
    return {
        "DeletedTabular": {
            "type": "object",
            "required": [
                "id",
                "name",
                "namespace",
                "typ",
                "warehouse-id",
                "created-at",
                "deleted-at",
                "expiration-date",
                "deletion-kind",
            ],
            "properties": {
                "id": uuid,
                "name": {"type": "string"},
                "namespace": {"type": "array", "items": {"type": "string"}},
                "typ": {"type": "string", "enum": ["table", "view"]},
                "warehouse-id": uuid,
                "created-at": stamp,
                "deleted-at": stamp,
                "expiration-date": stamp,
                "deletion-kind": {"type": "string", "enum": ["default", "purge"]},
            },
        },
        "ListDeletedTabularsResponse": {
            "type": "object",
            "required": ["tabulars", "next-page-token"],
            "properties": {
                "tabulars": {
                    "type": "array",
                    "items": {"$ref": "#/components/schemas/DeletedTabular"},
                },
                "next-page-token": {"type": ["string", "null"]},
            },
        },
        "UndropTarget": {
            "type": "object",
            "required": ["type", "id"],
            "properties": {
                "type": {"type": "string", "enum": ["table", "view"]},
                "id": uuid,
                "new-name": {
                    "type": "string",
                    "description": "Restore under this name (same namespace) instead",
                },
            },
        },
        "UndropTabularsRequest": {
            "type": "object",
            "required": ["targets"],
            "properties": {
                "targets": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"$ref": "#/components/schemas/UndropTarget"},
                }
            },
        },
        "ListTasksRequest": {
            "type": "object",
            "properties": {
                "entity-id": uuid,
                "status": {
                    "type": "string",
                    "enum": ["pending", "running", "succeeded", "failed", "cancelled"],
                },
            },
        },
        "Task": {
            "type": "object",
            "required": [
                "task-id",
                "queue-name",
                "warehouse-id",
                "entity-kind",
                "entity-id",
                "status",
                "attempt",
                "max-attempts",
                "due-at-ms",
                "created-at",
                "updated-at",
            ],
            "properties": {
                "task-id": uuid,
                "queue-name": {"type": "string", "enum": ["tabular-expiration", "tabular-purge"]},
                "warehouse-id": uuid,
                "entity-kind": {"type": "string", "enum": ["table", "view"]},
                "entity-id": uuid,
                "status": {
                    "type": "string",
                    "enum": ["pending", "running", "succeeded", "failed", "cancelled"],
                },
                "attempt": {"type": "integer"},
                "max-attempts": {"type": "integer"},
                "due-at-ms": {"type": "integer"},
                "worker": {"type": ["string", "null"]},
                "last-error": {"type": ["string", "null"]},
                "payload": {"type": "object"},
                "created-at": stamp,
                "updated-at": stamp,
            },
        },
        "ListTasksResponse": {
            "type": "object",
            "required": ["tasks"],
            "properties": {
                "tasks": {"type": "array", "items": {"$ref": "#/components/schemas/Task"}}
            },
        },
    }


def _storage_paths() -> dict[str, Any]:
    """Lakekeeper's update-storage-profile and update-storage-credential."""

    def update(operation_id: str, summary: str, body: str) -> dict[str, Any]:
        return {
            "post": {
                "operationId": operation_id,
                "tags": ["warehouse"],
                "summary": summary,
                "parameters": [_WAREHOUSE_ID],
                "requestBody": _body(body),
                "responses": {**_NO_CONTENT, **_errors(400, 404, 500, 503)},
            }
        }

    return {
        "/v1/warehouse/{warehouse_id}/storage": update(
            "updateStorageProfile",
            "New storage settings for the same storage location (same type and "
            "base-location), optionally with a new credential",
            "UpdateWarehouseStorageRequest",
        ),
        "/v1/warehouse/{warehouse_id}/storage-credential": update(
            "updateStorageCredential",
            "A new credential for the warehouse's storage (key rotation)",
            "UpdateWarehouseCredentialRequest",
        ),
    }


def _credential_rule(*, required: bool) -> dict[str, Any]:
    """`storage-credential` next to `storage-profile`: a file profile takes none; an s3
    profile needs one when ``required`` (else the warehouse's current one is kept)."""
    is_s3 = {"properties": {"storage-profile": {"properties": {"type": {"const": "s3"}}}}}
    credential = {"$ref": "#/components/schemas/StorageCredential"}
    rule: dict[str, Any] = {
        "if": is_s3,
        "else": {"properties": {"storage-credential": {"type": "null"}}},
    }
    if required:
        rule["then"] = {
            "required": ["storage-credential"],
            "properties": {"storage-credential": credential},
        }
    return rule


def _storage_schemas() -> dict[str, Any]:
    """Storage profiles and credentials as ``commands/storage`` validates them
    (``validate_storage_profile``, ``normalize_s3_profile``, ``normalize_s3_credential``)."""
    schemas = "#/components/schemas/"
    or_null = {"anyOf": [{"$ref": schemas + "StorageCredential"}, {"type": "null"}]}

    def optional(kind: str, description: str, **extra: Any) -> dict[str, Any]:
        """A field the server defaults when it is absent or null (or an empty string)."""
        return {"type": [kind, "null"], "description": description, **extra}

    url = "^$|^https?://[^/?#]"  # an http(s) URL with a host
    arn = "^$|^arn:[A-Za-z0-9-]+:[A-Za-z0-9-]+:[A-Za-z0-9-]*:[0-9]*:.+$"
    key_id = {"type": "string", "pattern": "\\S"}
    secret = {"type": "string", "minLength": 1}
    return {
        "StorageProfile": {
            "description": "Where a warehouse's data lives: a local directory or an S3 bucket.",
            "oneOf": [
                {"$ref": schemas + "FileStorageProfile"},
                {"$ref": schemas + "S3StorageProfile"},
            ],
            "discriminator": {
                "propertyName": "type",
                "mapping": {
                    "file": schemas + "FileStorageProfile",
                    "s3": schemas + "S3StorageProfile",
                },
            },
        },
        "FileStorageProfile": {
            "type": "object",
            "required": ["type", "base-location"],
            "properties": {
                "type": {"type": "string", "const": "file"},
                "base-location": {
                    "type": "string",
                    "description": "A `file:///<absolute directory>` URI (or an absolute path); "
                    "the server must be able to write there.",
                },
            },
        },
        "S3StorageProfile": {
            "type": "object",
            "description": "An S3 bucket (or a folder of it), Lakekeeper's shape. Stored (and "
            "returned) with every field present, defaults filled in. At creation and update the "
            "server writes, reads, lists and deletes a probe object with the credential (and "
            "assumes the role once when `sts-enabled`); a failing step is a 400. "
            "`ICELOG_SKIP_STORAGE_VALIDATION=true` skips the probe.",
            "required": ["type", "bucket", "region", "base-location", "credential-id"],
            "additionalProperties": False,
            "properties": {
                "type": {"type": "string", "const": "s3"},
                "bucket": {
                    "type": "string",
                    "pattern": "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
                    "description": "3-63 lowercase letters, digits, '.' or '-'; no '..'",
                },
                "key-prefix": optional(
                    "string",
                    "Folder of the warehouse in the bucket; outer '/' are dropped and no part "
                    "may be empty, '.' or '..'. Default: the whole bucket (stored as \"\").",
                ),
                "region": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
                "endpoint": optional(
                    "string", "S3 endpoint (an http(s) URL) for S3-compatible storage", pattern=url
                ),
                "path-style-access": optional("boolean", "Default false", default=False),
                "flavor": optional(
                    "string", "Default aws", enum=["aws", "s3-compat", None], default="aws"
                ),
                "sts-enabled": optional(
                    "boolean",
                    "Vend STS credentials to clients (default false); on AWS it needs "
                    "`sts-role-arn` or `assume-role-arn`",
                    default=False,
                ),
                "sts-endpoint": optional(
                    "string", "STS endpoint (an http(s) URL); default: `endpoint`", pattern=url
                ),
                "assume-role-arn": optional("string", "IAM role ARN", pattern=arn),
                "sts-role-arn": optional("string", "IAM role ARN", pattern=arn),
                "sts-token-validity-seconds": optional(
                    "integer", "Default 3600", minimum=900, maximum=43200, default=3600
                ),
                "remote-signing-enabled": optional(
                    "boolean", "Clients may have S3 requests signed (default true)", default=True
                ),
                "allow-alternative-protocols": optional(
                    "boolean",
                    "Accept s3a:// and s3n:// table locations (default false)",
                    default=False,
                ),
                "base-location": {
                    "type": "string",
                    "readOnly": True,
                    "description": "`s3://<bucket>[/<key-prefix>]`, set by the server (ignored "
                    "in requests)",
                },
                "credential-id": {
                    "type": "string",
                    "format": "uuid",
                    "readOnly": True,
                    "description": "The sealed credential's id, set by the server (ignored in "
                    "requests); the credential itself is never returned",
                },
            },
        },
        "StorageCredential": {
            "description": "A secret for the storage: encrypted at rest outside the event log, "
            "never part of a response.",
            "writeOnly": True,
            "oneOf": [{"$ref": schemas + "S3StorageCredential"}],
            "discriminator": {
                "propertyName": "type",
                "mapping": {"s3": schemas + "S3StorageCredential"},
            },
        },
        "S3StorageCredential": {
            "type": "object",
            "description": "An access key. The `aws-` spellings are accepted too; the plain ones "
            "win when both are sent.",
            "required": ["type"],
            "properties": {
                "type": {"type": "string", "const": "s3"},
                "credential-type": {
                    "type": "string",
                    "const": "access-key",
                    "default": "access-key",
                },
                "access-key-id": key_id,
                "secret-access-key": secret,
                "aws-access-key-id": key_id,
                "aws-secret-access-key": secret,
                "external-id": optional("string", "External id for assuming `sts-role-arn`"),
            },
            "allOf": [
                {"anyOf": [{"required": ["access-key-id"]}, {"required": ["aws-access-key-id"]}]},
                {
                    "anyOf": [
                        {"required": ["secret-access-key"]},
                        {"required": ["aws-secret-access-key"]},
                    ]
                },
            ],
        },
        "UpdateWarehouseStorageRequest": {
            "type": "object",
            "description": "New settings for the same storage: the type and the base location "
            "cannot change. Without `storage-credential` an s3 warehouse keeps its credential; a "
            "file warehouse takes none.",
            "required": ["storage-profile"],
            "properties": {
                "storage-profile": {"$ref": schemas + "StorageProfile"},
                "storage-credential": or_null,
            },
            **_credential_rule(required=False),
        },
        "UpdateWarehouseCredentialRequest": {
            "type": "object",
            "description": "An s3 warehouse needs `new-storage-credential`; for a file warehouse "
            "it must be absent or null (nothing changes).",
            "properties": {"new-storage-credential": or_null},
        },
    }


def _project_ops(by_path: bool) -> dict[str, dict[str, Any]]:
    suffix = "ById" if by_path else ""
    params = [_PROJECT_ID] if by_path else [_PROJECT_HEADER]
    which = "the project in the path" if by_path else "the project of `x-project-id` (default: nil)"
    return {
        "get": {
            "operationId": f"getProject{suffix}",
            "tags": ["project"],
            "summary": f"Get {which}",
            "parameters": params,
            "responses": {
                "200": _ok("The project", "GetProjectResponse"),
                **_errors(400, 404, 500),
            },
        },
        "delete": {
            "operationId": f"deleteProject{suffix}",
            "tags": ["project"],
            "summary": f"Delete {which}; it must have no warehouses",
            "parameters": params,
            "responses": {**_NO_CONTENT, **_errors(400, 404, 409, 500)},
        },
    }


def _rename_project(by_path: bool) -> dict[str, Any]:
    return {
        "post": {
            "operationId": "renameProjectById" if by_path else "renameProject",
            "tags": ["project"],
            "summary": "Rename a project",
            "parameters": [_PROJECT_ID] if by_path else [_PROJECT_HEADER],
            "requestBody": _body("RenameProjectRequest"),
            "responses": {**_NO_CONTENT, **_errors(400, 404, 409, 500)},
        }
    }


def management_document() -> dict[str, Any]:
    """OpenAPI 3.1 document of the management API as ``api/routes/management.py`` serves it."""
    name = {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[^/]*$"}
    uuid = {"type": "string", "format": "uuid"}
    delete_profile = {
        "oneOf": [
            {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"type": "string", "const": "hard"}},
            },
            {
                "type": "object",
                "required": ["type", "expiration-seconds"],
                "properties": {
                    "type": {"type": "string", "const": "soft"},
                    "expiration-seconds": {"type": "integer", "minimum": 0},
                },
            },
        ]
    }
    warehouse = {
        "type": "object",
        "required": [
            "id",
            "warehouse-id",
            "project-id",
            "name",
            "storage-profile",
            "delete-profile",
            "status",
            "protected",
        ],
        "properties": {
            "id": uuid,
            "warehouse-id": uuid,
            "project-id": uuid,
            "name": {"type": "string"},
            "storage-profile": {"$ref": "#/components/schemas/StorageProfile"},
            "delete-profile": {"$ref": "#/components/schemas/DeleteProfile"},
            "status": {"type": "string", "enum": ["active", "inactive"]},
            "protected": {"type": "boolean"},
        },
    }
    error_model = {
        "type": "object",
        "description": "JSON error payload returned in a response with further details on "
        "the error (the Iceberg REST `ErrorModel`).",
        "required": ["message", "type", "code"],
        "properties": {
            "message": {"type": "string", "description": "Human-readable error message"},
            "type": {
                "type": "string",
                "description": "Internal type definition of the error",
                "examples": ["NoSuchWarehouseException"],
            },
            "code": {
                "type": "integer",
                "minimum": 400,
                "maximum": 600,
                "description": "HTTP response code",
                "examples": [404],
            },
            "stack": {"type": "array", "items": {"type": "string"}},
        },
    }

    def error_response(description: str) -> dict[str, Any]:
        return {
            "description": description,
            "content": _json({"$ref": "#/components/schemas/ErrorResponse"}),
        }

    return {
        "openapi": "3.1.1",
        "info": {
            "title": "icelog management API",
            "version": "1",
            "description": "Projects and warehouses of an icelog catalog, shaped like "
            "Lakekeeper's management API. Every error is the Iceberg REST "
            '`{"error": {"message", "type", "code"}}`.',
            "license": {"name": "Apache 2.0", "identifier": "Apache-2.0"},
        },
        "servers": [{"url": "/management", "description": "icelog"}],
        "tags": [
            {"name": "server", "description": "Server information and bootstrap"},
            {"name": "project", "description": "Projects"},
            {"name": "warehouse", "description": "Warehouses"},
            {"name": "protection", "description": "Protection from drops"},
            {"name": "soft-delete", "description": "Soft-deleted tables and views, undrop"},
            {"name": "tasks", "description": "Background tasks: expiration and purge"},
            {"name": "audit", "description": "The event log, history, point-in-time reads"},
        ],
        "paths": {
            "/v1/info": {
                "get": {
                    "operationId": "getServerInfo",
                    "tags": ["server"],
                    "summary": "Server version, bootstrap state and backend",
                    "responses": {
                        "200": _ok("Server information", "ServerInfo"),
                        **_errors(500),
                    },
                }
            },
            "/v1/bootstrap": {
                "post": {
                    "operationId": "bootstrap",
                    "tags": ["server"],
                    "summary": "Bootstrap the server (once)",
                    "requestBody": _body("BootstrapRequest"),
                    "responses": {**_NO_CONTENT, **_errors(400, 500)},
                }
            },
            "/v1/project": {
                "post": {
                    "operationId": "createProject",
                    "tags": ["project"],
                    "summary": "Create a project",
                    "requestBody": _body("CreateProjectRequest"),
                    "responses": {
                        "200": _ok("The new project's id", "CreateProjectResponse"),
                        **_errors(400, 409, 500),
                    },
                },
                **_project_ops(by_path=False),
            },
            "/v1/project/rename": _rename_project(by_path=False),
            "/v1/project-list": {
                "get": {
                    "operationId": "listProjects",
                    "tags": ["project"],
                    "summary": "List every project",
                    "responses": {
                        "200": _ok("All projects", "ListProjectsResponse"),
                        **_errors(500),
                    },
                }
            },
            "/v1/project/{project_id}": _project_ops(by_path=True),
            "/v1/project/{project_id}/rename": _rename_project(by_path=True),
            "/v1/warehouse": {
                "post": {
                    "operationId": "createWarehouse",
                    "tags": ["warehouse"],
                    "summary": "Create a warehouse",
                    "parameters": [_PROJECT_HEADER],
                    "requestBody": _body("CreateWarehouseRequest"),
                    "responses": {
                        "200": _ok("The new warehouse's id", "CreateWarehouseResponse"),
                        **_errors(400, 404, 409, 500, 503),
                    },
                },
                "get": {
                    "operationId": "listWarehouses",
                    "tags": ["warehouse"],
                    "summary": "List the warehouses of the project of `x-project-id`",
                    "parameters": [_PROJECT_HEADER],
                    "responses": {
                        "200": _ok("The project's warehouses", "ListWarehousesResponse"),
                        **_errors(400, 500),
                    },
                },
            },
            "/v1/warehouse/{warehouse_id}": {
                "get": {
                    "operationId": "getWarehouse",
                    "tags": ["warehouse"],
                    "summary": "Get a warehouse",
                    "parameters": [_WAREHOUSE_ID],
                    "responses": {
                        "200": _ok("The warehouse", "GetWarehouseResponse"),
                        **_errors(400, 404, 500),
                    },
                },
                "delete": {
                    "operationId": "deleteWarehouse",
                    "tags": ["warehouse"],
                    "summary": "Delete a warehouse; it must have no namespaces",
                    "parameters": [_WAREHOUSE_ID],
                    "responses": {**_NO_CONTENT, **_errors(400, 404, 409, 500)},
                },
            },
            "/v1/warehouse/{warehouse_id}/rename": {
                "post": {
                    "operationId": "renameWarehouse",
                    "tags": ["warehouse"],
                    "summary": "Rename a warehouse",
                    "parameters": [_WAREHOUSE_ID],
                    "requestBody": _body("RenameWarehouseRequest"),
                    "responses": {**_NO_CONTENT, **_errors(400, 404, 409, 500)},
                }
            },
            **_storage_paths(),
            **_lifecycle_paths(),
        },
        "components": {
            "parameters": {
                "x-project-id": {
                    "name": "x-project-id",
                    "in": "header",
                    "required": False,
                    "description": "The project; the default project (nil UUID) when absent.",
                    "schema": uuid,
                },
                "project-id": {
                    "name": "project_id",
                    "in": "path",
                    "required": True,
                    "schema": uuid,
                },
                "warehouse-id": {
                    "name": "warehouse_id",
                    "in": "path",
                    "required": True,
                    "schema": uuid,
                },
            },
            "schemas": {
                **_soft_delete_schemas(),
                **_audit_schemas(),
                "SetProtectionRequest": {
                    "type": "object",
                    "required": ["protected"],
                    "properties": {"protected": {"type": "boolean"}},
                },
                "ProtectionResponse": {
                    "type": "object",
                    "required": ["protected", "updated-at"],
                    "properties": {
                        "protected": {"type": "boolean"},
                        "updated-at": {"type": "string", "format": "date-time"},
                    },
                },
                "UpdateDeleteProfileRequest": {
                    "type": "object",
                    "required": ["delete-profile"],
                    "properties": {"delete-profile": delete_profile},
                },
                "ServerInfo": {
                    "type": "object",
                    "required": [
                        "version",
                        "bootstrapped",
                        "server-id",
                        "default-project-id",
                        "authz-backend",
                        "aws-system-identities-enabled",
                        "azure-system-identities-enabled",
                        "gcp-system-identities-enabled",
                        "queues",
                        "backend",
                    ],
                    "properties": {
                        "version": {"type": "string"},
                        "bootstrapped": {"type": "boolean"},
                        "server-id": uuid,
                        "default-project-id": uuid,
                        "authz-backend": {"type": "string", "enum": ["allow-all"]},
                        "aws-system-identities-enabled": {"type": "boolean"},
                        "azure-system-identities-enabled": {"type": "boolean"},
                        "gcp-system-identities-enabled": {"type": "boolean"},
                        "queues": {"type": "array", "items": {"type": "string"}},
                        "backend": {"type": "string", "enum": ["sqlite", "postgres"]},
                    },
                },
                "BootstrapRequest": {
                    "type": "object",
                    "required": ["accept-terms-of-use"],
                    "properties": {
                        "accept-terms-of-use": {"type": "boolean", "const": True},
                        "is-operator": {"type": "boolean", "default": False},
                    },
                },
                "CreateProjectRequest": {
                    "type": "object",
                    "required": ["project-name"],
                    "properties": {"project-name": name, "project-id": uuid},
                },
                "CreateProjectResponse": {
                    "type": "object",
                    "required": ["project-id"],
                    "properties": {"project-id": uuid},
                },
                "GetProjectResponse": {
                    "type": "object",
                    "required": ["project-id", "project-name"],
                    "properties": {"project-id": uuid, "project-name": {"type": "string"}},
                },
                "ListProjectsResponse": {
                    "type": "object",
                    "required": ["projects"],
                    "properties": {
                        "projects": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/GetProjectResponse"},
                        }
                    },
                },
                "RenameProjectRequest": {
                    "type": "object",
                    "required": ["new-name"],
                    "properties": {"new-name": name},
                },
                **_storage_schemas(),
                "DeleteProfile": delete_profile,
                "CreateWarehouseRequest": {
                    "type": "object",
                    "required": ["warehouse-name", "storage-profile"],
                    **_credential_rule(required=True),
                    "properties": {
                        "warehouse-name": name,
                        "project-id": {
                            **uuid,
                            "description": "Default: `x-project-id`, else the nil UUID.",
                        },
                        "storage-profile": {"$ref": "#/components/schemas/StorageProfile"},
                        "delete-profile": {"$ref": "#/components/schemas/DeleteProfile"},
                        "storage-credential": {
                            "anyOf": [
                                {"$ref": "#/components/schemas/StorageCredential"},
                                {"type": "null"},
                            ],
                            "description": "Required for an s3 profile; a file profile takes "
                            "none (absent or null).",
                        },
                    },
                },
                "CreateWarehouseResponse": {
                    "type": "object",
                    "required": ["warehouse-id"],
                    "properties": {"warehouse-id": uuid},
                },
                "GetWarehouseResponse": warehouse,
                "ListWarehousesResponse": {
                    "type": "object",
                    "required": ["warehouses"],
                    "properties": {
                        "warehouses": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/GetWarehouseResponse"},
                        }
                    },
                },
                "RenameWarehouseRequest": {
                    "type": "object",
                    "required": ["new-name"],
                    "properties": {"new-name": name},
                },
                "ErrorModel": error_model,
                "ErrorResponse": {
                    "type": "object",
                    "required": ["error"],
                    "additionalProperties": False,
                    "properties": {"error": {"$ref": "#/components/schemas/ErrorModel"}},
                },
            },
            "responses": {
                "BadRequest": error_response("Malformed request or invalid value"),
                "NotFound": error_response("No such project or warehouse"),
                "Conflict": error_response("Already exists, or not empty"),
                "ServerError": error_response("Unexpected server error"),
                "ServiceUnavailable": error_response(
                    "Storage credentials cannot be stored or read on this server"
                ),
            },
        },
    }


# -- routes ---------------------------------------------------------------------------------
@functools.cache
def _catalog_json() -> bytes:
    return orjson.dumps(catalog_document())


@functools.cache
def _management_json() -> bytes:
    return orjson.dumps(management_document())


async def _catalog_doc(request: Request) -> Response:
    return Response(_catalog_json(), media_type="application/json")


async def _management_doc(request: Request) -> Response:
    return Response(_management_json(), media_type="application/json")


_SWAGGER_PAGE = """<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="UTF-8">
    <title>icelog API</title>
    <link rel="stylesheet" type="text/css" href="{assets}/swagger-ui.css">
    <link rel="icon" type="image/png" href="{assets}/favicon-32x32.png" sizes="32x32">
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="{assets}/swagger-ui-bundle.js" charset="UTF-8"></script>
    <script src="{assets}/swagger-ui-standalone-preset.js" charset="UTF-8"></script>
    <script>
      window.onload = function () {{
        window.ui = SwaggerUIBundle({{
          urls: {urls},
          "urls.primaryName": "Iceberg REST catalog",
          dom_id: "#swagger-ui",
          deepLinking: true,
          presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
          layout: "StandaloneLayout",
        }});
      }};
    </script>
  </body>
</html>
"""


async def _swagger_page(request: Request) -> Response:
    root = request.scope.get("root_path", "").rstrip("/")
    urls = [
        {"url": root + CATALOG_DOC_PATH, "name": "Iceberg REST catalog"},
        {"url": root + MANAGEMENT_DOC_PATH, "name": "Management"},
    ]
    page = _SWAGGER_PAGE.format(assets=root + SWAGGER_UI_PATH, urls=orjson.dumps(urls).decode())
    return HTMLResponse(page)


def swagger_ui_directory() -> Path:
    """The Swagger UI distribution shipped by ``swagger-ui-bundle-v2`` (``vendor/swagger-ui-*``)."""
    spec = importlib.util.find_spec("swagger_ui_bundle")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("Swagger UI needs the swagger-ui-bundle-v2 package")
    vendor = Path(next(iter(spec.submodule_search_locations))) / "vendor"
    found = sorted(vendor.glob("swagger-ui-*/swagger-ui-bundle.js"))
    if not found:
        raise RuntimeError(f"no Swagger UI distribution under {vendor}")
    return found[-1].parent


def _swagger_assets() -> StaticFiles:
    return StaticFiles(directory=swagger_ui_directory())


def openapi_routes() -> list[BaseRoute]:
    """Routes for the two documents and Swagger UI; add them to the application's routes."""
    return [
        Route(CATALOG_DOC_PATH, _catalog_doc, methods=["GET"]),
        Route(MANAGEMENT_DOC_PATH, _management_doc, methods=["GET"]),
        Route(SWAGGER_UI_PATH, _swagger_page, methods=["GET"]),
        Route(SWAGGER_UI_PATH + "/", _swagger_page, methods=["GET"]),
        Mount(SWAGGER_UI_PATH, app=_swagger_assets(), name="swagger-ui-assets"),
    ]

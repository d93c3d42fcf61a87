"""OpenAPI documents for what icelog serves, and a Swagger UI page that lists them.

- ``GET /api-docs/catalog/v1/openapi.json``: the newest Iceberg REST catalog spec icelog
  serves — apache/iceberg main as of August 2026 with the events API of PR #12584 (the PR's
  file, shipped unmodified in ``api/specs/``) — filtered to exactly the operations advertised
  in ``GET /v1/config`` ``endpoints`` (``api.routes.config.ENDPOINTS``), served under
  ``/catalog``; plus the S3 signer's own path under the prefix (`_signing_paths`).
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

from icelog.api.edge import openapi_components, openapi_paths
from icelog.api.management_api import MANAGEMENT_OPERATIONS
from icelog.api.models.management import ErrorResponse
from icelog.api.routes.config import ENDPOINTS

SPEC_PATH = Path(__file__).resolve().parent / "specs" / "rest-catalog-open-api-events-12584.yaml"
SPEC_NAME = "apache/iceberg PR #12584 (main of 2026-08 plus the events API)"
CATALOG_DOC_PATH = "/api-docs/catalog/v1/openapi.json"
MANAGEMENT_DOC_PATH = "/api-docs/management/v1/openapi.json"
SWAGGER_UI_PATH = "/swagger-ui"

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_COMPONENT_REF = "#/components/"


# Served and advertised, but newer than the spec this document is built from: none now.
NEWER_THAN_SPEC: frozenset[tuple[str, str]] = frozenset()


# S3 remote signing: the table-scoped `signRequest` path is the spec's (RemoteSignRequest);
# the S3 signer spec's `/v1/aws/s3/sign` under the prefix (not advertised: clients find it
# through `s3.signer.*`) takes the signer spec's S3SignRequest and answers its
# S3SignResponse, the same shapes.
TABLE_SIGN_PATH = "/v1/{prefix}/namespaces/{namespace}/tables/{table}/sign"
WAREHOUSE_SIGN_PATH = "/v1/{prefix}/v1/aws/s3/sign"
EVENTS_PATH = "/v1/{prefix}/events"
# Documented and served but not in `endpoints`: the S3 signer's own path, the config route
# that hands out `endpoints` (the spec lists only the operations after it), and the token
# endpoint (passed through to the identity provider, api/auth/token_endpoint.py).
UNADVERTISED = frozenset(
    {("post", WAREHOUSE_SIGN_PATH), ("get", "/v1/config"), ("post", "/v1/oauth/tokens")}
)


def advertised_operations(endpoints: Iterable[str] = ENDPOINTS) -> set[tuple[str, str]]:
    """``"VERB /v1/{prefix}/path"`` entries as ``(method, path)`` pairs, method lower-case,
    without the operations the spec does not define (`NEWER_THAN_SPEC`)."""
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
    """The shipped Iceberg REST catalog spec (parsed once)."""
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
        if kind == "securitySchemes":
            continue  # named by the top-level `security`, not by a $ref
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
    """The S3 signer's own sign route under the prefix (``api/routes/signing.py``; the
    table-scoped one is the spec's). 403: outside every table's location, another region,
    or remote signing off (file warehouses); 404: no such warehouse."""

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

    return {
        WAREHOUSE_SIGN_PATH: {
            "parameters": [_ref("parameters", "prefix")],
            "post": sign(
                "signS3Request",
                "Remotely signs an S3 request inside the location of a table of the warehouse "
                "(the S3 signer spec's path, under the prefix)",
                "NoSuchWarehouseException, the warehouse does not exist",
            ),
        },
    }


def _extension_operations(document: dict[str, Any]) -> None:
    """The events proposal allows implementation-specific `x-` operation types in its text,
    but its `Event.operation` is `anyOf` the twelve standard operations, which an `x-` type
    cannot match. icelog sends `x-icelog.*` operations (ADR 0015): the document says so."""
    schemas = document["components"]["schemas"]
    event = schemas.get("Event")
    if event is None:
        return
    schemas["IcelogExtensionOperation"] = {
        "description": "An icelog operation without a standard type (`x-icelog.*`, ADR 0015); "
        "clients that do not know it skip it.",
        "allOf": [_ref("schemas", "BaseOperation")],
        "required": ["operation-type"],
        "properties": {"operation-type": {"type": "string", "pattern": "^x-"}},
    }
    event["properties"]["operation"]["anyOf"].append(_ref("schemas", "IcelogExtensionOperation"))


def _not_found_additions(document: dict[str, Any]) -> None:
    """Signing for a table that does not exist answers 404 NoSuchTableException, and the
    events of a warehouse that does not exist (or that the caller may not see) 404
    NoSuchWarehouseException, as every other route does; the spec lists no 404 for either."""
    for path, what in (
        (TABLE_SIGN_PATH, "NoSuchTableException, the table does not exist"),
        (EVENTS_PATH, "NoSuchWarehouseException, the warehouse does not exist"),
    ):
        operation = document["paths"].get(path, {}).get("post")
        if operation is not None:
            operation["responses"].setdefault(
                "404",
                {
                    "description": f"Not Found - {what}",
                    "content": {
                        "application/json": {"schema": _ref("schemas", "IcebergErrorResponse")}
                    },
                },
            )


def _rate_limit_addition(document: dict[str, Any]) -> None:
    """The token endpoint answers 429 (with `Retry-After`) to a client address over its
    rate (api/auth/token_endpoint.py); the spec lists no 429 for it."""
    operation = document["paths"].get("/v1/oauth/tokens", {}).get("post")
    if operation is not None:
        operation["responses"].setdefault(
            "429",
            {
                "description": "Too Many Requests - this client address asked too often; "
                "retry after `Retry-After` seconds",
                "content": {"application/json": {"schema": _ref("schemas", "OAuthError")}},
            },
        )


def catalog_document(endpoints: Iterable[str] = ENDPOINTS) -> dict[str, Any]:
    """The Iceberg REST catalog spec restricted to the advertised ``endpoints``, with the
    S3 signer's route (`_signing_paths`)."""
    wanted = advertised_operations(endpoints) | UNADVERTISED
    document = copy.deepcopy(official_catalog_spec())
    document["paths"].update(_signing_paths())
    for kind, found in _signing_components().items():
        document["components"][kind].update(found)
    _extension_operations(document)
    _not_found_additions(document)
    _rate_limit_addition(document)
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
    # The spec's security schemes stay: with an identity provider icelog takes bearer
    # tokens (OAuth2 client credentials through /v1/oauth/tokens); without one, none.
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
        f"Served by icelog: the Apache Iceberg REST catalog spec of {SPEC_NAME}, restricted "
        "to the operations icelog advertises in `GET /v1/config` `endpoints`, plus the S3 "
        "signer spec's route under the prefix. Every route is also served without the "
        "`{prefix}` segment (the `default` warehouse)."
    )
    info["x-iceberg-version"] = "main-2026-08+pr-12584"
    return document


# -- management API -------------------------------------------------------------------------
MANAGEMENT_TAGS = {
    "server": "Server information and bootstrap",
    "user": "Users of the identity providers (`oidc~<subject>`)",
    "role": "Roles: groups of users and roles in a project",
    "permissions": "Assignments (grants), my access, checks",
    "project": "Projects",
    "warehouse": "Warehouses",
    "protection": "Protection from drops",
    "function": "Functions (Iceberg UDFs): create, replace, drop",
    "soft-delete": "Soft-deleted tables and views, undrop",
    "tasks": "Background tasks: expiration and purge",
    "audit": "The event log, history, point-in-time reads",
}


def management_document() -> dict[str, Any]:
    """OpenAPI 3.1 document of the management API, generated from its operations and their
    models (`api/management_api.py`, `api/models/`); only this frame is written by hand."""
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
        "tags": [{"name": name, "description": text} for name, text in MANAGEMENT_TAGS.items()],
        "paths": openapi_paths(MANAGEMENT_OPERATIONS, "/v1"),
        "components": {
            "parameters": {
                "x-project-id": {
                    "name": "x-project-id",
                    "in": "header",
                    "required": False,
                    "description": "The project; the default project (nil UUID) when absent.",
                    "schema": {"type": "string", "format": "uuid"},
                }
            },
            "schemas": openapi_components(MANAGEMENT_OPERATIONS, extra=[ErrorResponse]),
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

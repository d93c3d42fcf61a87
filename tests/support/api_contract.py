"""Every answer a test receives is checked against the document that describes it: the
generated management document (`api.openapi.management_document`) for `/management/v1/...`,
the filtered Iceberg spec (`api.openapi.catalog_document`) for `/catalog/v1/...`. Its status
must be one the operation documents, and its JSON body must validate against the documented
schema (answers and errors alike). Hooked into the in-process test clients
(tests/integration/conftest.py), so the whole integration suite doubles as a contract test of
both documents."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import httpx
from jsonschema import Draft202012Validator

from icelog.api.openapi import catalog_document, management_document

# The deliberate deviations from the catalog spec that the schemathesis run also
# records (tests/conformance/test_openapi_conformance.py KNOWN_BUGS), as (method, documented
# path, status): the answer is allowed and its body is the Iceberg error shape.
CATALOG_DEVIATIONS = {
    # A child namespace whose parent does not exist: 404 NoSuchNamespaceException (the Java
    # client's namespace handler expects it); the spec documents no 404 here.
    ("POST", "/v1/{prefix}/namespaces", "404"),
    # An unknown `warehouse`: 404 NoSuchWarehouseException, as Lakekeeper answers (main's
    # spec documents it; 1.10.2's did not).
    ("GET", "/v1/config", "404"),
}
# Statuses any catalog operation may answer beyond what the spec documents, each an Iceberg
# error: 413 a body over ICELOG_MAX_REQUEST_BODY_MB (before any route runs); 422 an
# Idempotency-Key sent again with another request (the key's contract, later specs).
ANY_CATALOG_OPERATION = {"413", "422"}
# A protected table or view (management API) cannot be dropped (or unregistered): 409
# ProtectedException.
PROTECTED_DROPS = {
    ("DELETE", "/v1/{prefix}/namespaces/{namespace}/tables/{table}", "409"),
    ("DELETE", "/v1/{prefix}/namespaces/{namespace}/views/{view}", "409"),
    ("POST", "/v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister", "409"),
}
# The spec gives the view operations' errors the bare ErrorModel; clients parse (and icelog
# sends) the IcebergErrorResponse wrapper, as for tables: its `error` is checked instead.
_BARE_ERROR_MODEL = {"$ref": "#/components/schemas/ErrorModel"}


@dataclass(frozen=True)
class _Operation:
    pattern: re.Pattern[str]
    method: str
    path: str
    responses: dict[str, Any]


@dataclass(frozen=True)
class _Document:
    base: str
    document: dict[str, Any]
    operations: tuple[_Operation, ...]


def _pattern(path: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\{\w+\\}", "[^/]+", re.escape(path)) + "$")


def _load(base: str, document: dict[str, Any]) -> _Document:
    operations = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue  # path-level parameters
            variants = [path]
            if "/{prefix}" in path:  # also served without the prefix (the default warehouse)
                variants.append(path.replace("/{prefix}", ""))
            for variant in variants:
                operations.append(
                    _Operation(
                        _pattern(base + variant), method.upper(), path, operation["responses"]
                    )
                )
    # Literal segments before parameters: `/project/rename` is not `/project/{id}`.
    operations.sort(key=lambda op: op.pattern.pattern.count("[^/]+"))
    return _Document(base, document, tuple(operations))


@functools.cache
def _documents() -> tuple[_Document, ...]:
    return (
        _load("/management", management_document()),
        _load("/catalog", catalog_document()),
    )


def _resolve(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """A response object, following one `$ref` into `components/responses`."""
    ref = node.get("$ref")
    if isinstance(ref, str):
        found: Any = document
        for part in ref.removeprefix("#/").split("/"):
            found = found[part]
        return dict(found)
    return node


def _documented(responses: dict[str, Any], status: int) -> dict[str, Any] | None:
    exact = responses.get(str(status))
    if exact is not None:
        return dict(exact)
    ranged = responses.get(f"{status // 100}XX")
    return dict(ranged) if ranged is not None else None


def check_response(response: httpx.Response) -> None:
    """Raise AssertionError when an answer is not what its document says."""
    request = response.request
    path = request.url.raw_path.decode("latin-1").partition("?")[0]
    found = next((d for d in _documents() if path.startswith(d.base + "/v1/")), None)
    if found is None:
        return
    operation = next(
        (op for op in found.operations if op.method == request.method and op.pattern.match(path)),
        None,
    )
    if operation is None:
        return  # not a documented operation: the router's 404 or 405, or newer than the spec
    response.read()
    where = f"{request.method} {path} -> {response.status_code}"
    status = str(response.status_code)
    deviation = (request.method, operation.path, status)
    if found.base == "/catalog" and (
        deviation in CATALOG_DEVIATIONS | PROTECTED_DROPS or status in ANY_CATALOG_OPERATION
    ):
        error = response.json().get("error", {})
        assert error.get("code") == response.status_code, f"{where}: {response.text[:300]}"
        return
    if response.status_code == 304:  # If-None-Match: no body, the spec's loadTable 304
        assert not response.content, f"{where}: a body with 304"
        return
    documented = _documented(operation.responses, response.status_code)
    assert documented is not None, f"{where}: status not documented; {response.text[:300]}"
    content = _resolve(found.document, documented).get("content", {}).get("application/json")
    if content is None or request.method == "HEAD":
        assert not response.content, f"{where}: a body where none is documented"
        return
    schema = content["schema"]
    body = response.json()
    if schema == _BARE_ERROR_MODEL and isinstance(body, dict) and "error" in body:
        body = body["error"]
    validator = Draft202012Validator({**schema, "components": found.document["components"]})
    checked = _without_nulls(body) if found.base == "/catalog" else body
    errors = sorted(validator.iter_errors(checked), key=str)
    errors = [e for e in errors if not _v1_snapshot_without_summary(body, e)]
    assert not errors, f"{where}: {errors[0].message} at {list(errors[0].absolute_path)}"


def _without_nulls(node: Any) -> Any:
    """Object members that are null, left out: Iceberg's parsers read an optional field's null
    as absent (`JsonUtil.getLongOrNull`), and stored metadata keeps what writers sent (a v3
    table's `current-snapshot-id: null`, as Iceberg 1.10 writes it; a snapshot's
    `parent-snapshot-id: null`). A required field that is null then shows as missing."""
    if isinstance(node, dict):
        return {key: _without_nulls(value) for key, value in node.items() if value is not None}
    if isinstance(node, list):
        return [_without_nulls(item) for item in node]
    return node


def _v1_snapshot_without_summary(body: Any, error: Any) -> bool:
    """Format v1 makes a snapshot's `summary` optional; the spec's schema (v2) requires it."""
    path = list(error.absolute_path)
    return (
        error.validator == "required"
        and "'summary'" in error.message
        and path[:2] == ["metadata", "snapshots"]
        and isinstance(body, dict)
        and body.get("metadata", {}).get("format-version") == 1
    )

"""The OpenAPI documents and Swagger UI that ``api.openapi`` serves.

The routes are mounted on a bare Starlette app here (``api/app.py`` adds them to the real one);
the management document is also run with schemathesis against a real ``icelog serve``.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from openapi_spec_validator import validate
from starlette.applications import Starlette
from starlette.testclient import TestClient

from api.openapi import (
    CATALOG_DOC_PATH,
    MANAGEMENT_DOC_PATH,
    NEWER_THAN_SPEC,
    SPEC_PATH,
    advertised_operations,
    document_operations,
    management_document,
    openapi_routes,
)
from api.routes.config import ENDPOINTS
from tests.conformance.harness import CHECKS, Conformance, OperationReport
from tests.support.fixtures import ServerFactory
from tests.support.server import CatalogServer

# git blob of open-api/rest-catalog-open-api.yaml at tag apache-iceberg-1.10.2
SPEC_BLOB = "e0b524a6d726afeef51c95bbbed07b1140123859"
MANAGEMENT_EXAMPLES = 50  # per operation and generation mode
NIL_UUID = "00000000-0000-0000-0000-000000000000"


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(Starlette(routes=openapi_routes())) as test_client:
        yield test_client


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _resolves(document: dict[str, Any], ref: str) -> bool:
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_shipped_spec_is_the_unmodified_1_10_2_file() -> None:
    blob = subprocess.run(
        ["git", "hash-object", str(SPEC_PATH)], capture_output=True, text=True, check=True
    ).stdout.strip()
    if blob != SPEC_BLOB:  # no git: hash as git does
        data = SPEC_PATH.read_bytes()
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    assert blob == SPEC_BLOB
    assert SPEC_PATH.read_text().startswith("#\n# Licensed to the Apache Software Foundation")


def test_catalog_document_is_valid_and_exactly_the_advertised_operations(
    client: TestClient,
) -> None:
    response = client.get(CATALOG_DOC_PATH)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    document = response.json()
    validate(document)
    assert document["openapi"].startswith("3.1")
    assert document_operations(document) == advertised_operations(ENDPOINTS)
    assert len(document_operations(document)) == len(ENDPOINTS) - len(NEWER_THAN_SPEC)
    assert document["servers"][0]["url"] == "/catalog"
    assert "security" not in document
    dangling = [ref for ref in _refs(document) if not _resolves(document, ref)]
    assert not dangling
    # What was pruned is really unused, and what the operations need is there.
    schemas = document["components"]["schemas"]
    assert "PlanTableScanRequest" not in schemas
    assert {"LoadTableResult", "CommitTableRequest", "IcebergErrorResponse"} <= set(schemas)
    assert {"LoadViewResult", "CommitTransactionRequest"} <= set(schemas)
    # schemathesis loads it too.
    schema = schemathesis.openapi.from_dict(document)
    assert schema["/v1/{prefix}/namespaces"]["GET"] is not None


def test_management_document_is_valid_and_covers_the_management_routes(
    client: TestClient,
) -> None:
    from api.app import MANAGEMENT_ROUTES

    response = client.get(MANAGEMENT_DOC_PATH)
    assert response.status_code == 200
    document = response.json()
    validate(document)
    assert document == management_document()
    assert document["openapi"].startswith("3.1")
    served = {
        (method.lower(), "/v1" + path)
        for methods, path, _handler in MANAGEMENT_ROUTES
        for method in methods
    }
    assert document_operations(document) == served
    assert document["servers"][0]["url"] == "/management"
    dangling = [ref for ref in _refs(document) if not _resolves(document, ref)]
    assert not dangling
    schemathesis.openapi.from_dict(document)


@pytest.mark.parametrize("path", ["/swagger-ui", "/swagger-ui/"])
def test_swagger_ui_lists_both_documents(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert CATALOG_DOC_PATH in page
    assert MANAGEMENT_DOC_PATH in page
    for asset in ("swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js"):
        assert f"/swagger-ui/{asset}" in page
        served = client.get(f"/swagger-ui/{asset}")
        assert served.status_code == 200, asset
        assert len(served.content) > 1000, asset


# -- the management document against a running server ---------------------------------------
@pytest.fixture(scope="module")
def management_server(backend: str, catalog_server_factory: ServerFactory) -> CatalogServer:
    """A server of its own: generated requests create, rename and delete warehouses."""
    return catalog_server_factory(backend)


@pytest.fixture(scope="module")
def management(management_server: CatalogServer) -> Iterator[Conformance]:
    config = httpx.get(f"{management_server.uri}/v1/config", params={"warehouse": "default"})
    assert config.status_code == 200, config.text
    runner = Conformance(
        schema=schemathesis.openapi.from_dict(management_document()),
        base_url=f"{management_server.base}/management",
        fixed={},
        existing=[{"project_id": NIL_UUID, "warehouse_id": config.json()["overrides"]["prefix"]}],
    )
    yield runner
    runner.session.close()


def _confine_storage(root: Path) -> Any:
    """Generated warehouses get a base location under ``root``, never elsewhere on disk."""

    def prepare(case: schemathesis.Case[Any]) -> None:
        body = case.body
        raw = body.get("storage-profile") if isinstance(body, dict) else None
        if isinstance(body, dict) and isinstance(raw, dict):
            profile: dict[str, Any] = dict(raw.items())
            location = profile.get("base-location")
            if isinstance(location, str):
                digest = hashlib.sha256(location.encode()).hexdigest()[:12]
                profile["base-location"] = (root / digest).as_uri()
                case.body = {**body, "storage-profile": profile}

    return prepare


# Per path, DELETE last: the GETs and renames aimed at the default project and warehouse
# should find them.
MANAGEMENT_OPERATIONS = sorted(
    document_operations(management_document()), key=lambda op: (op[1], op[0] == "delete", op[0])
)


@pytest.mark.parametrize(
    ("method", "path"),
    MANAGEMENT_OPERATIONS,
    ids=[f"{m.upper()} {p}" for m, p in MANAGEMENT_OPERATIONS],
)
def test_management_operation_conforms_to_document(
    management: Conformance,
    management_server: CatalogServer,
    tmp_path_factory: pytest.TempPathFactory,
    method: str,
    path: str,
) -> None:
    report: OperationReport = management.run(
        method,
        path,
        max_examples=MANAGEMENT_EXAMPLES,
        checks=CHECKS,
        prepare=_confine_storage(tmp_path_factory.mktemp("warehouses")),
    )
    report.label = f"[{management_server.backend}] {report.label}"
    print(report.summary())
    assert report.total > 0
    assert not report.findings, f"{report.summary()}\n\n{report.describe_findings()}"

"""An in-process catalog: Services behind Starlette's TestClient, and what tests do first
with one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.api.settings import Settings
from tests.integration.conftest import SCHEMA


@contextmanager
def serving(settings: Settings) -> Iterator[tuple[Services, TestClient]]:
    """Services built from `settings` and a client of their app (a server error is an
    answer, not an exception); the services close after."""
    services = Services.build(settings)
    try:
        with TestClient(create_app(settings, services), raise_server_exceptions=False) as client:
            yield services, client
    finally:
        services.close()


def default_prefix(client: Any) -> str:
    """The catalog prefix of the default warehouse, as its config says."""
    found = client.get("/catalog/v1/config", params={"warehouse": "default"})
    return str(found.json()["overrides"]["prefix"])


def with_table_t(client: Any, namespace: str) -> tuple[str, Any]:
    """Namespace `namespace` and its one-column table `t` in the default warehouse, made
    through `client`: the warehouse's catalog path and the create's answer."""
    base = f"/catalog/v1/{default_prefix(client)}"
    made = client.post(f"{base}/namespaces", json={"namespace": [namespace]})
    assert made.status_code == 200, made.text
    created = client.post(
        f"{base}/namespaces/{namespace}/tables", json={"name": "t", "schema": SCHEMA}
    )
    assert created.status_code == 200, created.text
    return base, created


def with_table_db_t(client: Any) -> str:
    """Namespace `db` and its one-column table `t` in the default warehouse, made through
    `client`: the warehouse's catalog path."""
    return with_table_t(client, "db")[0]

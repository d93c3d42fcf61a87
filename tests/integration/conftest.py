"""In-process catalog API over a real event store (SQLite file or PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.api.settings import Settings
from tests.support import postgres
from tests.support.api_contract import check_response
from tests.support.idp import TestIdentityProvider

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@dataclass
class Api:
    client: TestClient
    services: Services
    prefix: str
    warehouse_dir: Path

    def url(self, path: str) -> str:
        return f"/catalog/v1/{self.prefix}{path}"

    def get(self, path: str, **kw: Any) -> Any:
        return self.client.get(self.url(path), **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.client.post(self.url(path), json=body, **kw)

    def delete(self, path: str, **kw: Any) -> Any:
        return self.client.delete(self.url(path), **kw)

    def head(self, path: str, **kw: Any) -> Any:
        return self.client.head(self.url(path), **kw)

    def run_tasks(self) -> int:
        """Run every due background task (expirations, purges) now; how many ran."""
        return self.services.tasks.run_until_idle()

    def position(self) -> int:
        return int(self.services.catalog.app.recorder.max_notification_id() or 0)


def replica_settings(api: Api, extra: dict[str, str] | None = None) -> Settings:
    """Settings of a second server on `api`'s database (PostgreSQL) or file (SQLite)."""
    env = {"ICELOG_DATA_DIR": str(api.services.settings.data_dir), **(extra or {})}
    if api.services.settings.database_url:
        env["ICELOG_DATABASE_URL"] = api.services.settings.database_url
        env["ICELOG_SECRETS_KEY"] = postgres.TEST_SECRETS_KEY
        env.setdefault("ICELOG_PG_MAX_CONNECTIONS", str(postgres.SERVER_CONNECTIONS))
    return Settings.from_env(env)


def make_settings(tmp_path: Path, database_url: str | None) -> Settings:
    # Tests run background tasks explicitly (Api.run_tasks), never on a timer.
    env = {
        "ICELOG_DATA_DIR": str(tmp_path / "data"),
        "ICELOG_TASK_WORKERS": "0",
        "ICELOG_AUDIT_CHAIN_INTERVAL_SECONDS": "0",  # tests chain explicitly
    }
    if database_url:
        env["ICELOG_DATABASE_URL"] = database_url
        env["ICELOG_SECRETS_KEY"] = postgres.TEST_SECRETS_KEY
        env["ICELOG_PG_MAX_CONNECTIONS"] = str(postgres.SERVER_CONNECTIONS)
    return Settings.from_env(env)


@pytest.fixture(params=BACKENDS)
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    yield from _api(request.param, tmp_path)


@pytest.fixture
def pg_api(tmp_path: Path) -> Iterator[Api]:
    """The API on PostgreSQL only, for what only the PostgreSQL store does."""
    yield from _api("postgres", tmp_path)


def _api(backend: str, tmp_path: Path) -> Iterator[Api]:
    database_url = postgres.create_database() if backend == "postgres" else None
    try:
        settings = make_settings(tmp_path, database_url)
        services = Services.build(settings)
        with TestClient(create_app(settings, services), raise_server_exceptions=False) as client:
            client.event_hooks["response"].append(check_response)
            config = client.get("/catalog/v1/config", params={"warehouse": "default"}).json()
            yield Api(
                client,
                services,
                config["overrides"]["prefix"],
                settings.data_dir / "warehouse",
            )
        services.close()
    finally:
        if database_url:
            postgres.drop_database(database_url)


SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 7,
    "fields": [
        {"id": 3, "name": "id", "type": "long", "required": True},
        {"id": 4, "name": "data", "type": "string", "required": False},
        {"id": 5, "name": "ts", "type": "timestamptz", "required": False},
    ],
}


def create_table(api: Api, ns: str, name: str, **extra: Any) -> dict[str, Any]:
    response = api.post(f"/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# -- authentication on: a local OpenID provider (tests/support/idp.py) --------------------
class Authed:
    def __init__(self, client: TestClient, services: Services, idp: TestIdentityProvider) -> None:
        self.client = client
        self.services = services
        self.idp = idp

    def call(self, method: str, path: str, token: str | None, **kwargs: Any) -> Any:
        headers = dict(kwargs.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return self.client.request(method, path, headers=headers, **kwargs)

    def events(self) -> list[Any]:
        return list(self.services.catalog.app.recorder.select_notifications(start=1, limit=10_000))


@pytest.fixture(scope="module")
def idp() -> Iterator[TestIdentityProvider]:
    with TestIdentityProvider() as provider:
        yield provider


@pytest.fixture(params=BACKENDS)
def authed(
    request: pytest.FixtureRequest, tmp_path: Path, idp: TestIdentityProvider
) -> Iterator[Authed]:
    database_url = postgres.create_database() if request.param == "postgres" else None
    try:
        base = make_settings(tmp_path, database_url)
        env = {"ICELOG_OPENID_PROVIDER_URI": idp.uri, "ICELOG_OPENID_AUDIENCE": "icelog"}
        settings = Settings.from_env(
            {**{f"ICELOG_{k}": v for k, v in _env_of(base).items()}, **env}
        )
        services = Services.build(settings)
        with TestClient(create_app(settings, services), raise_server_exceptions=False) as client:
            client.event_hooks["response"].append(check_response)
            yield Authed(client, services, idp)
        services.close()
    finally:
        if database_url:
            postgres.drop_database(database_url)


def _env_of(settings: Settings) -> dict[str, str]:
    env = {
        "DATA_DIR": str(settings.data_dir),
        "TASK_WORKERS": "0",
        "AUDIT_CHAIN_INTERVAL_SECONDS": "0",
    }
    if settings.database_url:
        env["DATABASE_URL"] = settings.database_url
        env["SECRETS_KEY"] = postgres.TEST_SECRETS_KEY
        env["PG_MAX_CONNECTIONS"] = str(postgres.SERVER_CONNECTIONS)
    return env

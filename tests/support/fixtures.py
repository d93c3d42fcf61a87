"""pytest fixtures for the end-to-end tests (loaded from tests/conftest.py).

- ``pg_database``: URL of a fresh PostgreSQL database for the whole session (dropped at the end);
  ``pg_database_factory`` makes more.
- ``catalog_server_factory``: starts ``icelog serve`` on a free port with a temp data dir.
- ``backend`` / ``catalog_server``: one server per backend (``sqlite``, ``postgres``,
  ``sqlite-auth``), shared by the tests of a session; tests isolate themselves with unique
  namespace names. ``sqlite-auth`` is the SQLite server with an OpenID provider
  (tests/support/idp.py): the clients of these tests then use the token of a user who holds
  nothing but `create` on the project, so each test works on what it made itself (owners
  hold every right on what they create) — the whole shared suite, with auth on.
- ``spark``: the one SparkSession of the test session (started lazily, only for Spark tests).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import postgres
from tests.support.idp import TestIdentityProvider
from tests.support.server import CatalogServer, start_server

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("sqlite-auth", id="sqlite-auth"),
]
# The deployments without a provider: for tests that act anonymously (the console's
# browsing, task workers, generated management requests).
OPEN_BACKENDS = [p for p in BACKENDS if not str(p.values[0]).endswith("-auth")]
# The users of an `-auth` deployment: who bootstraps it, and whose token its clients use.
E2E_ADMIN = "e2e-admin"
E2E_WRITER = "e2e-writer"
_TOKEN_SECONDS = 12 * 3600

ServerFactory = Callable[..., CatalogServer]
_LOG_TAIL = 8000


@pytest.fixture(scope="session")
def pg_database_factory() -> Iterator[Callable[[], str]]:
    created: list[str] = []

    def make() -> str:
        url = postgres.create_database()
        created.append(url)
        return url

    yield make
    for url in created:
        postgres.drop_database(url)


@pytest.fixture(scope="session")
def pg_database(pg_database_factory: Callable[[], str]) -> str:
    return pg_database_factory()


@pytest.fixture(scope="session")
def e2e_idp() -> Iterator[TestIdentityProvider]:
    """The identity provider of every `-auth` deployment of the session."""
    with TestIdentityProvider() as provider:
        yield provider


# Every server the factory started, and those the whole session shares (`catalog_server`):
# the others stop when the module that started them ends, so a long run never holds more
# servers (and PostgreSQL connections: at most 5 a server, tests/support/postgres.py) than
# one module needs.
_STARTED: list[CatalogServer] = []
_SHARED: set[int] = set()


def shared_by_the_session(server: CatalogServer) -> CatalogServer:
    """Keep `server` (made by a session-scoped fixture) running to the end of the session."""
    _SHARED.add(id(server))
    return server


@pytest.fixture(scope="module", autouse=True)
def _stop_the_modules_servers() -> Iterator[None]:
    before = len(_STARTED)
    yield
    for server in _STARTED[before:]:
        if id(server) not in _SHARED:
            server.stop()


@pytest.fixture(scope="session")
def catalog_server_factory(
    tmp_path_factory: pytest.TempPathFactory,
    pg_database_factory: Callable[[], str],
    e2e_idp: TestIdentityProvider,
) -> Iterator[ServerFactory]:
    servers: list[CatalogServer] = []

    def make(
        backend: str = "sqlite",
        env: dict[str, str] | None = None,
        *,
        data_dir: Path | None = None,
        database_url: str | None = None,
    ) -> CatalogServer:
        """Start a server; pass ``data_dir``/``database_url`` of an earlier one to restart it.
        ``<store>-auth``: with the session's identity provider, its clients' token set."""
        store = backend.removesuffix("-auth")
        restart = data_dir is not None
        if data_dir is None:
            data_dir = tmp_path_factory.mktemp(f"icelog-{backend}")
        if store == "postgres" and database_url is None:
            database_url = pg_database_factory()
        if store != backend:
            env = {**(env or {}), **auth_env(e2e_idp)}
        server = start_server(data_dir, backend=store, database_url=database_url, env=env)
        servers.append(server)
        _STARTED.append(server)
        if store != backend:
            server.token = provision_writer(server, e2e_idp, first_start=not restart)
        return server

    yield make
    for server in servers:
        server.stop()


def auth_env(idp: TestIdentityProvider) -> dict[str, str]:
    return {"ICELOG_OPENID_PROVIDER_URI": idp.uri, "ICELOG_OPENID_AUDIENCE": "icelog"}


def provision_writer(server: CatalogServer, idp: TestIdentityProvider, *, first_start: bool) -> str:
    """Bootstrap an `-auth` server as E2E_ADMIN and give E2E_WRITER `create` on the default
    project, nothing more; the writer's token."""
    if first_start:
        admin = {"Authorization": f"Bearer {idp.issue(E2E_ADMIN, expires_in=_TOKEN_SECONDS)}"}
        management = f"{server.base}/management/v1"
        done = httpx.post(
            f"{management}/bootstrap", json={"accept-terms-of-use": True}, headers=admin
        )
        assert done.status_code == 204, done.text
        granted = httpx.post(
            f"{management}/permissions/project/assignments",
            json={"writes": [{"type": "create", "user": f"oidc~{E2E_WRITER}"}]},
            headers=admin,
        )
        assert granted.status_code == 204, granted.text
    return idp.issue(E2E_WRITER, expires_in=_TOKEN_SECONDS)


@contextmanager
def writer_holds_on_warehouse(
    server: CatalogServer, idp: TestIdentityProvider, relation: str
) -> Iterator[None]:
    """On an `-auth` server, E2E_WRITER holds `relation` on the server's warehouse for the
    `with` block (granted and revoked by E2E_ADMIN); elsewhere nothing to do."""
    if server.token is None:
        yield
        return
    admin = {"Authorization": f"Bearer {idp.issue(E2E_ADMIN, expires_in=_TOKEN_SECONDS)}"}
    config = httpx.get(
        f"{server.uri}/v1/config", params={"warehouse": server.warehouse}, headers=admin
    )
    config.raise_for_status()
    path = (
        f"{server.base}/management/v1/permissions/warehouse/"
        f"{config.json()['overrides']['prefix']}/assignments"
    )
    grant = [{"type": relation, "user": f"oidc~{E2E_WRITER}"}]
    httpx.post(path, json={"writes": grant}, headers=admin).raise_for_status()
    try:
        yield
    finally:
        httpx.post(path, json={"deletes": grant}, headers=admin).raise_for_status()


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def catalog_server(backend: str, catalog_server_factory: ServerFactory) -> CatalogServer:
    return shared_by_the_session(catalog_server_factory(backend))


@pytest.fixture
def unique_name() -> str:
    return f"t_{secrets.token_hex(4)}"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.spark import build_spark_session

    session = build_spark_session(tmp_path_factory.mktemp("spark"))
    yield session
    session.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On failure, attach the tail of every catalog server log the test used."""
    report = yield
    if report.failed and isinstance(item, pytest.Function):
        for value in item.funcargs.values():
            if isinstance(value, CatalogServer):
                tail = value.log()[-_LOG_TAIL:]
                report.sections.append((f"icelog server log ({value.backend}, tail)", tail))
    return report


@pytest.fixture
def catalog(catalog_server: CatalogServer) -> Any:
    """A fresh PyIceberg REST catalog client for the backend's server."""
    from tests.support.clients import rest_catalog

    return rest_catalog(catalog_server)


@pytest.fixture
def namespace(catalog: Any, unique_name: str) -> str:
    """A new, empty namespace with a unique name."""
    name = f"ns_{unique_name}"
    catalog.create_namespace(name)
    return name


@pytest.fixture(scope="session")
def spark_catalog(spark: Any, backend: str, catalog_server: CatalogServer) -> str:
    """Name of a Spark catalog (``ice_<backend>``) pointing at the backend's icelog server."""
    from tests.support.spark import register_rest_catalog

    return register_rest_catalog(
        spark, f"ice_{backend.replace('-', '_')}", catalog_server.uri, token=catalog_server.token
    )

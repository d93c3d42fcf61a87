"""pytest fixtures for the end-to-end tests (loaded from tests/conftest.py).

- ``pg_database``: URL of a fresh PostgreSQL database for the whole session (dropped at the end);
  ``pg_database_factory`` makes more.
- ``catalog_server_factory``: starts ``icelog serve`` on a free port with a temp data dir.
- ``backend`` / ``catalog_server``: one server per backend (``sqlite``, ``postgres``), shared by the
  tests of a session; tests isolate themselves with unique namespace names.
- ``spark``: the one SparkSession of the test session (started lazily, only for Spark tests).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import postgres
from tests.support.server import CatalogServer, start_server

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]

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
def catalog_server_factory(
    tmp_path_factory: pytest.TempPathFactory, pg_database_factory: Callable[[], str]
) -> Iterator[ServerFactory]:
    servers: list[CatalogServer] = []

    def make(
        backend: str = "sqlite",
        env: dict[str, str] | None = None,
        *,
        data_dir: Path | None = None,
        database_url: str | None = None,
    ) -> CatalogServer:
        """Start a server; pass ``data_dir``/``database_url`` of an earlier one to restart it."""
        if data_dir is None:
            data_dir = tmp_path_factory.mktemp(f"icelog-{backend}")
        if backend == "postgres" and database_url is None:
            database_url = pg_database_factory()
        server = start_server(data_dir, backend=backend, database_url=database_url, env=env)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def catalog_server(backend: str, catalog_server_factory: ServerFactory) -> CatalogServer:
    return catalog_server_factory(backend)


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
def spark_catalog(spark: Any, catalog_server: CatalogServer) -> str:
    """Name of a Spark catalog (``ice_<backend>``) pointing at the backend's icelog server."""
    from tests.support.spark import register_rest_catalog

    return register_rest_catalog(spark, f"ice_{catalog_server.backend}", catalog_server.uri)

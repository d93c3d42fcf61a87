"""Shared fixtures live in tests/support/fixtures.py (PostgreSQL, catalog servers, Spark)."""

import os

from tests.support.postgres import TEST_SECRETS_KEY

# Every catalog a test starts (in-process or as a child process) on PostgreSQL needs the
# storage-credentials key; children inherit it from here.
os.environ.setdefault("ICELOG_SECRETS_KEY", TEST_SECRETS_KEY)

pytest_plugins = ["tests.support.fixtures"]


def pytest_configure(config: object) -> None:
    # The adversarial lane: tests that attack (what a hostile tenant or client would try).
    # `./scripts/test -m attack` runs just them, on every backend they are written for.
    config.addinivalue_line(  # type: ignore[attr-defined]
        "markers", "attack: an adversarial test (what a hostile tenant or client would try)"
    )

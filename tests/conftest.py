"""Shared fixtures live in tests/support/fixtures.py (PostgreSQL, catalog servers, Spark)."""

pytest_plugins = ["tests.support.fixtures"]

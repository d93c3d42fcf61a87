"""The `icelog` command line: migrate (idempotent) and clear start-up errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.support import postgres


def icelog(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.postgres
def test_migrate_twice_creates_the_schema_once(tmp_path: Path) -> None:
    with postgres.temporary_database() as url:
        env = {"ICELOG_DATABASE_URL": url, "ICELOG_DATA_DIR": str(tmp_path)}
        first = icelog("migrate", env=env)
        assert first.returncode == 0, first.stderr
        second = icelog("migrate", env=env)
        assert second.returncode == 0, second.stderr
        with psycopg.connect(url) as conn:
            tables = {
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema='public'"
                )
            }
        assert {
            "icelog_events",
            "icelog_snapshots",
            "icelog_tabulars",
            "icelog_namespaces",
        } <= tables


def test_bad_settings_fail_fast_with_a_clear_message(tmp_path: Path) -> None:
    bad_url = icelog("migrate", env={"ICELOG_DATABASE_URL": "mysql://x/y"})
    assert bad_url.returncode == 2
    assert "ICELOG_DATABASE_URL must be a postgresql:// URL" in bad_url.stderr
    bad_port = icelog("serve", env={"ICELOG_PORT": "eighty", "ICELOG_DATA_DIR": str(tmp_path)})
    assert bad_port.returncode == 2
    assert "ICELOG_PORT must be an integer" in bad_port.stderr

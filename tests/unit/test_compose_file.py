"""docker-compose.yml stays valid (checked by the Compose v2 binary, no Docker engine needed)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import compose  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[2]


def test_compose_file_is_valid_and_runs_two_replicas_on_postgres() -> None:
    binary = os.path.join(os.path.dirname(compose.__file__), "docker-compose")
    result = subprocess.run(
        [binary, "-f", str(ROOT / "docker-compose.yml"), "config", "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    assert {"postgres", "nats", "kafka", "minio", "icelog-1", "icelog-2"} <= set(services)
    for replica in ("icelog-1", "icelog-2"):
        url = services[replica]["environment"]["ICELOG_DATABASE_URL"]
        assert url.startswith("postgresql://")

"""examples/spark_pipeline.py runs green against a fresh icelog server."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.server import REPO_ROOT, CatalogServer

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(600)]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_example_pipeline(catalog_server: CatalogServer) -> None:
    # A separate Python process: the example starts (and stops) its own SparkSession.
    result = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "examples" / "spark_pipeline.py"),
            "--uri",
            catalog_server.uri,
            "--warehouse",
            catalog_server.warehouse,
            "--namespace",
            "example_shop",
        ],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr[-5000:]}"
    assert "all checks passed" in result.stdout
    assert "[FAIL]" not in result.stdout

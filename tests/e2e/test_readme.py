"""The README's client blocks, run as written against a fresh server, so they cannot rot.

Every fenced block preceded by `<!-- readme-test: NAME -->` is extracted and run with bash
from the repository root, in README order, against one `icelog serve` — with two
substitutions only: the server's address for `127.0.0.1:8181` / `localhost:8181` (the test
server listens on a free port), and its data directory for `$PWD/.icelog` (so that the
example warehouse lands next to the test's default warehouse, not in the checkout). The
connected variants (Maven, DuckDB's extension repository) cannot run on a machine that
reaches only PyPI; their offline twins, which differ only in where the jar and the
extensions come from, run here.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support.server import REPO_ROOT, start_server

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(600)]

README = REPO_ROOT / "README.md"
_MARKED = re.compile(r"<!-- readme-test: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", re.DOTALL)
EXPECTED = ["pyiceberg", "duckdb", "spark", "warehouse"]


def marked_blocks() -> list[tuple[str, str, str]]:
    """(name, language, text) of every block the README marks for this test, in order."""
    return [(m.group(1), m.group(2), m.group(3)) for m in _MARKED.finditer(README.read_text())]


def test_the_readme_marks_the_blocks_this_test_runs() -> None:
    assert sorted(name for name, _, _ in marked_blocks()) == sorted(EXPECTED)
    assert all(language == "sh" for _, language, _ in marked_blocks())


def test_every_marked_readme_block_runs_as_written(tmp_path: Path) -> None:
    data = tmp_path / "icelog"
    server = start_server(data)
    try:
        address = f"127.0.0.1:{server.port}"
        outputs: dict[str, str] = {}
        for name, _language, text in marked_blocks():
            script = (
                text.replace("127.0.0.1:8181", address)
                .replace("localhost:8181", address)
                .replace('"$PWD"\'/.icelog', f"{data}'")
            )
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert done.returncode == 0, (
                f"README block {name!r} failed:\n{done.stdout}\n{done.stderr}"
            )
            outputs[name] = done.stdout
        # What each block shows is what it did.
        assert "kind" in outputs["pyiceberg"] and "[1,2]" in outputs["pyiceberg"].replace(" ", "")
        assert "(1, 'a')" in outputs["duckdb"] and "(2, 'b')" in outputs["duckdb"]
        assert "9.5" in outputs["spark"]
        created = httpx.get(f"{server.base}/management/v1/warehouse").json()["warehouses"]
        assert "analytics" in {w["name"] for w in created}
        assert (data / "analytics").is_dir(), "creating the warehouse created its directory"
    finally:
        server.stop()

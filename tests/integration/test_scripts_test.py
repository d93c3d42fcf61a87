"""`scripts/test` with arguments runs one pytest over what they select: the paths they name
(README: `./scripts/test tests/integration`), or every test when they name none
(`./scripts/test -m attack`). A path used to run the whole suite still: the script put
`tests` before the arguments."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tomllib

import pytest

from tests.support.server import REPO_ROOT


def pytest_arguments(*args: str) -> list[str]:
    """What the script's pytest run would be given (its dry run prints the commands)."""
    done = subprocess.run(
        [str(REPO_ROOT / "scripts" / "test"), *args],
        env={**os.environ, "ICELOG_TEST_DRY_RUN": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("==> pytest:")]
    assert len(lines) == 1, done.stdout
    command = shlex.split(lines[0].removeprefix("==> pytest:"))
    assert command[:3] == [".venv/bin/python", "-m", "pytest"], command
    return command[3:]


def collected(arguments: list[str]) -> list[str]:
    """The test ids pytest selects with `arguments`, run from the repository's root."""
    collect = ["--collect-only", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *collect, *arguments],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if "::" in line]


@pytest.mark.parametrize(
    "path",
    [
        "tests/unit/test_turns.py",
        "tests/unit/test_turns.py::test_several_keys_in_any_order_never_deadlock",
        "tests/conformance",
    ],
)
def test_a_path_selects_only_that_path(path: str) -> None:
    arguments = pytest_arguments(path, "-x")
    assert arguments == [path, "-x"]
    found = collected(arguments)
    assert found, "the path's tests are collected"
    assert all(test.startswith(path) for test in found), found[:5]


def test_without_a_path_every_test_folder_is_searched() -> None:
    # `-m attack` alone: pytest then searches pyproject's testpaths, the whole suite.
    assert pytest_arguments("-m", "attack") == ["-m", "attack"]
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert config["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]


def test_the_dry_run_runs_nothing() -> None:
    done = subprocess.run(
        [str(REPO_ROOT / "scripts" / "test"), "tests/unit/test_turns.py"],
        env={**os.environ, "ICELOG_TEST_DRY_RUN": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "dry run: nothing ran" in done.stdout
    assert "set-up ok" not in done.stdout and "passed" not in done.stdout

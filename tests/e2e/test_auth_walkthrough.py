"""docs/auth.md's "Try auth locally", run as written, so that it cannot rot.

Every fenced block preceded by `<!-- auth-walkthrough: NAME -->` is extracted: the first
(`icelog dev-idp`) and the second (`icelog serve` with the variables the provider printed)
start in the background as the walkthrough's first two shells do; the others run in order
in one bash, as in its third shell (they share its variables). Substitutions only: free
ports for `127.0.0.1:8180` and `127.0.0.1:8181` (the provider gets the documented
`--port`, the server `ICELOG_PORT`), a temporary directory for `.icelog/auth`, and this
interpreter's bin directory for `.venv/bin` (the test may run from a worktree without its
own `.venv`). Real PyIceberg, DuckDB and Spark (one Spark session) read as bob, who holds
nothing but `select` on the namespace `sales`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import REPO_ROOT, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(900)]

AUTH_DOC = REPO_ROOT / "docs" / "auth.md"
_MARKED = re.compile(r"<!-- auth-walkthrough: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", re.DOTALL)
EXPECTED = [
    "dev-idp", "serve", "bootstrap", "alice-writes", "grant",
    "bob-pyiceberg", "bob-duckdb", "bob-spark",
]  # fmt: skip
THIRD_SHELL = EXPECTED[2:]


def marked_blocks() -> list[tuple[str, str, str]]:
    """(name, language, text) of every block the walkthrough marks, in order."""
    return [(m[1], m[2], m[3]) for m in _MARKED.finditer(AUTH_DOC.read_text())]


def test_the_walkthrough_marks_the_blocks_this_test_runs() -> None:
    assert [name for name, _, _ in marked_blocks()] == EXPECTED
    assert all(language == "sh" for _, language, _ in marked_blocks())


def _clean_env() -> dict[str, str]:
    """A newcomer's shell: no icelog settings of the test run leak into the walkthrough."""
    kept = ("ICELOG_SECRETS_KEY",)
    return {k: v for k, v in os.environ.items() if not k.startswith("ICELOG_") or k in kept}


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)


def _banner(provider: subprocess.Popen[str]) -> list[str]:
    """What `icelog dev-idp` prints once it listens (it ends with how to stop it)."""
    assert provider.stdout is not None
    lines: list[str] = []
    for line in provider.stdout:
        lines.append(line.rstrip("\n"))
        if "Stop with Ctrl-C" in line:
            return lines
    raise AssertionError("icelog dev-idp ended before it listened:\n" + "\n".join(lines))


def _wait_healthy(base: str, serve: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert serve.poll() is None, f"icelog serve exited:\n{log.read_text()}"
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"icelog serve did not answer:\n{log.read_text()}")


def _sections(output: str) -> dict[str, str]:
    """The third shell's output, by the block that printed it."""
    found: dict[str, str] = {}
    for part in output.split("=== block ")[1:]:
        name, _, text = part.partition("\n")
        found[name] = text
    return found


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in reversed(processes):
        _stop(process)


def test_the_walkthrough_runs_as_written(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    idp_port, serve_port = free_port(), free_port()
    data = tmp_path / "icelog-auth"

    def as_run_here(text: str) -> str:
        return (
            text.replace(".venv/bin/", f"{Path(sys.executable).parent}/")
            .replace("127.0.0.1:8180", f"127.0.0.1:{idp_port}")
            .replace("127.0.0.1:8181", f"127.0.0.1:{serve_port}")
            .replace(".icelog/auth", str(data))
        )

    blocks = {name: as_run_here(text) for name, _, text in marked_blocks()}
    env = _clean_env()

    # First shell: the provider, on the port the test chose.
    provider = subprocess.Popen(
        ["bash", "-c", f"exec {blocks['dev-idp']} --port {idp_port}"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    started.append(provider)
    printed = [line for line in _banner(provider) if line.startswith("export ")]
    documented = [line for line in blocks["serve"].splitlines() if line.startswith("export ")]
    assert printed == documented, "the walkthrough exports what dev-idp prints"

    # Second shell: icelog with auth on.
    log = tmp_path / "serve.log"
    with log.open("w") as serve_log:
        serve = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", blocks["serve"]],
            cwd=tmp_path, env={**env, "ICELOG_PORT": str(serve_port)}, stdout=serve_log,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
    started.append(serve)
    base = f"http://127.0.0.1:{serve_port}"
    _wait_healthy(base, serve, log)
    assert httpx.get(f"{base}/catalog/v1/config").status_code == 401

    # Third shell: everything else, in order, sharing its variables.
    script = "\n".join(f"echo '=== block {name}'\n{blocks[name]}" for name in THIRD_SHELL)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{log.read_text()[-4000:]}"
    said = _sections(done.stdout)

    assert '"id":"oidc~alice"' in said["bootstrap"]
    assert "('sales',)" in said["alice-writes"] and "('hr',)" in said["alice-writes"]
    assert '"get_metadata"' in said["grant"]  # bob's actions on the namespace
    pyiceberg = said["bob-pyiceberg"].splitlines()
    assert pyiceberg[0] == "[('sales',)]"
    assert pyiceberg[1] == "[{'id': 1, 'amount': 9.5}, {'id': 2, 'amount': 12.0}]"
    assert pyiceberg[2].startswith("hr.salaries:")
    assert "[(1, 9.5), (2, 12.0)]" in said["bob-duckdb"]
    spark = said["bob-spark"]
    assert "[Row(id=1, amount=9.5), Row(id=2, amount=12.0)]" in spark
    assert "[Row(namespace='sales')]" in spark

    # bob did all this holding one grant: select on the namespace sales.
    alice = httpx.post(
        f"http://127.0.0.1:{idp_port}/token",
        data={"grant_type": "client_credentials"}, auth=("alice", "alice-secret"),
    ).json()["access_token"]  # fmt: skip
    headers = {"Authorization": f"Bearer {alice}"}
    management = f"{base}/management/v1"
    warehouse = httpx.get(f"{management}/warehouse", headers=headers).json()["warehouses"][0]
    for above in ("server", "project", f"warehouse/{warehouse['id']}"):
        held = httpx.get(f"{management}/permissions/{above}/assignments", headers=headers)
        assert held.status_code == 200, held.text
        assert "oidc~bob" not in held.text, above

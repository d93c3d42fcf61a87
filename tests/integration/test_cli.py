"""The `icelog` command line: migrate (idempotent) and clear start-up errors."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from starlette.testclient import TestClient

from icelog.api import cli, cli_log
from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.api.settings import Settings
from icelog.projections.sql import DatabaseUnavailableError
from tests.integration.conftest import SCHEMA
from tests.support import postgres
from tests.support.server import free_port


def icelog(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "icelog.api", *args],
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


@contextmanager
def _catalog_with_sales(env: dict[str, str]) -> Iterator[tuple[Services, TestClient, str]]:
    """An in-process catalog on `env` with namespace `sales` in its default warehouse: its
    services, a client and the warehouse's catalog path; the services close after."""
    settings = Settings.from_env(env)
    services = Services.build(settings)
    try:
        with TestClient(create_app(settings, services)) as client:
            config = client.get("/catalog/v1/config", params={"warehouse": "default"}).json()
            base = f"/catalog/v1/{config['overrides']['prefix']}"
            client.post(f"{base}/namespaces", json={"namespace": ["sales"]})
            yield services, client, base
    finally:
        services.close()


def test_events_tail_prints_the_log_as_cloud_events(tmp_path: Path) -> None:
    env = {"ICELOG_DATA_DIR": str(tmp_path), "ICELOG_TASK_WORKERS": "0"}
    with _catalog_with_sales(env) as (services, client, base):
        created = client.post(
            f"{base}/namespaces/sales/tables", json={"name": "orders", "schema": SCHEMA}
        )
        assert created.status_code == 200
        other = client.post(
            "/management/v1/warehouse",
            json={
                "warehouse-name": "analytics",
                "storage-profile": {
                    "type": "file",
                    "base-location": (tmp_path / "analytics").as_uri(),
                },
                "delete-profile": {"type": "hard"},
            },
        ).json()["warehouse-id"]
        client.post(f"/catalog/v1/{other}/namespaces", json={"namespace": ["ops"]})
        head = int(services.catalog.app.recorder.max_notification_id() or 0)
    lines = icelog("events", "tail", "-n", "100", env=env)
    assert lines.returncode == 0, lines.stderr
    rows = lines.stdout.splitlines()
    assert len(rows) == head, "every event, one line each"
    # Each line names the warehouse (by name) before the subject.
    [created_line] = [r for r in rows if "table.created.v1" in r]
    assert created_line.split()[3:5] == ["default", "sales.orders"], created_line
    [ops_line] = [r for r in rows if "namespace.created.v1" in r and " ops " in r]
    assert ops_line.split()[3:5] == ["analytics", "ops"], ops_line
    as_json = icelog("events", "tail", "--json", "--type", "table.created", env=env)
    [event] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert event["type"] == "io.icelog.table.created.v1"
    assert event["subject"] == "sales.orders" and event["name"] == "orders"
    assert event["data"]["name"] == "orders"
    after = icelog("events", "tail", "--after", str(head - 1), env=env)
    assert len(after.stdout.splitlines()) == 1, "--after starts after that position"


def test_catalog_at_prints_the_catalog_as_of_a_position(tmp_path: Path) -> None:
    env = {"ICELOG_DATA_DIR": str(tmp_path), "ICELOG_TASK_WORKERS": "0"}
    with _catalog_with_sales(env) as (services, client, base):
        before_table = int(services.catalog.app.recorder.max_notification_id() or 0)
        client.post(f"{base}/namespaces/sales/tables", json={"name": "o", "schema": SCHEMA})
        client.post(f"{base}/namespaces", json={"namespace": ["sales", "eu"]})
        for name in ("p", "q"):
            table = {"name": name, "schema": SCHEMA}
            client.post(f"{base}/namespaces/sales%1Feu/tables", json=table)
    then = icelog("catalog", "at", str(before_table), env=env)
    assert then.returncode == 0, then.stderr
    [ns] = json.loads(then.stdout)["warehouses"][0]["namespaces"]
    assert ns["namespace"] == ["sales"] and ns["tables"] == []
    now = json.loads(icelog("catalog", "at", "2999-01-01T00:00:00Z", env=env).stdout)
    sales, eu = now["warehouses"][0]["namespaces"]
    assert [t["name"] for t in sales["tables"]] == ["o"]
    assert [t["name"] for t in eu["tables"]] == ["p", "q"]
    assert "next-page-token" not in now
    # Printed page by page (one namespace or table per page here), still one document.
    paged = icelog("catalog", "at", "2999-01-01T00:00:00Z", "--page-size", "1", env=env)
    assert json.loads(paged.stdout) == now
    assert icelog("catalog", "at", "someday", env=env).returncode == 2
    assert icelog("catalog", "at", "1", "--page-size", "0", env=env).returncode == 2


def test_metadata_verify_finds_changed_and_missing_files(tmp_path: Path) -> None:
    env = {"ICELOG_DATA_DIR": str(tmp_path), "ICELOG_TASK_WORKERS": "0"}
    settings = Settings.from_env(env)
    services = Services.build(settings)
    locations = {}
    try:
        with TestClient(create_app(settings, services)) as client:
            config = client.get("/catalog/v1/config", params={"warehouse": "default"}).json()
            base = f"/catalog/v1/{config['overrides']['prefix']}"
            client.post(f"{base}/namespaces", json={"namespace": ["db"]})
            for name in ("a", "b", "c"):
                client.post(f"{base}/namespaces/db/tables", json={"name": name, "schema": SCHEMA})
                for n in range(3):
                    done = client.post(
                        f"{base}/namespaces/db/tables/{name}",
                        json={"updates": [{"action": "set-properties", "updates": {"n": str(n)}}]},
                    )
                    assert done.status_code == 200
                locations[name] = done.json()["metadata-location"][len("file://") :]
            client.post(f"{base}/namespaces/db/tables", json={"name": "gone", "schema": SCHEMA})
            client.delete(f"{base}/namespaces/db/tables/gone")
    finally:
        services.close()
    clean = icelog("metadata", "verify", "-v", env=env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "3 table(s) and view(s) checked; 0 problem(s)" in clean.stdout
    changed = json.loads(Path(locations["a"]).read_text())
    changed["properties"]["n"] = "tampered"
    Path(locations["a"]).write_text(json.dumps(changed))
    Path(locations["b"]).unlink()
    found = icelog("metadata", "verify", env=env)
    assert found.returncode == 1
    assert "differs    table db.a" in found.stdout and "properties" in found.stdout
    assert "missing    table db.b" in found.stdout
    assert "2 problem(s)" in found.stdout


def test_read_commands_never_create_a_catalog(tmp_path: Path) -> None:
    """Only `serve` and `migrate` create a catalog: a read command in a directory without
    one says so, exits non-zero and leaves nothing behind."""
    for command in (
        ["events", "tail"],
        ["audit", "verify"],
        ["catalog", "at", "1"],
        ["metadata", "verify"],
        ["projections", "verify"],
        ["tasks", "run", "--once"],
        ["secrets", "rotate"],
        ["namespaces"],
        ["tables", "sales"],
        ["history", "sales.orders"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "icelog.api", *command],
            env={**os.environ, "ICELOG_DATA_DIR": str(tmp_path / "none")},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "no catalog at" in done.stderr and "ICELOG_DATA_DIR" in done.stderr
    assert not (tmp_path / "none").exists(), "nothing was created"


# The commands that open the catalog on start: a server, the schema tool, a reader.
STARTING = (["serve"], ["migrate"], ["events", "tail"])
PG_ENV = {"ICELOG_SECRETS_KEY": postgres.TEST_SECRETS_KEY}


def _fails_naming(url: str, *causes: str, commands: tuple[list[str], ...] = STARTING) -> None:
    """Each command fails at once, exit 1, with one line naming the cause and the URL
    without its password, and no traceback (every command asks the same check first)."""
    for command in commands:
        done = icelog(*command, env={"ICELOG_DATABASE_URL": url, **PG_ENV})
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.stdout == "", "nothing is announced"
        [line] = done.stderr.splitlines()
        assert line.startswith("icelog: cannot connect to postgresql://"), line
        assert all(cause in line for cause in causes), (causes, line)
        assert "s3cret" not in line, "never the password"


@pytest.mark.postgres
def test_a_wrong_port_is_a_refused_connection() -> None:
    url = postgres.url_as(postgres.PG_USER, "postgres", "s3cret", port=free_port())
    _fails_naming(url, "connection refused")


@pytest.mark.postgres
@pytest.mark.attack
def test_a_password_given_as_a_query_parameter_is_never_said() -> None:
    url = postgres.url_as(postgres.PG_USER, "postgres", port=free_port())
    _fails_naming(url + "?sslmode=disable&password=s3cret", "connection refused")
    _fails_naming(url + "?PassWord=s3cret", "connection refused", commands=(["migrate"],))


@pytest.mark.attack
@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:s3cret@127.0.0.1:abc/db",  # a port that is no number
        "postgresql://u:s3cret@127.0.0.1:99999/db",  # out of range
        "postgresql://u:s3/cret@127.0.0.1/db",  # an unencoded '/': "cret@..." is the path
        "postgresql://u:s3cret@127.0.0.1:5432/",  # no database
    ],
)
def test_a_malformed_database_url_is_one_line_without_its_password(url: str) -> None:
    for command in STARTING:
        done = icelog(*command, env={"ICELOG_DATABASE_URL": url, **PG_ENV})
        assert done.returncode == 2, (command, done.stderr)
        [line] = done.stderr.splitlines()
        assert line.startswith("icelog: configuration error: ICELOG_DATABASE_URL"), line
        assert "s3" not in line and "cret" not in line, "never the password, nor a part"


def test_a_redacted_url_keeps_an_ipv6_host_readable() -> None:
    settings = Settings.from_env({"ICELOG_DATABASE_URL": "postgresql://u:s3cret@[::1]:5433/db",
                                  **PG_ENV})  # fmt: skip
    assert settings.database_url_redacted == "postgresql://u:***@[::1]:5433/db"


@pytest.mark.postgres
def test_a_missing_database_is_named() -> None:
    _fails_naming(
        postgres.url_as(postgres.PG_USER, "icelog_no_such_db"),
        "database missing",
        'database "icelog_no_such_db" does not exist',
        commands=(["migrate"],),
    )


@pytest.mark.postgres
def test_an_unknown_role_fails_authentication() -> None:
    _fails_naming(
        postgres.url_as("icelog_no_such_role", "postgres", "s3cret"),
        "authentication failed",
        'role "icelog_no_such_role" does not exist',
        commands=(["serve"],),
    )


@pytest.mark.postgres
def test_too_many_connections_is_named() -> None:
    """A role whose CONNECTION LIMIT is used up (0 here) answers as a full server does."""
    with postgres.temporary_role(connection_limit=0) as role:
        url = postgres.url_as(role, "postgres")
        _fails_naming(url, "too many connections", role, commands=(["events", "tail"],))


def test_a_database_lost_mid_command_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The database goes away while a command runs (the pool gives up): one line, exit 1,
    naming the cause the database gives now, or else what the command met."""
    env = {"ICELOG_DATA_DIR": str(tmp_path), "ICELOG_TASK_WORKERS": "0"}
    Services.build(Settings.from_env(env)).close()  # a catalog to start on
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # main() sets up logging for a process: give this one's back afterwards.
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)

    def lost(*_: object) -> int:
        raise DatabaseUnavailableError("The catalog database is unavailable; retry later")

    monkeypatch.setattr(cli_log, "events_tail", lost)
    assert cli.main(["events", "tail"]) == 1
    said = capsys.readouterr().err
    assert said == (
        f"icelog: The catalog database is unavailable; retry later ({tmp_path / 'catalog.db'})\n"
    )


@pytest.mark.postgres
def test_a_database_lost_mid_command_is_named_by_what_it_says_now() -> None:
    settings = Settings.from_env(
        {"ICELOG_DATABASE_URL": postgres.url_as(postgres.PG_USER, "icelog_gone"), **PG_ENV}
    )
    lost = DatabaseUnavailableError("The catalog database is unavailable; retry later")
    said = cli._unavailable_text(settings, lost)
    assert said.startswith("cannot connect to postgresql://")
    assert 'database missing (database "icelog_gone" does not exist)' in said


def test_a_data_dir_that_is_a_file_or_a_catalog_that_is_not_sqlite(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    for command in (["serve"], ["events", "tail"]):
        done = icelog(*command, env={"ICELOG_DATA_DIR": str(not_a_dir)})
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert done.stderr == f"icelog: ICELOG_DATA_DIR {not_a_dir} is not a directory\n"
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "catalog.db").write_text("not a database at all, not even close to one")
    for command in (["migrate"], ["events", "tail"]):
        done = icelog(*command, env={"ICELOG_DATA_DIR": str(garbage)})
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        assert "catalog's SQLite database: file is not a database" in done.stderr


MALFORMED_HEADS = (
    "12:deadbeef",  # a link cut short
    "12:" + "a" * 63,
    "12:" + "a" * 65,
    "12:" + "g" * 64,  # not hex
    "-1:" + "a" * 64,
    "x:" + "a" * 64,
    "12" + "a" * 64,  # no colon
    f"{2**63}:" + "a" * 64,  # beyond any log position (a BIGINT)
    "99999999999999999999:" + "a" * 64,
    "",
)


def test_a_malformed_expected_head_is_a_usage_error(tmp_path: Path) -> None:
    """`audit verify --expect` with a typo exits 2 with a usage message, says nothing of
    tampering; the same for the offline verifier of exports."""
    env = {"ICELOG_DATA_DIR": str(tmp_path), "ICELOG_TASK_WORKERS": "0"}
    services = Services.build(Settings.from_env(env))
    services.ensure_defaults()  # a few events to chain
    services.close()
    chained = icelog("audit", "chain", env=env)
    held = chained.stdout.strip().rsplit(" ", 1)[1]
    position, link = held.split(":")
    export = tmp_path / "export.jsonl"
    assert icelog("audit", "export-jsonl", "--out", str(export), env=env).returncode == 0
    script = Path(__file__).resolve().parents[2] / "scripts" / "verify_export.py"
    for head in MALFORMED_HEADS:
        done = icelog("audit", "verify", f"--expect={head}", env=env)
        assert done.returncode == 2, (head, done.stdout, done.stderr)
        assert "TAMPERED" not in done.stdout and "usage:" in done.stderr
        assert "is not POSITION:LINK" in done.stderr
        offline = subprocess.run(
            [sys.executable, str(script), str(export), f"--expect={head}"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert offline.returncode == 2 and "is not POSITION:LINK" in offline.stderr, head
    # Well formed: the held head passes (in upper case too); another link is tampering.
    for good in (held, f"{position}:{link.upper()}"):
        assert icelog("audit", "verify", "--expect", good, env=env).returncode == 0
    wrong = icelog("audit", "verify", "--expect", f"{position}:{'0' * 64}", env=env)
    assert wrong.returncode == 1 and "TAMPERED" in wrong.stdout


REPO_ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def port_held() -> Iterator[int]:
    """A port another process listens on, for as long as the block runs."""
    listener = (
        "import socket, time\n"
        "s = socket.socket()\n"
        "s.bind(('127.0.0.1', 0))\n"
        "s.listen()\n"
        "print(s.getsockname()[1], flush=True)\n"
        "time.sleep(600)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", listener], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        yield int(holder.stdout.readline())
    finally:
        holder.kill()
        holder.wait()


def test_serve_refuses_a_port_or_worker_count_it_cannot_honour(tmp_path: Path) -> None:
    """Port 70000 would listen (and be announced) on 4464, the socket layer taking it
    modulo 65536; --workers 0 would run one. Each is a usage error: nothing served."""
    env = {"ICELOG_DATA_DIR": str(tmp_path / "data"), "ICELOG_TASK_WORKERS": "0"}
    for args, said in (
        (["--port", "70000"], "is not a port"),
        (["--port", "-1"], "is not a port"),
        (["--workers", "0"], "is not a number of workers"),
        (["--workers", "-2"], "is not a number of workers"),
    ):
        done = icelog("serve", *args, env=env)
        assert done.returncode == 2 and said in done.stderr, (args, done.stderr)
        assert done.stdout == ""
    by_env = icelog("serve", env={**env, "ICELOG_PORT": "70000"})
    assert by_env.returncode == 2 and "ICELOG_PORT must be <= 65535" in by_env.stderr
    assert not (tmp_path / "data").exists(), "no catalog created"


def test_serve_on_a_busy_port_announces_nothing(tmp_path: Path) -> None:
    """A second server on a port in use: one line saying so, a non-zero exit, no "serving"
    line, no console address, and no catalog created — with one worker or several."""
    with port_held() as port:
        for workers in ("1", "2"):
            done = icelog(
                "serve", "--port", str(port), "--workers", workers,
                env={"ICELOG_DATA_DIR": str(tmp_path / "data")},
            )  # fmt: skip
            assert done.returncode == 1, (done.stdout, done.stderr)
            assert "serving" not in done.stdout + done.stderr and "console" not in done.stdout
            assert done.stdout == ""
            assert done.stderr == (
                f"icelog: cannot listen on 127.0.0.1:{port}: address already in use\n"
            )
    assert not (tmp_path / "data").exists(), "nothing was prepared for a server that never ran"


def test_scripts_serve_on_a_busy_port_announces_nothing(tmp_path: Path) -> None:
    """`./scripts/serve` as a newcomer runs it, on a complete `.venv` (it installs nothing
    then): the same one line and non-zero exit, nothing announced before."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "scripts" / "serve", repo / "scripts" / "serve")
    shutil.copy(REPO_ROOT / "pyproject.toml", repo / "pyproject.toml")
    venv_bin = repo / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    # This interpreter, with icelog from this checkout, as the script's .venv.
    for name, command in (("python", ""), ("icelog", " -m icelog.api")):
        wrapper = venv_bin / name
        wrapper.write_text(f'#!/bin/sh\nexec {sys.executable}{command} "$@"\n')
        wrapper.chmod(0o755)
    digest = hashlib.sha256((repo / "pyproject.toml").read_bytes()).hexdigest()
    (repo / ".venv" / ".icelog-serve-deps").write_text(digest + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "ICELOG_DATA_DIR": str(tmp_path / "d")}
    with port_held() as port:
        done = subprocess.run(
            ["bash", str(repo / "scripts" / "serve"), "--port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert done.stdout == "", "no banner, no console address"
    assert done.stderr == f"icelog: cannot listen on 127.0.0.1:{port}: address already in use\n"


def test_clients_alone_says_where_every_client_is(tmp_path: Path) -> None:
    """`icelog clients` prints the catalog URI and where each client's parts are — what the
    two subcommands print, too — without a catalog or anything else running."""
    env = {"ICELOG_PORT": "8282", "ICELOG_DATA_DIR": str(tmp_path / "none")}
    done = icelog("clients", env=env)
    assert done.returncode == 0, done.stderr
    said = done.stdout
    assert 'Iceberg REST catalog: http://127.0.0.1:8282/catalog (warehouse "default")' in said
    assert 'uri="http://127.0.0.1:8282/catalog", warehouse="default"' in said
    assert "PyIceberg 0.12.0" in said and "pyspark 3.5.9" in said and "DuckDB 1.5.5" in said
    jar = icelog("clients", "spark-jar", env=env).stdout.strip()
    assert f"  {jar}\n" in said
    for statement in icelog("clients", "duckdb-load", env=env).stdout.splitlines():
        assert f"  {statement}" in said
    assert not (tmp_path / "none").exists(), "no catalog needed, none created"


def test_a_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    env = {**os.environ, "ICELOG_DATA_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-m", "icelog.api", "migrate"], env=env, check=True,
                   capture_output=True, timeout=60)  # fmt: skip
    piped = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m icelog.api events tail -n 50 | head -c 1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in piped.stderr and "BrokenPipe" not in piped.stderr, piped.stderr

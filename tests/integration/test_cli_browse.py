"""`icelog namespaces`, `icelog tables` and `icelog history`: the catalog read at a terminal
and as JSON, straight from the database (both backends), and clear errors for what does not
exist (exit 1) or cannot be a name (exit 2)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.integration.conftest import Api, create_table
from tests.integration.test_cli import icelog
from tests.support import postgres
from tests.support.hostile import view_body


def _env(api: Api) -> dict[str, str]:
    settings = api.services.settings
    env = {"ICELOG_DATA_DIR": str(settings.data_dir), "ICELOG_TASK_WORKERS": "0"}
    if settings.database_url:
        env |= {
            "ICELOG_DATABASE_URL": settings.database_url,
            "ICELOG_SECRETS_KEY": postgres.TEST_SECRETS_KEY,
        }
    return env


def _ok(api: Api, *args: str) -> subprocess.CompletedProcess[str]:
    done = icelog(*args, env=_env(api))
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def _json(api: Api, *args: str) -> Any:
    return json.loads(_ok(api, *args, "--json").stdout)


def _a_catalog(api: Api, tmp_path: Path) -> str:
    """sales (orders, refunds (renamed from returns), the view daily), sales.eu (x),
    staging (empty), and a second warehouse `analytics` with a namespace; its id."""
    for ns in (["sales"], ["sales", "eu"], ["staging"]):
        assert api.post("/namespaces", {"namespace": ns}).status_code == 200
    create_table(api, "sales", "orders")
    create_table(api, "sales", "returns")
    create_table(api, "sales%1Feu", "x")
    assert api.post("/namespaces/sales/views", view_body("daily", ["sales"])).status_code == 200
    owner = {"updates": [{"action": "set-properties", "updates": {"owner": "bob"}}]}
    assert api.post("/namespaces/sales/tables/orders", owner).status_code == 200
    rename = {
        "source": {"namespace": ["sales"], "name": "returns"},
        "destination": {"namespace": ["sales"], "name": "refunds"},
    }
    assert api.post("/tables/rename", rename).status_code == 204
    created = api.client.post(
        "/management/v1/warehouse",
        json={
            "warehouse-name": "analytics",
            "storage-profile": {"type": "file", "base-location": (tmp_path / "wh2").as_uri()},
            "delete-profile": {"type": "hard"},
        },
    )
    assert created.status_code in (200, 201), created.text
    other = str(created.json()["warehouse-id"])
    made = api.client.post(f"/catalog/v1/{other}/namespaces", json={"namespace": ["ops"]})
    assert made.status_code == 200
    return other


def test_namespaces_tables_and_history(api: Api, tmp_path: Path) -> None:
    other = _a_catalog(api, tmp_path)

    assert _ok(api, "namespaces").stdout.splitlines() == [
        "sales    2 tables, 1 view, 1 namespace",
        "staging  empty",
    ]
    assert _ok(api, "namespaces", "--recursive").stdout.splitlines() == [
        "sales     2 tables, 1 view, 1 namespace",
        "sales.eu  1 table",
        "staging   empty",
    ]
    inside = _json(api, "namespaces", "sales")
    assert inside["warehouse"] == "default" and inside["parent"] == ["sales"]
    assert inside["namespaces"] == [
        {"namespace": ["sales", "eu"], "tables": 1, "views": 0, "functions": 0, "namespaces": 0}
    ]
    # Another warehouse, by name or by id.
    assert _ok(api, "namespaces", "-w", "analytics").stdout.splitlines() == ["ops  empty"]
    by_id = _json(api, "namespaces", "--warehouse", other)
    assert by_id["warehouse"] == "analytics" and by_id["warehouse-id"] == other

    listed = _ok(api, "tables", "sales").stdout.splitlines()
    assert [line.split()[:2] for line in listed] == [
        ["view", "daily"],
        ["table", "orders"],
        ["table", "refunds"],
    ]
    tables = _json(api, "tables", "sales")
    assert [t["name"] for t in tables["tables"]] == ["orders", "refunds"]
    assert [v["name"] for v in tables["views"]] == ["daily"]
    assert tables["tables"][0]["metadata-location"].endswith(".metadata.json")

    history = _json(api, "history", "sales.orders")
    assert history["kind"] == "table" and history["id"] == tables["tables"][0]["id"]
    events = history["events"]
    assert [e["type"] for e in events] == ["table.created.v1", "table.committed.v1"]
    assert events[0]["position"] < events[1]["position"]
    assert {"sign": "+", "text": "property owner = bob"} in events[1]["changes"]
    assert {"sign": "+", "text": "column id long"} in events[0]["changes"]
    text = _ok(api, "history", "sales.orders").stdout
    assert f"{events[1]['position']:>8}  {events[1]['time']}  table.committed.v1" in text
    assert "          + property owner = bob\n" in text
    renamed = _json(api, "history", "sales.refunds")["events"]
    assert [e["type"] for e in renamed] == ["table.created.v1", "table.renamed.v1"]
    assert {"sign": "~", "text": "renamed to sales.refunds"} in renamed[1]["changes"]
    assert [e["type"] for e in _json(api, "history", "sales.daily")["events"]] == [
        "view.created.v1"
    ]
    last = _json(api, "history", "sales.orders", "--last", "1")["events"]
    assert [e["type"] for e in last] == ["table.committed.v1"]


def test_what_does_not_exist_or_cannot_be_a_name(api: Api, tmp_path: Path) -> None:
    _a_catalog(api, tmp_path)
    env = _env(api)
    for args, status, message in (
        (["namespaces", "-w", "nope"], 1, "no warehouse named 'nope' in the default project"),
        (["tables", "nope"], 1, "no namespace nope in warehouse default"),
        (["namespaces", "sales.nope"], 1, "no namespace sales.nope in warehouse default"),
        (["history", "sales.nope"], 1, "no table or view sales.nope in warehouse default"),
        (["history", "sales.returns"], 1, "no table or view sales.returns"),  # renamed
        (["tables", "-w", "00000000-0000-0000-0000-00000000000f", "sales"], 1, "no warehouse"),
        (["tables", "sales..eu"], 2, "'sales..eu' is not a namespace"),
        (["history", "orders"], 2, "'orders' is not NAMESPACE.NAME"),
        (["tables", "--project", "x", "sales"], 2, "--project must be a project id"),
    ):
        done = icelog(*args, env=env)
        assert done.returncode == status, (args, done.stdout, done.stderr)
        assert done.stderr.startswith(f"icelog: {message}"), (args, done.stderr)
        assert done.stdout == ""
    assert (
        _ok(api, "tables", "staging").stdout
        == "(no tables or views in namespace staging of warehouse default)\n"
    )


@pytest.mark.attack
def test_names_and_values_cannot_drive_the_operators_terminal(api: Api) -> None:
    """A tenant's namespace, table and property value carrying escape sequences (clear the
    screen, set the window title, CSI as one C1 character, a bidi override) are printed
    escaped; --json keeps them exact."""
    evil_ns, evil_table, evil_value = "ns\x1b[2J", "t\x1b]0;pwn\x07", "v\x9b31m\u202e"
    assert api.post("/namespaces", {"namespace": [evil_ns]}).status_code == 200
    create_table(api, quote(evil_ns, safe=""), evil_table)
    change = {"updates": [{"action": "set-properties", "updates": {"owner": evil_value}}]}
    path = f"/namespaces/{quote(evil_ns, safe='')}/tables/{quote(evil_table, safe='')}"
    assert api.post(path, change).status_code == 200

    printed = "".join(
        _ok(api, *args).stdout
        for args in (["namespaces"], ["tables", evil_ns], ["history", f"{evil_ns}.{evil_table}"])
    )
    assert not any(c in printed for c in "\x1b\x07\x9b\u202e"), printed
    assert "ns\\x1b[2J" in printed and "t\\x1b]0;pwn\\x07" in printed
    assert "v\\x9b31m\\u202e" in printed
    missing = icelog("history", f"{evil_ns}.{evil_table}x", env=_env(api))
    assert missing.returncode == 1 and "\x1b" not in missing.stderr, missing.stderr
    assert _json(api, "namespaces")["namespaces"][0]["namespace"] == [evil_ns]

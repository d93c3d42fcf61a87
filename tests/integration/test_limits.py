"""Limits: request bodies over ICELOG_MAX_REQUEST_BODY_MB are refused with 413 before anything
is stored; requests past ICELOG_REQUEST_TIMEOUT_SECONDS are answered 504 (writes: the state is
unknown, and a commit still lands whole) or 503 (reads)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.api.settings import Settings, SettingsError
from tests.integration.conftest import SCHEMA, Api
from tests.integration.test_observability import requests_total, sample
from tests.support.hostile import services_on
from tests.support.in_process import default_prefix, with_table_t
from tests.support.server import free_port

MIB = 1024 * 1024
TABLES = "/catalog/v1/{prefix}/namespaces/{namespace}/tables"


def assert_iceberg_error(response: Any, status: int, error_type: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status and error["type"] == error_type
    assert isinstance(error["message"], str) and error["message"]


def test_a_body_over_the_default_limit_is_refused_and_nothing_is_stored(api: Api) -> None:
    assert api.services.settings.max_request_body_bytes == 32 * MIB
    api.post("/namespaces", {"namespace": ["big"]})
    before = api.position()
    body = {"name": "huge", "schema": SCHEMA, "properties": {"pad": "x" * (33 * MIB)}}
    key = "0190f8b4-7c1e-7b6a-9c3e-2f1d4a5b6c7d"
    response = api.post("/namespaces/big/tables", body, headers={"Idempotency-Key": key})
    assert_iceberg_error(response, 413, "PayloadTooLargeException")
    assert "limit" in response.json()["error"]["message"]
    assert api.position() == before  # no event, not even an idempotency record
    assert api.get("/namespaces/big/tables/huge").status_code == 404
    # The key was not spent on the refusal: the same key with a proper body runs.
    small = {"name": "huge", "schema": SCHEMA}
    assert api.post("/namespaces/big/tables", small, headers={"Idempotency-Key": key}).is_success
    text = api.client.get("/metrics").text
    assert requests_total(text, "POST", TABLES, 413) == 1


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def limited(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Services]:
    """Services whose app allows 1 MiB bodies and answers within 0.5 s."""
    yield from services_on(
        request.param, tmp_path, max_request_body_bytes=MIB, request_timeout_seconds=0.5
    )


_prefix = default_prefix


def test_the_limit_is_a_setting_and_counts_streamed_bodies(limited: Services) -> None:
    app = create_app(limited.settings, limited)
    with TestClient(app, raise_server_exceptions=False) as client:
        base = f"/catalog/v1/{_prefix(client)}/namespaces"
        assert client.post(base, json={"namespace": ["lim"]}).status_code == 200
        head = limited.catalog.app.recorder.max_notification_id()
        pad = {"name": "t", "schema": SCHEMA, "properties": {"pad": "x" * (MIB + 10)}}
        over = client.post(f"{base}/lim/tables", json=pad)
        assert_iceberg_error(over, 413, "PayloadTooLargeException")

        # No Content-Length (chunked): the bytes are counted as they arrive.
        def chunks() -> Iterator[bytes]:
            yield b'{"name": "t", "schema": {"type": "struct", "fields": []}, "properties": {"p": "'
            for _ in range(20):
                yield b"y" * 64 * 1024
            yield b'"}}'

        streamed = client.post(
            f"{base}/lim/tables", content=chunks(), headers={"content-type": "application/json"}
        )
        assert_iceberg_error(streamed, 413, "PayloadTooLargeException")
        assert limited.catalog.app.recorder.max_notification_id() == head
        under = {"name": "t", "schema": SCHEMA, "properties": {"pad": "x" * (MIB - 4096)}}
        assert client.post(f"{base}/lim/tables", json=under).status_code == 200


@contextmanager
def serving(services: Services) -> Iterator[httpx.Client]:
    """The app under a real uvicorn (the test client would wait for the handler to end)."""
    port = free_port()
    config = uvicorn.Config(
        create_app(services.settings, services),
        host="127.0.0.1",
        port=port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=10,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(30)


def test_a_slow_commit_is_answered_504_and_still_lands(
    limited: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(limited) as client:
        catalog_path, _ = with_table_t(client, "slow")
        base = f"{catalog_path}/namespaces"
        catalog = limited.catalog
        save_all = catalog.app.save_all

        def stuck_save(*aggregates: Any, **kwargs: Any) -> int:
            time.sleep(1.5)  # e.g. waiting for a lock another transaction holds
            return save_all(*aggregates, **kwargs)

        monkeypatch.setattr(catalog.app, "save_all", stuck_save)
        commit = {"updates": [{"action": "set-properties", "updates": {"late": "yes"}}]}
        started = time.monotonic()
        response = client.post(f"{base}/slow/tables/t", json=commit, headers={"X-Request-ID": "s1"})
        answered_after = time.monotonic() - started
        assert_iceberg_error(response, 504, "CommitStateUnknownException")
        assert response.headers["x-request-id"] == "s1"
        assert 0.45 <= answered_after < 1.4  # answered at the timeout, not when the save ended
        monkeypatch.setattr(catalog.app, "save_all", save_all)
        # The handler ran on: the commit is applied whole (the client reloads to learn it).
        deadline = time.monotonic() + 10
        properties: dict[str, str] = {}
        slow_polls = 0
        while time.monotonic() < deadline and properties.get("late") != "yes":
            time.sleep(0.1)
            loaded = client.get(f"{base}/slow/tables/t")
            if loaded.status_code != 200:
                # This server answers at 0.5 s; on a busy machine a poll may take longer.
                assert loaded.status_code == 503, loaded.text
                slow_polls += 1
                continue
            properties = loaded.json()["metadata"]["properties"]
        assert properties.get("late") == "yes"
        text = client.get("/metrics").text
        assert sample(text, "icelog_http_request_timeouts_total") == 1 + slow_polls
        route = "/catalog/v1/{prefix}/namespaces/{namespace}/tables/{table}"
        assert requests_total(text, "POST", route, 504) == 1
        assert requests_total(text, "POST", route, 200) == 0  # the late 200 was never sent


def test_a_slow_read_is_answered_503(limited: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    queries = limited.queries
    with serving(limited) as client:
        base = f"/catalog/v1/{_prefix(client)}/namespaces"
        list_namespaces = queries.list_namespaces

        def slow(*args: Any, **kwargs: Any) -> Any:
            time.sleep(1.5)
            return list_namespaces(*args, **kwargs)

        monkeypatch.setattr(queries, "list_namespaces", slow)
        started = time.monotonic()
        response = client.get(base)
        assert_iceberg_error(response, 503, "ServiceUnavailableException")
        assert time.monotonic() - started < 1.4
        # The server goes on serving (the slow handler finishes in its thread).
        assert client.get("/health").status_code == 200
        monkeypatch.setattr(queries, "list_namespaces", list_namespaces)
        assert client.get(base).status_code == 200


def test_limit_settings_from_the_environment(tmp_path: Path) -> None:
    base = {"ICELOG_DATA_DIR": str(tmp_path)}
    default = Settings.from_env(base)
    assert default.max_request_body_bytes == 32 * MIB
    assert default.request_timeout_seconds == 30.0
    assert default.log_format == "text"
    tuned = Settings.from_env(
        base
        | {
            "ICELOG_MAX_REQUEST_BODY_MB": "8",
            "ICELOG_REQUEST_TIMEOUT_SECONDS": "2.5",
            "ICELOG_LOG_FORMAT": "JSON",
        }
    )
    assert tuned.max_request_body_bytes == 8 * MIB
    assert tuned.request_timeout_seconds == 2.5
    assert tuned.log_format == "json"
    assert (
        Settings.from_env(base | {"ICELOG_REQUEST_TIMEOUT_SECONDS": "0"}).request_timeout_seconds
        == 0
    )
    for name, value in (
        ("ICELOG_MAX_REQUEST_BODY_MB", "0"),
        ("ICELOG_MAX_REQUEST_BODY_MB", "lots"),
        ("ICELOG_REQUEST_TIMEOUT_SECONDS", "-1"),
        ("ICELOG_LOG_FORMAT", "xml"),
    ):
        with pytest.raises(SettingsError, match=name):
            Settings.from_env(base | {name: value})

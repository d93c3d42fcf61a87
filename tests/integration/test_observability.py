"""Observability: /metrics by route template, conflicts, appends, lag and pools; /ready;
request ids in responses, events and logs; JSON logs without secrets."""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from icelog.api.logs import configure_logging
from icelog.api.metrics import Metrics
from icelog.api.observability import ObservabilityMiddleware
from icelog.domain.project import Project
from icelog.projections.audit_chain import AuditChain
from tests.integration.conftest import Api, create_table
from tests.support.commands import stale_project

LOAD_TABLE = "/catalog/v1/{prefix}/namespaces/{namespace}/tables/{table}"
COMMIT_TABLE = LOAD_TABLE


def scrape(api: Api) -> str:
    response = api.client.get("/metrics")
    assert response.status_code == 200
    return str(response.text)


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample (0 when the series does not exist yet)."""
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                return float(found.value)
    return 0.0


def requests_total(text: str, method: str, route: str, status: int) -> float:
    return sample(
        text, "icelog_http_requests_total", method=method, route=route, status=str(status)
    )


def test_requests_are_counted_by_route_template_and_status(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["obs_db"]})
    create_table(api, "obs_db", "obs_table")
    before = scrape(api)
    for _ in range(25):
        assert api.get("/namespaces/obs_db/tables/obs_table").status_code == 200
    for _ in range(3):
        assert api.get("/namespaces/obs_db/tables/missing_table").status_code == 404
    after = scrape(api)

    grew = requests_total(after, "GET", LOAD_TABLE, 200) - requests_total(
        before, "GET", LOAD_TABLE, 200
    )
    assert grew == 25
    assert (
        requests_total(after, "GET", LOAD_TABLE, 404)
        - requests_total(before, "GET", LOAD_TABLE, 404)
        == 3
    )
    histogram = "icelog_http_request_duration_seconds_count"
    labels = {"method": "GET", "route": LOAD_TABLE, "status": "200"}
    assert sample(after, histogram, **labels) - sample(before, histogram, **labels) == 25
    # Bounded labels: templates only, never the names or ids of a raw path.
    for raw in ("obs_db", "obs_table", "missing_table", api.prefix):
        assert raw not in after


def test_unknown_paths_and_methods_share_bounded_labels(api: Api) -> None:
    noise = [f"/nowhere/{uuid4().hex}" for _ in range(3)]
    for path in noise:
        assert api.client.get(path).status_code == 404
    api.client.request("BREW", f"/coffee/{uuid4().hex}")
    text = scrape(api)
    assert requests_total(text, "GET", "unmatched", 404) >= 3
    assert sample(text, "icelog_http_requests_total", method="other", route="unmatched") >= 1
    assert "BREW" not in text
    for path in noise:
        assert path not in text


def test_a_409_commit_failure_counts_as_a_rejected_conflict(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["obs_db"]})
    create_table(api, "obs_db", "t")
    before = scrape(api)
    stale = {
        "requirements": [{"type": "assert-table-uuid", "uuid": str(uuid4())}],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    }
    response = api.post("/namespaces/obs_db/tables/t", stale)
    assert response.status_code == 409
    assert response.json()["error"]["type"] == "CommitFailedException"
    # A 409 that is no commit conflict (the namespace exists) does not count.
    assert api.post("/namespaces", {"namespace": ["obs_db"]}).status_code == 409
    after = scrape(api)
    rejected = "icelog_commit_conflicts_total"
    assert (
        sample(after, rejected, outcome="rejected") - sample(before, rejected, outcome="rejected")
        == 1
    )
    assert requests_total(after, "POST", COMMIT_TABLE, 409) == 1


def test_a_server_side_retry_counts_as_a_retried_conflict(api: Api) -> None:
    """A save on a stale aggregate loses to the writer before it; `retrying` reloads and
    lands the second attempt. The hook counts the lost attempt."""
    app = api.services.catalog.app
    pid, stale = stale_project(app, "first")
    attempts: list[int] = []

    def attempt() -> None:
        project: Project = stale if not attempts else app.repository.get(pid)
        attempts.append(project.version)
        project.rename(f"second-{len(attempts)}", actor="t", request_id="r")
        app.save_all(project)

    before = sample(scrape(api), "icelog_commit_conflicts_total", outcome="retried")
    app.retrying(attempt)
    after = sample(scrape(api), "icelog_commit_conflicts_total", outcome="retried")
    assert len(attempts) == 2 and after - before == 1
    assert app.repository.get(pid).name == "second-2"


def test_concurrent_writers_on_one_namespace_show_retries(api: Api) -> None:
    """Writers racing on one aggregate: the losers are retried server-side and counted.
    (Table commits queue per table within a process, so their races happen only between
    replicas; namespace property updates still race here.)"""
    api.post("/namespaces", {"namespace": ["hot"]})
    statuses: list[int] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        for j in range(10):
            body = {"updates": {f"w{i}-{j}": "v"}}
            status = api.post("/namespaces/hot/properties", body).status_code
            with lock:
                statuses.append(status)

    retried = 0.0
    for _ in range(3):  # conflicts need overlap; one burst of 8 writers nearly always has it
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        retried = sample(scrape(api), "icelog_commit_conflicts_total", outcome="retried")
        if retried:
            break
    assert set(statuses) == {200}
    assert retried > 0
    properties = api.get("/namespaces/hot").json()["properties"]
    assert {k for k in properties if k.startswith("w")} == {
        f"w{i}-{j}" for i in range(8) for j in range(10)
    }


def test_appends_are_timed(api: Api) -> None:
    before = scrape(api)
    for n in range(3):
        assert api.post("/namespaces", {"namespace": [f"timed{n}"]}).status_code == 200
    after = scrape(api)
    count = "icelog_event_store_append_duration_seconds_count"
    total = "icelog_event_store_append_duration_seconds_sum"
    assert sample(after, count) - sample(before, count) >= 3
    assert sample(after, total) > sample(before, total)
    batches = "icelog_event_store_append_batch_commands_sum"
    assert sample(after, batches) - sample(before, batches) >= 3


def test_projection_lag_follows_the_log(api: Api) -> None:
    for n in range(3):
        api.post("/namespaces", {"namespace": [f"lag{n}"]})
    text = scrape(api)
    head = sample(text, "icelog_log_head_position")
    assert head == api.position() > 0
    # The audit chainer does not run in tests: the chain is behind by what it has not chained.
    chained = AuditChain(api.services.catalog.app.recorder).head()[0]
    lag = "icelog_projection_lag_events"
    assert sample(text, lag, projection="audit_chain") == head - chained > 0
    AuditChain(api.services.catalog.app.recorder).extend()
    # Reading the event log catches the event index up.
    assert api.client.get("/management/v1/events").status_code == 200
    text = scrape(api)
    assert sample(text, lag, projection="audit_chain") == 0
    assert sample(text, lag, projection="event_index") == 0
    assert sample(text, "icelog_projection_position", projection="event_index") == head
    assert sample(text, "icelog_database_up") == 1


def test_pool_usage_is_reported_on_postgres(api: Api) -> None:
    text = scrape(api)
    settings = api.services.settings
    if settings.backend == "sqlite":
        assert "icelog_db_pool_connections" not in text  # no pool to report
        return
    assert sample(text, "icelog_db_pool_connections_max", pool="events") == (
        settings.pg_pool_size + settings.pg_max_overflow
    )
    size = sample(text, "icelog_db_pool_connections", pool="events")
    idle = sample(text, "icelog_db_pool_connections_idle", pool="events")
    assert size >= 1 and 0 <= idle <= size
    assert sample(text, "icelog_db_pool_requests_total", pool="events") > 0


def test_ready_answers_only_when_the_database_does(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert api.client.get("/health").json() == {"status": "ok"}
    ready = api.client.get("/ready")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    readiness = api.client.app.state.readiness  # type: ignore[attr-defined]

    def down() -> int:
        raise ConnectionError("connection refused by 10.0.0.1 (password=hunter2)")

    monkeypatch.setattr(readiness.log, "head", down)
    response = api.client.get("/ready")
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["type"] == "ServiceUnavailableException" and error["code"] == 503
    assert "hunter2" not in response.text  # only the exception's class is named

    def hangs() -> int:
        time.sleep(1.5)
        return 0

    monkeypatch.setattr(readiness.log, "head", hangs)
    monkeypatch.setattr(readiness, "timeout_s", 0.2)
    started = time.monotonic()
    response = api.client.get("/ready")
    assert response.status_code == 503 and time.monotonic() - started < 1.4
    assert "did not answer within" in response.json()["error"]["message"]
    assert api.client.get("/health").status_code == 200  # liveness does not ask the database


def _events(api: Api, kind: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = api.client.get(
        "/management/v1/events", params={"type": kind, "limit": 1000}
    ).json()["events"]
    return found


def test_request_ids_are_echoed_and_recorded_with_the_events(api: Api) -> None:
    given = api.post("/namespaces", {"namespace": ["rid_given"]}, headers={"X-Request-ID": "abc-1"})
    assert given.headers["x-request-id"] == "abc-1"
    generated = api.post("/namespaces", {"namespace": ["rid_generated"]})
    generated_id = generated.headers["x-request-id"]
    assert generated_id and generated_id != "abc-1"
    # Unusable ids (spaces, control characters, too long) are replaced, not echoed.
    for bad in ("has space", "x" * 129):
        answered = api.client.get("/health", headers={"X-Request-ID": bad})
        assert answered.headers["x-request-id"] not in (bad, "")
    by_namespace = {
        e["namespace"]: e["request-id"] for e in _events(api, "io.icelog.namespace.created")
    }
    assert by_namespace["rid_given"] == "abc-1"
    assert by_namespace["rid_generated"] == generated_id
    assert len({api.client.get("/health").headers["x-request-id"] for _ in range(5)}) == 5


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    try:
        yield stream
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_json_logs_carry_request_ids_and_no_secrets(
    api: Api, log_stream: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure_logging("json", "info", log_stream)
    api.post("/namespaces", {"namespace": ["logs"]})
    create_table(api, "logs", "t")
    secret_headers = {"Authorization": "Bearer SECRET-TOKEN-1", "X-Request-ID": "req-json-1"}
    response = api.client.get(
        api.url("/namespaces/logs/tables/t"),
        params={"snapshots": "all", "token": "SECRET-QUERY-2"},
        headers=secret_headers,
    )
    assert response.status_code == 200
    commit = {
        "updates": [{"action": "set-properties", "updates": {"s3.secret-access-key": "SECRET-3"}}]
    }
    # (Refused: storage secrets never go into properties. Neither may they reach the log.)
    refused = api.post("/namespaces/logs/tables/t", commit, headers={"X-Request-ID": "req-json-2"})
    assert refused.status_code == 400

    def boom(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("internal detail")

    monkeypatch.setattr(api.services.catalog.namespaces, "create_namespace", boom)
    failed = api.post("/namespaces", {"namespace": ["x"]}, headers={"X-Request-ID": "req-json-3"})
    assert failed.status_code == 500 and failed.headers["x-request-id"] == "req-json-3"
    assert failed.json()["error"]["code"] == 500

    # Every line is one JSON object; the test client's own lines (httpx) are not the server's.
    lines = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    lines = [line for line in lines if not line["logger"].startswith(("httpx", "httpcore"))]
    server_text = json.dumps(lines)
    for secret in ("SECRET-TOKEN-1", "SECRET-QUERY-2", "SECRET-3", "Bearer"):
        assert secret not in server_text
    for line in lines:
        assert {"time", "level", "logger", "message"} <= set(line)
    access = {line["request_id"]: line for line in lines if line["logger"] == "icelog.access"}
    load = access["req-json-1"]
    assert load["method"] == "GET" and load["route"] == LOAD_TABLE and load["status"] == 200
    assert load["path"] == api.url("/namespaces/logs/tables/t")  # never the query string
    assert isinstance(load["duration_ms"], float) and load["duration_ms"] >= 0
    assert access["req-json-2"]["status"] == 400 and access["req-json-3"]["status"] == 500
    # A record made while serving a request names it, with its traceback.
    error = next(line for line in lines if line["level"] == "ERROR")
    assert error["request_id"] == "req-json-3" and "RuntimeError" in error["exception"]


def test_text_logs_name_the_request(api: Api, log_stream: io.StringIO) -> None:
    configure_logging("text", "info", log_stream)
    api.client.get("/health", headers={"X-Request-ID": "req-text-1"})
    line = next(x for x in log_stream.getvalue().splitlines() if "icelog.access" in x)
    assert "GET /health 200" in line and line.endswith("[request_id=req-text-1]")


def test_access_lines_follow_the_log_level(log_stream: io.StringIO) -> None:
    """ICELOG_LOG_LEVEL=warning (create_app passes access_log=False) silences access lines
    even where the logging set-up lets INFO through."""
    configure_logging("json", "info", log_stream)
    for enabled in (False, True):
        app = Starlette(routes=[Route("/x", lambda _r: PlainTextResponse("ok"))])
        app.add_middleware(
            ObservabilityMiddleware,
            metrics=Metrics(),
            max_body_bytes=1024,
            timeout_s=0,
            access_log=enabled,
        )
        with TestClient(app) as client:
            client.get("/x", headers={"X-Request-ID": f"level-{enabled}"})
    text = log_stream.getvalue()
    assert "level-True" in text and "level-False" not in text

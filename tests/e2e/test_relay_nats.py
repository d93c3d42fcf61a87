"""The change-event relay against a real NATS JetStream server (a private one per test, so
that it can be stopped and restarted)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest

from tests.support.clients import wait_until
from tests.support.commands import ONE_COLUMN
from tests.support.fixtures import ServerFactory
from tests.support.nats_server import NatsServer, nats_broker
from tests.support.server import ICELOG_BIN, CatalogServer, start_icelog

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SCHEMA = ONE_COLUMN


broker = nats_broker


def relay_env(broker: NatsServer) -> dict[str, str]:
    token = secrets.token_hex(3)
    return {
        "ICELOG_NATS_URL": broker.url,
        "ICELOG_NATS_STREAM": f"EVENTS_{token}",
        "ICELOG_NATS_SUBJECT_PREFIX": f"cat{token}",
        "ICELOG_PUBLISH_LEASE_SECONDS": "2",
        "ICELOG_TASK_WORKERS": "0",
    }


def start_relay(server: CatalogServer, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return start_icelog(server, ["publish", "nats"], env, log)


def metric(server: CatalogServer, name: str, sink: str | None = None) -> float:
    text = httpx.get(f"{server.base}/metrics").text
    label = f'{{sink="{sink}"}}' if sink else ""
    found = re.search(rf"^{name}{re.escape(label)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else float("nan")


def head(server: CatalogServer) -> int:
    return int(metric(server, "icelog_log_head_position"))


def caught_up(server: CatalogServer, env: dict[str, str]) -> bool:
    sink = f"nats:{env['ICELOG_NATS_STREAM']}"
    return metric(server, "icelog_publisher_position", sink) == head(server)


class Writer:
    """Creates tables and commits to them over REST, as fast as one thread can."""

    def __init__(self, server: CatalogServer, tables: int) -> None:
        self.base = f"{server.uri}/v1"
        self.http = httpx.Client(timeout=30)
        self.ns = f"ns_{secrets.token_hex(3)}"
        assert self.http.post(f"{self.base}/namespaces", json={"namespace": [self.ns]}).is_success
        self.tables = [f"t{i}" for i in range(tables)]
        for table in self.tables:
            created = self.http.post(
                f"{self.base}/namespaces/{self.ns}/tables", json={"name": table, "schema": SCHEMA}
            )
            assert created.status_code == 200, created.text
        self.commits = 0

    def commit_round(self, n: int) -> None:
        for table in self.tables:
            response = self.http.post(
                f"{self.base}/namespaces/{self.ns}/tables/{table}",
                json={"updates": [{"action": "set-properties", "updates": {"n": str(n)}}]},
            )
            assert response.status_code == 200, response.text
            self.commits += 1


def thousand_commits(
    server: CatalogServer, relayed: Callable[[], bool], timeout: float
) -> tuple[Writer, int]:
    """A hundred rounds of commits to ten tables; once `relayed` (within `timeout` s), the
    writer and the log's head."""
    writer = Writer(server, tables=10)
    for n in range(100):
        writer.commit_round(n)
    assert writer.commits == 1000
    assert wait_until(relayed, timeout=timeout), server.log()[-3000:]
    return writer, head(server)


async def _consume(url: str, stream: str, prefix: str, expected: int, timeout: float) -> list[Any]:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        sub = await js.pull_subscribe(f"{prefix}.>", stream=stream)
        found: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(found) < expected and time.monotonic() < deadline:
            try:
                batch = await sub.fetch(500, timeout=1)
            except TimeoutError:  # nats raises its own subclass or asyncio's
                continue
            for msg in batch:
                found.append((msg.metadata.sequence.stream, json.loads(msg.data)))
                await msg.ack()
        return found
    finally:
        await nc.close()


def consume(broker: NatsServer, env: dict[str, str], expected: int) -> list[dict[str, Any]]:
    """Every message of the stream, in stream order (one JetStream message each)."""
    found = asyncio.run(
        _consume(
            broker.url, env["ICELOG_NATS_STREAM"], env["ICELOG_NATS_SUBJECT_PREFIX"], expected, 60
        )
    )
    return [event for _, event in found]


def assert_complete_and_ordered(events: list[dict[str, Any]], head_position: int) -> None:
    """Every log position exactly once (after de-duplication by id), each aggregate's
    versions in order, ids matching the (aggregate, version) they describe."""
    first: dict[str, dict[str, Any]] = {}
    for event in events:
        first.setdefault(event["id"], event)
    positions = sorted(int(e["sequence"]) for e in first.values())
    assert positions == list(range(1, head_position + 1)), "no gaps, nothing extra"
    versions: dict[str, list[int]] = defaultdict(list)
    for event in first.values():
        versions[event["aggregateid"]].append(int(event["version"]))
    for aggregate, seen in versions.items():
        assert seen == sorted(seen), f"{aggregate} out of order: {seen}"
        assert seen == list(range(seen[0], seen[0] + len(seen))), f"{aggregate} has gaps"


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_thousand_commits_arrive_once_each_in_per_table_order(
    store: str, broker: NatsServer, catalog_server_factory: ServerFactory
) -> None:
    env = {**relay_env(broker), "ICELOG_PUBLISH": "nats"}  # the relay runs inside serve
    server = catalog_server_factory(store, env)
    try:
        writer, total = thousand_commits(server, lambda: caught_up(server, env), timeout=60)
        events = consume(broker, env, total)
        assert len(events) == total, "JetStream holds each event once"
        assert_complete_and_ordered(events, total)
        commits = [e for e in events if e["type"] == "io.icelog.table.committed.v1"]
        assert len(commits) == 1000
        per_table: dict[str, list[str]] = defaultdict(list)
        for event in commits:
            assert event["namespace"] == writer.ns and event["subject"].startswith(writer.ns)
            per_table[event["name"]].append(event["data"]["updates"][0]["updates"]["n"])
        assert all(seen == [str(n) for n in range(100)] for seen in per_table.values())
        sink = f"nats:{env['ICELOG_NATS_STREAM']}"
        assert metric(server, "icelog_publisher_lag_events", sink) == 0
        assert metric(server, "icelog_publisher_lag_seconds", sink) == 0
    finally:
        server.stop()


@pytest.mark.postgres
def test_nats_down_for_ten_seconds_during_a_burst_loses_nothing(
    broker: NatsServer, catalog_server_factory: ServerFactory
) -> None:
    env = {**relay_env(broker), "ICELOG_PUBLISH": "nats"}
    server = catalog_server_factory("postgres", env)
    try:
        writer = Writer(server, tables=5)
        stop_writing = threading.Event()

        def burst() -> None:
            n = 0
            while not stop_writing.is_set():
                writer.commit_round(n)
                n += 1

        thread = threading.Thread(target=burst)
        thread.start()
        time.sleep(2)
        broker.stop()
        time.sleep(10)
        sink = f"nats:{env['ICELOG_NATS_STREAM']}"
        assert metric(server, "icelog_publisher_lag_events", sink) > 0, "writes went on"
        broker.start()
        time.sleep(2)
        stop_writing.set()
        thread.join()
        assert wait_until(lambda: caught_up(server, env), timeout=60), server.log()[-3000:]
        total = head(server)
        events = consume(broker, env, total)
        assert_complete_and_ordered(events, total)
        assert writer.commits > 100
    finally:
        server.stop()


def postgres_for_relays(
    broker: NatsServer, factory: ServerFactory
) -> tuple[dict[str, str], CatalogServer]:
    """A server on PostgreSQL whose log relays started with the environment it returns
    publish to `broker` (serve itself publishes nothing)."""
    env = relay_env(broker)
    return env, factory("postgres", env)


@pytest.mark.postgres
def test_relay_killed_mid_burst_resumes_without_gaps(
    broker: NatsServer, catalog_server_factory: ServerFactory, tmp_path: Path
) -> None:
    env, server = postgres_for_relays(broker, catalog_server_factory)
    try:
        writer = Writer(server, tables=5)
        first = start_relay(server, env, tmp_path / "relay1.log")
        try:
            for n in range(60):
                writer.commit_round(n)
                if n == 30:
                    first.send_signal(signal.SIGKILL)
        finally:
            first.kill()
            first.wait()
        assert not caught_up(server, env)
        second = start_relay(server, env, tmp_path / "relay2.log")
        try:
            assert wait_until(lambda: caught_up(server, env), timeout=60)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=30)
        total = head(server)
        events = consume(broker, env, total)
        assert len(events) == total, "re-sent events were de-duplicated by JetStream"
        assert_complete_and_ordered(events, total)
    finally:
        server.stop()


@pytest.mark.postgres
def test_two_relays_for_one_sink_take_turns(
    broker: NatsServer, catalog_server_factory: ServerFactory, tmp_path: Path
) -> None:
    env, server = postgres_for_relays(broker, catalog_server_factory)
    relays = [start_relay(server, env, tmp_path / f"relay{n}.log") for n in range(2)]
    try:
        writer = Writer(server, tables=4)
        for n in range(25):
            writer.commit_round(n)
        assert wait_until(lambda: caught_up(server, env), timeout=60), "\n".join(
            (tmp_path / f"relay{n}.log").read_text()[-2000:] for n in range(2)
        )
        # The active relay dies; the standby takes over after the lease (2 s).
        logs = [(tmp_path / f"relay{n}.log").read_text() for n in range(2)]
        active = next(n for n, text in enumerate(logs) if "publishing from position" in text)
        relays[active].send_signal(signal.SIGKILL)
        relays[active].wait()
        for n in range(25, 50):
            writer.commit_round(n)
        assert wait_until(lambda: caught_up(server, env), timeout=60), "\n".join(
            (tmp_path / f"relay{n}.log").read_text()[-2000:] for n in range(2)
        )
        total = head(server)
        events = consume(broker, env, total)
        sequences = [int(e["sequence"]) for e in events]
        assert sequences == list(range(1, total + 1)), "one publisher at a time: no interleaving"
    finally:
        for relay in relays:
            if relay.poll() is None:
                relay.send_signal(signal.SIGTERM)
                relay.wait(timeout=30)
        server.stop()


def test_bad_publish_settings_fail_at_start(tmp_path: Path) -> None:
    def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        child = {**os.environ, "ICELOG_DATA_DIR": str(tmp_path), **env}
        child.pop("ICELOG_DATABASE_URL", None)
        return subprocess.run(
            [str(ICELOG_BIN), *args],
            check=False,
            env=child,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert run({}, "migrate").returncode == 0  # a catalog to publish from
    no_kafka = run({}, "publish", "kafka")
    assert no_kafka.returncode == 2 and "KAFKA_BOOTSTRAP_SERVERS" in no_kafka.stderr
    wildcard = run({"ICELOG_NATS_SUBJECT_PREFIX": "a.>"}, "publish", "nats")
    assert wildcard.returncode == 2 and "NATS_SUBJECT_PREFIX" in wildcard.stderr
    unknown = run({"ICELOG_PUBLISH": "rabbit"}, "serve")
    assert unknown.returncode == 2 and "unknown sink" in unknown.stderr
    config = run({"ICELOG_KAFKA_CONFIG": "[1]"}, "publish", "nats")
    assert config.returncode == 2 and "KAFKA_CONFIG" in config.stderr
    unreachable = run({"ICELOG_NATS_URL": "nats://127.0.0.1:1"}, "publish", "nats")
    assert unreachable.returncode == 2 and "cannot connect to NATS" in unreachable.stderr

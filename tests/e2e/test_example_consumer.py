"""examples/nats_consumer.py against a real catalog server publishing to a private NATS JetStream:
it prints a table's changes, in order, once each — and a durable consumer resumes after them."""

from __future__ import annotations

import asyncio
import re
import secrets
import subprocess
import sys
import time
from typing import Any

import httpx
import nats
import pytest

from tests.support.commands import ONE_COLUMN
from tests.support.fixtures import ServerFactory
from tests.support.nats_server import NatsServer, nats_broker
from tests.support.server import REPO_ROOT, CatalogServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

EXAMPLE = REPO_ROOT / "examples" / "nats_consumer.py"
SCHEMA = ONE_COLUMN


broker = nats_broker


def metric(server: CatalogServer, name: str, sink: str | None = None) -> float | None:
    text = httpx.get(f"{server.base}/metrics", timeout=10).text
    label = re.escape(f'{{sink="{sink}"}}') if sink else ""
    found = re.search(rf"^{name}{label} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def wait_published(server: CatalogServer, stream: str, timeout: float = 30) -> None:
    """Until the relay inside the server has published the whole log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        head = metric(server, "icelog_log_head_position")
        if head and metric(server, "icelog_publisher_position", f"nats:{stream}") == head:
            return
        time.sleep(0.2)
    raise AssertionError(f"the relay did not catch up in {timeout} s:\n{server.log()[-3000:]}")


def run_example(broker: NatsServer, env: dict[str, str], durable: str) -> list[str]:
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--once",
            "--idle",
            "3",
            "--url",
            broker.url,
            "--stream",
            env["ICELOG_NATS_STREAM"],
            "--prefix",
            env["ICELOG_NATS_SUBJECT_PREFIX"],
            "--durable",
            durable,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


async def _republish_last(url: str, stream: str, subject: str) -> None:
    """Store the last message of `subject` once more under a new Nats-Msg-Id: what a consumer
    sees when a relay re-sends after JetStream's duplicate window."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        last = await js.get_last_msg(stream, subject)
        assert last.data is not None
        await js.publish(subject, last.data, headers={"Nats-Msg-Id": secrets.token_hex(8)})
    finally:
        await nc.close()


def test_example_consumer_prints_table_changes_in_order_once(
    broker: NatsServer, catalog_server_factory: ServerFactory
) -> None:
    token = secrets.token_hex(3)
    env = {
        "ICELOG_PUBLISH": "nats",
        "ICELOG_NATS_URL": broker.url,
        "ICELOG_NATS_STREAM": f"EXAMPLE_{token}",
        "ICELOG_NATS_SUBJECT_PREFIX": f"ex{token}",
        "ICELOG_TASK_WORKERS": "0",
    }
    server = catalog_server_factory("sqlite", env)
    try:
        base = f"{server.uri}/v1"
        http = httpx.Client(timeout=30)
        ns = f"ns_{token}"

        def ok(response: httpx.Response) -> Any:
            assert response.is_success, response.text
            return response.json() if response.content else None

        ok(http.post(f"{base}/namespaces", json={"namespace": [ns]}))
        created = ok(
            http.post(f"{base}/namespaces/{ns}/tables", json={"name": "t", "schema": SCHEMA})
        )
        locations = []
        for n in range(3):
            committed = ok(
                http.post(
                    f"{base}/namespaces/{ns}/tables/t",
                    json={"updates": [{"action": "set-properties", "updates": {"n": str(n)}}]},
                )
            )
            locations.append(committed["metadata-location"])
        ok(
            http.post(
                f"{base}/tables/rename",
                json={
                    "source": {"namespace": [ns], "name": "t"},
                    "destination": {"namespace": [ns], "name": "t2"},
                },
            )
        )
        ok(http.delete(f"{base}/namespaces/{ns}/tables/t2"))
        wait_published(server, env["ICELOG_NATS_STREAM"])
        # The last commit once more, as a re-send the broker did not de-duplicate.
        commit_subject = f"{env['ICELOG_NATS_SUBJECT_PREFIX']}.table.committed.v1"
        asyncio.run(_republish_last(broker.url, env["ICELOG_NATS_STREAM"], commit_subject))

        lines = [line for line in run_example(broker, env, "example-test") if f" {ns}." in line]
        verbs = [line.split()[1] for line in lines]
        assert verbs == ["created", "committed", "committed", "committed", "renamed", "dropped"]
        assert all(line.split()[2] == f"{ns}.t" for line in lines[:4]), lines
        assert lines[0].split()[4] == "anonymous", lines[0]
        assert [line.split("-> ")[1] for line in lines[1:4]] == locations
        assert locations[0] != created["metadata-location"]
        assert f"{ns}.t2" in lines[4] and f"was {ns}.t" in lines[4], lines[4]
        assert lines[5].split()[2] == f"{ns}.t2", lines[5]

        # A durable consumer resumes after what it acknowledged: nothing is printed again.
        assert run_example(broker, env, "example-test") == []
    finally:
        server.stop()

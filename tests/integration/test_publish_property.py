"""Property: for any sequence of catalog operations, the stream a relay publishes to
JetStream — de-duplicated by CloudEvent id — is the log, in log order.

Each example drives a fresh catalog through the REST API with random operations, publishes
with relays that are stopped and restarted at random points (re-sending what was not yet
recorded as acknowledged), and compares the stream with the stored events.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.publishing import build_relay
from icelog.api.services import Services
from icelog.api.settings import Settings
from icelog.publishers.cloud_events import cloud_event_id
from tests.integration.conftest import SCHEMA
from tests.support.nats_server import NatsServer, start_nats

NAMES = ["a", "b", "c"]
OPS = st.one_of(
    st.tuples(st.just("namespace"), st.sampled_from(NAMES)),
    st.tuples(st.just("drop-namespace"), st.sampled_from(NAMES)),
    st.tuples(st.just("table"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("commit"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("drop"), st.sampled_from(NAMES), st.sampled_from(NAMES), st.booleans()),
    st.tuples(st.just("profile"), st.booleans()),
    st.tuples(st.just("undrop-all")),
    st.tuples(st.just("publish"), st.integers(min_value=1, max_value=7), st.booleans()),
)


class LosesAcks:
    """A real sink whose every other acknowledgement is "lost": the batch reached the
    broker, but the relay sees a failure and must send it again."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.name = sink.name
        self.calls = 0

    async def start(self) -> None:
        await self.sink.start()

    async def publish(self, messages: list[Any]) -> None:
        await self.sink.publish(messages)
        self.calls += 1
        if self.calls % 2 == 1:
            raise ConnectionError("acknowledgement lost")

    async def close(self) -> None:
        await self.sink.close()


@pytest.fixture(scope="module")
def broker() -> Iterator[NatsServer]:
    with tempfile.TemporaryDirectory() as directory:
        server = start_nats(Path(directory))
        yield server
        server.stop()


class Catalog:
    def __init__(self, directory: Path, broker: NatsServer) -> None:
        token = secrets.token_hex(4)
        self.settings = Settings.from_env(
            {
                "ICELOG_DATA_DIR": str(directory),
                "ICELOG_TASK_WORKERS": "0",
                "ICELOG_NATS_URL": broker.url,
                "ICELOG_NATS_STREAM": f"PROP_{token}",
                "ICELOG_NATS_SUBJECT_PREFIX": f"prop{token}",
            }
        )
        self.services = Services.build(self.settings)
        self.client = TestClient(create_app(self.settings, self.services))
        self.client.__enter__()
        config = self.client.get("/catalog/v1/config", params={"warehouse": "default"}).json()
        self.prefix = config["overrides"]["prefix"]
        self.base = f"/catalog/v1/{self.prefix}"

    def close(self) -> None:
        self.client.__exit__(None, None, None)
        self.services.close()

    def apply(self, op: tuple[Any, ...]) -> None:
        """Run one operation; refusals (4xx) are fine: the log records what happened."""
        c, base = self.client, self.base
        kind = op[0]
        if kind == "namespace":
            c.post(f"{base}/namespaces", json={"namespace": [op[1]]})
        elif kind == "drop-namespace":
            c.delete(f"{base}/namespaces/{op[1]}")
        elif kind == "table":
            c.post(f"{base}/namespaces/{op[1]}/tables", json={"name": op[2], "schema": SCHEMA})
        elif kind == "commit":
            c.post(
                f"{base}/namespaces/{op[1]}/tables/{op[2]}",
                json={"updates": [{"action": "set-properties", "updates": {"n": op[2]}}]},
            )
        elif kind == "rename":
            c.post(
                f"{base}/tables/rename",
                json={
                    "source": {"namespace": [op[1]], "name": op[2]},
                    "destination": {"namespace": [op[1]], "name": op[2] + "x"},
                },
            )
        elif kind == "drop":
            c.delete(
                f"{base}/namespaces/{op[1]}/tables/{op[2]}",
                params={"purgeRequested": str(op[3]).lower()},
            )
            self.services.tasks.run_until_idle()
        elif kind == "profile":
            profile = {"type": "soft", "expiration-seconds": 3600} if op[1] else {"type": "hard"}
            c.post(
                f"/management/v1/warehouse/{self.prefix}/delete-profile",
                json={"delete-profile": profile},
            )
        elif kind == "undrop-all":
            listed = c.get(f"/management/v1/warehouse/{self.prefix}/deleted-tabulars").json()
            for item in listed["tabulars"]:
                c.post(
                    f"/management/v1/warehouse/{self.prefix}/deleted-tabulars/undrop",
                    json={"targets": [{"type": item["typ"], "id": item["id"]}]},
                )

    def publish(self, batch_size: int, max_events: int | None, lose_acks: bool = False) -> None:
        """Run a relay until it has published `max_events` (or everything), then stop it;
        with `lose_acks`, batches that reached the broker are sent again."""
        relay = build_relay(self.services, "nats")
        if lose_acks:
            relay.sink = LosesAcks(relay.sink)
        relay.batch_size = batch_size
        head = int(self.services.catalog.app.recorder.max_notification_id() or 0)

        async def run() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(relay.run(stop))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not task.done():
                done = relay.published
                if max_events is not None and done >= max_events:
                    break
                position = relay.positions.positions().get(relay.sink.name, 0)
                if position >= head:
                    break
                await asyncio.sleep(0.005)
            stop.set()
            await task

        asyncio.run(run())

    def log(self) -> list[tuple[int, str, str]]:
        recorder = self.services.catalog.app.recorder
        found = recorder.select_notifications(start=0, limit=100_000, inclusive_of_start=False)
        return [
            (n.id, "io." + n.topic, cloud_event_id(n.originator_id, n.originator_version))  # type: ignore[arg-type]
            for n in found
        ]

    def stream(self) -> list[tuple[int, str, str]]:
        async def read() -> list[tuple[int, str, str]]:
            nc = await nats.connect(self.settings.publish.nats_urls[0])
            try:
                js = nc.jetstream()
                prefix = self.settings.publish.nats_subject_prefix
                sub = await js.pull_subscribe(
                    f"{prefix}.>", stream=self.settings.publish.nats_stream
                )
                found: list[tuple[int, str, str]] = []
                while True:
                    try:
                        batch = await sub.fetch(1000, timeout=0.5)
                    except TimeoutError:  # nats raises its own subclass or asyncio's
                        return found
                    for msg in batch:
                        event = json.loads(msg.data)
                        found.append((int(event["sequence"]), event["type"], event["id"]))
                        await msg.ack()
            finally:
                await nc.close()

        return asyncio.run(read())


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(OPS, min_size=1, max_size=25), batch=st.integers(min_value=1, max_value=50))
def test_published_stream_deduplicated_by_id_is_the_log(
    broker: NatsServer, ops: list[tuple[Any, ...]], batch: int
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        catalog = Catalog(Path(directory), broker)
        try:
            for op in ops:
                if op[0] == "publish":
                    catalog.publish(batch_size=batch, max_events=op[1], lose_acks=op[2])
                else:
                    catalog.apply(op)
            catalog.publish(batch_size=batch, max_events=None)
            log = catalog.log()
            seen: dict[str, tuple[int, str, str]] = {}
            for item in catalog.stream():
                seen.setdefault(item[2], item)
            published = sorted(seen.values())
            assert published == log
        finally:
            catalog.close()

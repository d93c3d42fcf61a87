"""A consumer of the Iceberg events API (`POST /v1/{prefix}/events`) reads the stream page by
page while Spark and PyIceberg commit at the same time, resumes from its last token after
the server restarts, and rebuilds every table's metadata location from the events alone —
equal to what the catalog says."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pytest

from tests.support.clients import rest_catalog
from tests.support.fixtures import ServerFactory
from tests.support.server import CatalogServer
from tests.support.spark import register_rest_catalog

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(400)]

ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("kind", pa.string())])


class Consumer:
    """Follows the stream; keeps its token (what a real consumer would persist)."""

    def __init__(self) -> None:
        self.token: str | None = None
        self.events: list[dict[str, Any]] = []

    def page(self, server: CatalogServer) -> int:
        prefix = httpx.get(
            f"{server.uri}/v1/config",
            params={"warehouse": server.warehouse},
            headers=server.headers(),
        ).json()["overrides"]["prefix"]
        body: dict[str, Any] = {"page-size": 7}
        if self.token is not None:
            body = {"continuation-token": self.token, "page-size": 7}
        answer = httpx.post(
            f"{server.uri}/v1/{prefix}/events", json=body, timeout=30, headers=server.headers()
        )
        answer.raise_for_status()
        found = answer.json()
        self.events += found["events"]
        self.token = found["continuation-token"]
        return len(found["events"])

    def drain(self, server: CatalogServer) -> None:
        while self.page(server):
            pass

    def locations(self) -> dict[str, str]:
        """Table uuid → current metadata location, from the events alone."""
        found: dict[str, str] = {}
        for event in self.events:
            op = event["operation"]
            kind = op["operation-type"]
            if kind in ("create-table", "register-table", "update-table"):
                found[op["table-uuid"]] = op["metadata-location"]
            elif kind in ("drop-table", "x-icelog.soft-drop-table"):
                found.pop(op["table-uuid"], None)
        return found


def test_a_consumer_follows_spark_and_pyiceberg_through_a_restart(
    spark: Any, backend: str, catalog_server_factory: ServerFactory
) -> None:
    server = catalog_server_factory(backend)
    catalog = rest_catalog(server)
    catalog.create_namespace("feed")
    spark_catalog = register_rest_catalog(
        spark, f"events_{backend}".replace("-", "_"), server.uri, token=server.token
    )
    consumer = Consumer()
    done = threading.Event()
    failures: list[BaseException] = []

    def follow() -> None:
        try:
            while not done.is_set():
                if not consumer.page(server):
                    time.sleep(0.05)
        except BaseException as exc:  # reported by the test below
            failures.append(exc)

    def pyiceberg_writer() -> None:
        try:
            table = catalog.create_table("feed.from_pyiceberg", schema=ARROW)
            for n in range(6):
                table.append(pa.table({"id": [n], "kind": ["py"]}, schema=ARROW))
            catalog.create_table("feed.dropped", schema=ARROW)
            catalog.drop_table("feed.dropped")
        except BaseException as exc:
            failures.append(exc)

    reader = threading.Thread(target=follow)
    writer = threading.Thread(target=pyiceberg_writer)
    reader.start()
    writer.start()
    spark_table = f"{spark_catalog}.feed.from_spark"
    spark.sql(f"CREATE TABLE {spark_table} (id BIGINT, kind STRING) USING iceberg")
    for n in range(4):
        spark.sql(f"INSERT INTO {spark_table} VALUES ({n}, 'spark')")
    spark.sql(f"ALTER TABLE {spark_table} ADD COLUMN extra DOUBLE")
    writer.join(timeout=300)
    done.set()
    reader.join(timeout=60)
    assert not failures, failures

    # The server restarts; the consumer goes on from its token, missing nothing.
    seen_before = len(consumer.events)
    server.stop()
    restarted = catalog_server_factory(
        backend, data_dir=server.data_dir, database_url=server.database_url
    )
    rest_catalog(restarted).load_table("feed.from_pyiceberg").append(
        pa.table({"id": [99], "kind": ["after"]}, schema=ARROW)
    )
    consumer.drain(restarted)
    assert len(consumer.events) > seen_before

    ids = [e["event-id"] for e in consumer.events]
    assert len(ids) == len(set(ids)), "an event came twice"
    after = rest_catalog(restarted)
    live = {
        str(t.metadata.table_uuid): t.metadata_location
        for t in (after.load_table(f"feed.{n}") for n in ("from_pyiceberg", "from_spark"))
    }
    assert consumer.locations() == live
    kinds = [e["operation"]["operation-type"] for e in consumer.events]
    assert kinds.count("create-table") == 3 and "drop-table" in kinds
    assert kinds.count("update-table") >= 6 + 4 + 1 + 1  # appends, inserts, alter, after

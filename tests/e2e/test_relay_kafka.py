"""The change-event relay against Kafka: librdkafka's mock cluster (3 brokers, the topic
pre-created with 4 partitions) in its own process per test (tests.support.kafka_mock), real
relay processes and servers, and a real confluent-kafka consumer in the test process.

The outage here is a network outage: the mock's brokers close their connections and refuse
new ones, but their logs stay in the mock process's memory. What the mock cannot stand in
for: a broker process restarting from disk (it has none), real replication (acks=all is
trivially met; no ISR shrink, no unclean leader election, no log truncation), CreateTopics
(the topic is pre-created), and transactions/read_committed (not used by the relay)."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from icelog.publishers.cloud_events import from_json
from tests.e2e.test_relay_nats import (
    Writer,
    assert_complete_and_ordered,
    head,
    metric,
    thousand_commits,
)
from tests.support.clients import wait_until
from tests.support.fixtures import ServerFactory
from tests.support.kafka_mock import KafkaMock, start_kafka_mock
from tests.support.server import CatalogServer, start_icelog

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PARTITIONS = 4
COMMITTED = "io.icelog.table.committed.v1"


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[KafkaMock]:
    mock = start_kafka_mock(
        f"icelog-events-{secrets.token_hex(3)}",
        partitions=PARTITIONS,
        log=tmp_path / "kafka-mock.log",
    )
    yield mock
    mock.stop()


def kafka_env(kafka: KafkaMock) -> dict[str, str]:
    return {
        "ICELOG_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "ICELOG_KAFKA_TOPIC": kafka.topic,
        "ICELOG_PUBLISH_LEASE_SECONDS": "2",
        "ICELOG_TASK_WORKERS": "0",
    }


def sink(kafka: KafkaMock) -> str:
    return f"kafka:{kafka.topic}"


def position(server: CatalogServer, kafka: KafkaMock) -> float:
    """The sink's durable position (NaN before the relay first took its lease)."""
    return metric(server, "icelog_publisher_position", sink(kafka))


def caught_up(server: CatalogServer, kafka: KafkaMock) -> bool:
    return position(server, kafka) == head(server)


def start_relay(server: CatalogServer, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`icelog publish kafka` on the server's store."""
    return start_icelog(server, ["publish", "kafka"], env, log)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


PAUSE_S = 0.05  # between a burst's rounds of commits


class Burst:
    """Commits round after round from a thread until stopped (errors re-raised at stop)."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        try:
            while not self._stop.is_set():
                self.writer.commit_round(n)
                n += 1
                # Paced, not as fast as the server goes: librdkafka's mock keeps 5 MB per
                # partition and drops the oldest messages past that, which a faster server
                # reached within one outage (the test then saw its messages "lost").
                self._stop.wait(PAUSE_S)
        except BaseException as exc:  # handed to the test thread by stop()
            self._error = exc

    def start(self) -> Burst:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "a commit hung"
        error, self._error = self._error, None
        if error is not None:
            raise error


def _consumer(kafka: KafkaMock) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": f"test-{secrets.token_hex(4)}",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )


def log_end(kafka: KafkaMock) -> int:
    """How many messages the topic holds (the sum of its partitions' high watermarks)."""
    consumer = _consumer(kafka)
    try:
        return sum(
            consumer.get_watermark_offsets(
                TopicPartition(kafka.topic, partition), timeout=10, cached=False
            )[1]
            for partition in range(kafka.partitions)
        )
    finally:
        consumer.close()


@dataclass(frozen=True)
class Received:
    partition: int
    offset: int
    key: str
    headers: dict[str, str]
    body: bytes
    event: dict[str, Any]


def _headers(raw: Any) -> dict[str, str]:
    pairs = raw.items() if isinstance(raw, dict) else raw or []
    return {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in pairs}


def consume_all(kafka: KafkaMock, timeout: float = 60.0) -> list[Received]:
    """Every message the topic holds, partition after partition, each in offset order."""
    consumer = _consumer(kafka)
    try:
        ends = {
            partition: consumer.get_watermark_offsets(
                TopicPartition(kafka.topic, partition), timeout=10, cached=False
            )
            for partition in range(kafka.partitions)
        }
        assert all(low == 0 for low, _ in ends.values()), ends
        consumer.assign(
            [TopicPartition(kafka.topic, p, OFFSET_BEGINNING) for p in range(kafka.partitions)]
        )
        found: dict[int, list[Received]] = defaultdict(list)
        deadline = time.monotonic() + timeout
        while any(len(found[p]) < high for p, (_, high) in ends.items()):
            assert time.monotonic() < deadline, {p: len(found[p]) for p in ends}
            for message in consumer.consume(500, timeout=1.0):
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    continue
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                assert offset == len(found[partition]), "offsets are dense in the mock"
                value, key = message.value(), message.key()
                assert isinstance(value, bytes) and isinstance(key, bytes)
                found[partition].append(
                    Received(
                        partition=partition,
                        offset=offset,
                        key=key.decode(),
                        headers=_headers(message.headers()),
                        body=value,
                        event=json.loads(value),
                    )
                )
        return [r for p in sorted(found) for r in found[p]]
    finally:
        consumer.close()


def check_messages(received: list[Received]) -> dict[str, list[Received]]:
    """Each message: a structured-mode CloudEvent keyed by its aggregate id, with a `ce_id`
    header; each aggregate in one partition; each re-sent copy of an event identical to
    the first (same id, same body), and one id per log position. Returns the copies by id."""
    by_id: dict[str, list[Received]] = defaultdict(list)
    partitions: dict[str, set[int]] = defaultdict(set)
    ids_at: dict[str, set[str]] = defaultdict(set)
    for r in received:
        cloud = from_json(r.body)
        assert cloud.get_id() == r.event["id"] == r.headers["ce_id"]
        assert r.headers["content-type"] == "application/cloudevents+json"
        assert r.key == r.event["aggregateid"], "the message key is the aggregate id"
        partitions[r.key].add(r.partition)
        by_id[r.event["id"]].append(r)
        ids_at[r.event["sequence"]].add(r.event["id"])
    split = {aggregate: found for aggregate, found in partitions.items() if len(found) > 1}
    assert not split, f"aggregates spread over partitions: {split}"
    for event_id, copies in by_id.items():
        assert all(c.body == copies[0].body for c in copies), f"copies of {event_id} differ"
    assert all(len(ids) == 1 for ids in ids_at.values()), "a re-sent event got a new id"
    return by_id


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_thousand_commits_reach_kafka_once_each_keyed_and_in_order(
    store: str, kafka: KafkaMock, catalog_server_factory: ServerFactory
) -> None:
    # The relay runs inside serve.
    server = catalog_server_factory(store, {**kafka_env(kafka), "ICELOG_PUBLISH": "kafka"})
    try:
        writer, total = thousand_commits(server, lambda: caught_up(server, kafka), timeout=90)
        received = consume_all(kafka)
        assert len(received) == total, "one relay, no failure: each event exactly once"
        check_messages(received)
        assert_complete_and_ordered([r.event for r in received], total)
        commits = [r.event for r in received if r.event["type"] == COMMITTED]
        assert len(commits) == 1000
        per_table: dict[str, list[str]] = defaultdict(list)
        for event in commits:
            assert event["namespace"] == writer.ns and event["subject"].startswith(writer.ns)
            per_table[event["name"]].append(event["data"]["updates"][0]["updates"]["n"])
        assert sorted(per_table) == writer.tables
        assert all(seen == [str(n) for n in range(100)] for seen in per_table.values())
        # 10 tables, a namespace, a warehouse...: by key they land in more than one partition.
        assert len({r.partition for r in received}) > 1
        assert metric(server, "icelog_publisher_lag_events", sink(kafka)) == 0
        assert metric(server, "icelog_publisher_lag_seconds", sink(kafka)) == 0
    finally:
        server.stop()


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_relay_killed_mid_burst_resumes_without_gaps(
    store: str, kafka: KafkaMock, catalog_server_factory: ServerFactory, tmp_path: Path
) -> None:
    """SIGKILL while the relay waits for Kafka's acknowledgement of a batch the brokers
    already hold: the next relay re-sends from the durable position, so exactly those events
    arrive twice — with the ids (and bodies) of the first copies — and nothing is missing."""
    env = kafka_env(kafka)
    server = catalog_server_factory(store, env)
    burst: Burst | None = None
    relays: list[subprocess.Popen[bytes]] = []
    try:
        burst = Burst(Writer(server, tables=5)).start()
        durable = end = 0

        def published_more() -> bool:
            return position(server, kafka) > durable

        for attempt in range(3):  # a kill may land just after an advance: then once more
            # Slow acknowledgements (the brokers append at once, answer 700 ms later) widen
            # the window between "in Kafka" and "position advanced" that a crash falls into.
            kafka.set_rtt(700)
            relay = start_relay(server, env, tmp_path / f"relay{attempt}.log")
            relays.append(relay)
            assert wait_until(published_more, timeout=60)
            time.sleep(1.0)  # into the next batch's acknowledgement wait
            relay.send_signal(signal.SIGKILL)
            relay.wait(timeout=10)
            kafka.set_rtt(0)
            durable = int(position(server, kafka))  # fixed now: its only writer is dead
            end = log_end(kafka)
            assert end >= durable, "every acknowledged event is in Kafka"
            if end > durable:
                break
        assert end > durable, "no kill landed while Kafka held unacknowledged events"
        assert head(server) > durable, "the burst went on past the killed relay"
        last = start_relay(server, env, tmp_path / "relay-last.log")
        relays.append(last)
        assert wait_until(published_more, timeout=60)
        burst.stop()
        assert wait_until(lambda: caught_up(server, kafka), timeout=60), server.log()[-3000:]
        stop_process(last)
        assert last.returncode == 0
        total = head(server)
        received = consume_all(kafka)
        by_id = check_messages(received)
        assert_complete_and_ordered([r.event for r in received], total)
        # The last relay sent everything after the durable position once; the killed one had
        # sent (end - durable) of those already: exactly these, and no others, are doubled.
        assert len(received) == end + (total - durable)
        doubled = {i: c for i, c in by_id.items() if len(c) > 1}
        assert len(doubled) == end - durable
        assert all(len(c) == 2 for c in doubled.values())
        assert all(int(c[0].event["sequence"]) > durable for c in doubled.values())
    finally:
        if burst is not None:
            burst.stop()
        for relay in relays:
            if relay.poll() is None:
                relay.kill()
                relay.wait(timeout=10)
        server.stop()


def _outage(server: CatalogServer, kafka: KafkaMock, seconds: float, burst: Burst) -> None:
    """All brokers down for `seconds` while the burst goes on: the durable position must not
    move meanwhile, and must move again once they are back; then the burst stops and the
    relay catches up."""
    assert wait_until(lambda: position(server, kafka) > 0, timeout=60), server.log()[-3000:]
    kafka.brokers_down()
    try:
        time.sleep(1.0)  # a batch acknowledged just before may still be recorded
        stuck = position(server, kafka)
        time.sleep(seconds - 1.0)
        assert position(server, kafka) == stuck, "published with every broker down?"
        assert head(server) > stuck + 50, "writes went on during the outage"
        assert metric(server, "icelog_publisher_lag_events", sink(kafka)) > 0
    finally:
        kafka.brokers_up()
    assert wait_until(lambda: position(server, kafka) > stuck, timeout=60), "resumed"
    burst.stop()
    assert wait_until(lambda: caught_up(server, kafka), timeout=60), server.log()[-3000:]


@pytest.mark.postgres
def test_brokers_down_ten_seconds_during_a_burst_lose_nothing(
    kafka: KafkaMock, catalog_server_factory: ServerFactory
) -> None:
    """Shorter than the delivery timeout (30 s): the producer keeps the batch and delivers
    it when the brokers are back; its retries are de-duplicated by idempotence."""
    env = {**kafka_env(kafka), "ICELOG_PUBLISH": "kafka"}
    server = catalog_server_factory("postgres", env)
    burst = Burst(Writer(server, tables=5))
    try:
        burst.start()
        _outage(server, kafka, 10.0, burst)
        total = head(server)
        received = consume_all(kafka)
        check_messages(received)
        assert_complete_and_ordered([r.event for r in received], total)
        assert len(received) == total, "nothing re-sent: the batch waited in the producer"
        assert "send of" not in server.log()
    finally:
        burst.stop()
        server.stop()


def test_outage_longer_than_the_delivery_timeout_is_retried_without_loss(
    kafka: KafkaMock, catalog_server_factory: ServerFactory
) -> None:
    """Longer than the delivery timeout (here 2 s): deliveries fail, the relay backs off and
    re-sends the batch from its position until the brokers are back."""
    env = {
        **kafka_env(kafka),
        "ICELOG_PUBLISH": "kafka",
        "ICELOG_KAFKA_CONFIG": json.dumps({"message.timeout.ms": 2000}),
    }
    server = catalog_server_factory("sqlite", env)
    burst = Burst(Writer(server, tables=5))
    try:
        burst.start()
        _outage(server, kafka, 8.0, burst)
        log = server.log()
        # On failure, the relay's own lines (the tail is mostly access-log lines).
        relay_lines = "\n".join(line for line in log.splitlines() if "relay" in line)
        assert "failed (KafkaException" in log and "Message timed out" in log, relay_lines[-3000:]
        total = head(server)
        received = consume_all(kafka)
        check_messages(received)
        assert_complete_and_ordered([r.event for r in received], total)
        assert len(received) >= total
    finally:
        burst.stop()
        server.stop()


OUT_OF_ORDER_SEQUENCE_NUMBER = 45  # fatal to an idempotent producer


def test_relay_recovers_from_a_fatal_producer_error(
    kafka: KafkaMock, catalog_server_factory: ServerFactory
) -> None:
    """librdkafka: after a fatal error the producer is unusable and must be replaced. The
    relay must go on publishing (with a new producer), re-sending from its position."""
    env = {**kafka_env(kafka), "ICELOG_PUBLISH": "kafka"}
    server = catalog_server_factory("sqlite", env)
    try:
        writer = Writer(server, tables=3)
        for n in range(5):
            writer.commit_round(n)
        assert wait_until(lambda: caught_up(server, kafka), timeout=60), server.log()[-3000:]
        kafka.fail_next_produce(OUT_OF_ORDER_SEQUENCE_NUMBER)
        for n in range(5, 10):
            writer.commit_round(n)
        assert wait_until(lambda: "FATAL" in server.log(), timeout=30), "not injected"
        assert wait_until(lambda: caught_up(server, kafka), timeout=20), server.log()[-3000:]
        total = head(server)
        received = consume_all(kafka)
        check_messages(received)
        assert_complete_and_ordered([r.event for r in received], total)
    finally:
        server.stop()

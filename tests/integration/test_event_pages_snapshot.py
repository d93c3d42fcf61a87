"""The events endpoint never skips an event: a page and its continuation token come from
one snapshot of the Iceberg events read model.

A page used to read its rows and then, in a second statement on an autocommit connection,
how far its window reached: a row an indexer committed between the two moved the token past
itself without being returned, and a consumer following the tokens never saw it (79 of
9,425 events on one PostgreSQL replica, 416 of 29,843 on two)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from icelog.api.event_log import Indexer
from icelog.projections.iceberg_events import (
    TABLE,
    EventsFilter,
    IcebergEventRow,
    IcebergEvents,
)
from icelog.projections.sql import write_transaction
from tests.integration.conftest import Api
from tests.support.load import run_for

pytestmark = pytest.mark.attack

BASE = 10**12  # far beyond any real log position: these rows never meet the indexer's


def _row(position: int, stream: str) -> IcebergEventRow:
    return IcebergEventRow(
        position=position, stream=stream, object_type="namespace", object_uuid=None,
        path=f"ns{position}", from_path=None, operation_type="create-namespace",
        event_id=str(uuid.uuid4()), request_id=str(uuid.uuid4()), request_group=position,
        timestamp_ms=int(time.time() * 1000), actor="tester",
        operation={"operation-type": "create-namespace", "namespace": [f"ns{position}"]},
    )  # fmt: skip


def _commit(store: IcebergEvents, rows: Sequence[IcebergEventRow]) -> None:
    # up_to=0: the rows only, the indexer's tracked position stays where it is.
    with write_transaction(store._datastore) as cur:
        store.write(rows, 0, cur)


def test_a_row_committed_between_a_pages_statements_is_not_skipped(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic: another indexer commits a row right after a short page read its rows
    (before it asks how far its window reached). The next page must return that row."""
    store: IcebergEvents = api.client.app.state.indexer.iceberg  # type: ignore[attr-defined]
    stream = f"stream-{uuid.uuid4()}"
    _commit(store, [_row(BASE + 1, stream)])
    original = store._query
    injected: list[threading.Thread] = []

    def query(cur: Any, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        found = original(cur, statement, params)
        if not injected and statement.startswith("SELECT e.position"):
            # Another connection commits a newer row now (a second replica's indexer).
            writer = threading.Thread(target=_commit, args=(store, [_row(BASE + 2, stream)]))
            injected.append(writer)
            writer.start()
            writer.join(timeout=3)  # SQLite may hold it until the read ends: fine too
        return found

    monkeypatch.setattr(store, "_query", query)
    first = store.page([stream], EventsFilter(), BASE, 100)
    monkeypatch.setattr(store, "_query", original)
    injected[0].join(timeout=10)
    second = store.page([stream], EventsFilter(), first.last_position, 100)
    seen = [r.position for r, _ in first.rows] + [r.position for r, _ in second.rows]
    assert seen == [BASE + 1, BASE + 2], (first.last_position, seen)


@pytest.mark.postgres
def test_a_consumer_following_tokens_misses_nothing_under_concurrent_indexers(
    pg_api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers create namespaces while two indexers (this server's and a second replica's)
    follow the log and a consumer follows the continuation tokens; at the end the consumer
    has seen every event of the warehouse, in log order."""
    api = pg_api
    other = Indexer(api.services)  # a second replica's indexer, on the same database
    # A slow reader (a loaded database): a moment passes after a page's rows are read.
    store: IcebergEvents = api.client.app.state.indexer.iceberg  # type: ignore[attr-defined]
    original = store._query

    def slow_query(cur: Any, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        found = original(cur, statement, params)
        if statement.startswith("SELECT e.position"):
            time.sleep(0.03)
        return found

    monkeypatch.setattr(store, "_query", slow_query)
    stop = threading.Event()
    errors: list[BaseException] = []
    written = [0]

    def guarded(work: Any) -> Any:
        def run() -> None:
            try:
                work()
            except BaseException as exc:
                errors.append(exc)
                stop.set()

        return run

    def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            answer = api.post("/namespaces", {"namespace": [f"w{n}_{i}"]})
            assert answer.status_code == 200, answer.text
            written[0] += 1
            i += 1

    def indexing() -> None:
        while not stop.is_set():
            other.catch_up(batch=1)  # one event a commit: many commits of the read model

    def consume(seen: list[str], token: str | None) -> str | None:
        body: dict[str, Any] = {"page-size": 13}
        if token is not None:
            body["continuation-token"] = token
        answer = api.post("/events", body)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        seen.extend(e["event-id"] for e in page["events"])
        return str(page["continuation-token"])

    consumers: list[tuple[list[str], list[str | None]]] = [([], [None]) for _ in range(2)]

    def consumer(seen: list[str], token: list[str | None]) -> None:
        while not stop.is_set():
            token[0] = consume(seen, token[0])

    threads = [threading.Thread(target=guarded(lambda n=n: writer(n))) for n in range(4)]
    threads.append(threading.Thread(target=guarded(indexing)))
    threads += [threading.Thread(target=guarded(lambda c=c: consumer(*c))) for c in consumers]
    run_for(threads, stop, 12)
    assert not errors, errors
    indexer: Indexer = api.client.app.state.indexer  # type: ignore[attr-defined]
    indexer.catch_up()
    with indexer.iceberg.reading() as cur:
        cur.execute(f"SELECT event_id FROM {TABLE} WHERE position < %s ORDER BY position", (BASE,))
        everything = [str(r[0]) for r in cur.fetchall()]
    assert written[0] > 100
    for seen, token in consumers:
        while True:  # drain: everything is indexed now
            before = len(seen)
            token[0] = consume(seen, token[0])
            if len(seen) == before:
                break
        missed = [e for e in everything if e not in set(seen)]
        print(f"events: {len(everything)}, written {written[0]}, missed {len(missed)}")
        assert not missed, f"a consumer missed {len(missed)} of {len(everything)} events"
        assert seen == everything  # each once, in log order

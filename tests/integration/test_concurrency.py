"""Concurrent writers never lose a commit and never share a name."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from icelog.commands.tabular_values import Change
from icelog.domain.context import RequestContext
from icelog.domain.errors import AlreadyExistsError, CommitFailedError
from icelog.domain.identifiers import NamespaceName, TabularName
from tests.integration.conftest import SCHEMA, Api, create_table
from tests.integration.test_tables_api import append_change
from tests.support.commands import create_plain_table

CTX = RequestContext("tester", "r")


def run_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * count
    barrier = threading.Barrier(count)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def test_commits_without_requirements_rebase_and_all_land(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    catalog, wid = api.services.catalog, api.services.warehouse_for_prefix(api.prefix)
    name = TabularName(NamespaceName(("db",)), "t")

    def work(i: int) -> None:
        for j in range(6):
            catalog.tables.commit_table(
                Change(
                    CTX,
                    wid,
                    name,
                    [],
                    [{"action": "set-properties", "updates": {f"k{i}-{j}": "v"}}],
                )
            )

    results = run_threads(8, work)
    assert [r for r in results if r is not None] == []
    props = api.get("/namespaces/db/tables/t").json()["metadata"]["properties"]
    assert {k for k in props if k.startswith("k")} == {
        f"k{i}-{j}" for i in range(8) for j in range(6)
    }


def test_appenders_with_client_retry_lose_no_snapshot(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    catalog, wid = api.services.catalog, api.services.warehouse_for_prefix(api.prefix)
    name = TabularName(NamespaceName(("db",)), "t")
    conflicts = [0]

    def work(i: int) -> None:
        for j in range(4):
            snap_id = 1000 * (i + 1) + j
            while True:  # what Spark and DuckDB do on 409: refresh, re-apply, retry
                current = api.services.queries.load_tabular(str(wid), name.namespace, "t", "table")
                assert current is not None
                import orjson

                md = orjson.loads(current.metadata)
                parent = md.get("current-snapshot-id")
                parent = None if parent in (None, -1) else parent
                seq = md["last-sequence-number"] + 1
                try:
                    catalog.tables.commit_table(
                        Change(CTX, wid, name, *append_change(snap_id, seq, parent))
                    )
                    break
                except CommitFailedError:
                    conflicts[0] += 1

    results = run_threads(6, work)
    assert [r for r in results if r is not None] == []
    md = api.get("/namespaces/db/tables/t").json()["metadata"]
    assert len(md["snapshots"]) == 24
    # One linear history: every snapshot's parent is the one before it.
    by_id = {s["snapshot-id"]: s for s in md["snapshots"]}
    chain, cursor = [], md["current-snapshot-id"]
    while cursor is not None:
        chain.append(cursor)
        cursor = by_id[cursor].get("parent-snapshot-id")
    assert len(chain) == 24
    assert md["last-sequence-number"] == 24
    assert conflicts[0] > 0, "the test should have produced real conflicts"


def test_concurrent_creates_of_one_name_one_wins(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    catalog, wid = api.services.catalog, api.services.warehouse_for_prefix(api.prefix)

    def work(_i: int) -> Any:
        return create_plain_table(
            catalog, CTX, wid, TabularName(NamespaceName(("db",)), "same"), SCHEMA
        )

    results = run_threads(8, work)
    winners = [r for r in results if not isinstance(r, Exception)]
    losers = [r for r in results if isinstance(r, Exception)]
    assert len(winners) == 1
    assert all(isinstance(e, AlreadyExistsError) for e in losers), losers
    assert api.get("/namespaces/db/tables").json()["identifiers"] == [
        {"namespace": ["db"], "name": "same"}
    ]


def test_concurrent_creates_in_one_namespace_all_land(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    catalog, wid = api.services.catalog, api.services.warehouse_for_prefix(api.prefix)

    def work(i: int) -> Any:
        name = TabularName(NamespaceName(("db",)), f"t{i}")
        return create_plain_table(catalog, CTX, wid, name, SCHEMA)

    conflicts: list[int] = []
    catalog.app.on_commit_conflict = lambda: conflicts.append(1)
    results = run_threads(8, work)
    assert [r for r in results if isinstance(r, Exception)] == []
    listed = api.get("/namespaces/db/tables").json()["identifiers"]
    assert sorted(i["name"] for i in listed) == [f"t{i}" for i in range(8)]
    # The namespace counted all eight: it cannot be dropped.
    assert api.delete("/namespaces/db").status_code == 409
    # Creates in one namespace take turns: none raced another into a retry.
    assert conflicts == []

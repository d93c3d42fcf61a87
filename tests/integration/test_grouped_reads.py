"""The PostgreSQL loadTable reader answers concurrent lookups with shared queries
(projections/fast_reads.py): every lookup still gets its own, current answer."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from psycopg import AsyncConnection

from icelog.domain.errors import ServiceUnavailableError
from icelog.domain.identifiers import NamespaceName
from icelog.projections.fast_reads import HEAD_STATEMENT, PostgresTabularReader
from tests.integration.conftest import Api, create_table

pytestmark = pytest.mark.postgres
NS = NamespaceName(("db",))


def reader_for(api: Api, connections: int = 2) -> PostgresTabularReader:
    url = api.services.settings.database_url
    assert url is not None
    return PostgresTabularReader({"conninfo": url}, max_size=connections, cache_bytes=1 << 20)


def run(reader: PostgresTabularReader, work: Any) -> Any:
    async def scenario() -> Any:
        await reader.open()
        try:
            return await work()
        finally:
            await reader.close()

    return asyncio.run(scenario())


def test_concurrent_lookups_share_queries_and_each_gets_its_own_row(pg_api: Api) -> None:
    api = pg_api
    api.post("/namespaces", {"namespace": ["db"]})
    created = {name: create_table(api, "db", name) for name in ("a", "b", "c")}
    wid = str(api.services.warehouse_for_prefix(api.prefix))
    reader = reader_for(api, connections=1)
    names = ["a", "b", "missing", "c", "a", "b", "a"] * 5

    async def work() -> list[Any]:
        return list(
            await asyncio.gather(*(reader.load_tabular(wid, NS, n, "table") for n in names))
        )

    rows = run(reader, work)
    for name, row in zip(names, rows, strict=True):
        if name == "missing":
            assert row is None
            continue
        assert row is not None
        assert row.metadata_location == created[name]["metadata-location"]
        assert row.id == created[name]["metadata"]["table-uuid"]
    stats = reader.group_stats()
    assert stats["queries"] < len(names), stats  # grouped ...
    assert stats["lookups"] <= 4 * stats["queries"], stats  # ... and identical ones once
    # A view of the same name is not a table.
    other = reader_for(api)
    assert run(other, lambda: other.load_tabular(wid, NS, "a", "view")) is None


def test_a_lookup_sees_every_commit_acknowledged_before_it(pg_api: Api) -> None:
    """Read-your-writes with grouping: commits and bursts of concurrent lookups interleave;
    each burst, issued after a commit returned, sees that commit."""
    api = pg_api
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    wid = str(api.services.warehouse_for_prefix(api.prefix))
    reader = reader_for(api)

    async def work() -> None:
        for i in range(15):
            response = await asyncio.to_thread(
                api.post,
                "/namespaces/db/tables/t",
                {"updates": [{"action": "set-properties", "updates": {"i": str(i)}}]},
            )
            assert response.status_code == 200, response.text
            expected = response.json()["metadata-location"]
            rows = await asyncio.gather(
                *(reader.load_tabular(wid, NS, "t", "table") for _ in range(8))
            )
            assert {row.metadata_location for row in rows if row} == {expected}

    run(reader, work)


def test_a_cancelled_lookup_leaves_its_group_answered(pg_api: Api) -> None:
    api = pg_api
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    wid = str(api.services.warehouse_for_prefix(api.prefix))
    reader = reader_for(api, connections=1)

    async def work() -> list[Any]:
        first = asyncio.ensure_future(reader.load_tabular(wid, NS, "t", "table"))
        doomed = asyncio.ensure_future(reader.load_tabular(wid, NS, "t", "table"))
        third = asyncio.ensure_future(reader.load_tabular(wid, NS, "t", "table"))
        await asyncio.sleep(0)
        doomed.cancel()
        return list(await asyncio.gather(first, third))

    rows = run(reader, work)
    assert all(row is not None and row.metadata_location for row in rows)


async def _head_plan(reader: PostgresTabularReader, wid: str, name: str) -> tuple[str, int]:
    """The plan the reader's connection keeps for its lookup by name (the statement it
    prepared when it opened), and that connection's backend."""
    # PostgreSQL makes five plans for the values given, then may keep one generic plan
    # (shown with $1): 12 runs get there.
    for _ in range(12):
        assert await reader.load_tabular(wid, NS, name, "table") is not None
    slot = await reader._checkout()
    try:
        conn = slot[0]
        statement = HEAD_STATEMENT.decode()
        cur = await conn.execute(
            f"EXPLAIN EXECUTE {statement}('{wid}', '{NS.key}', '{name}', 'table')"
        )
        plan = "\n".join(str(row[0]) for row in await cur.fetchall())
        return plan, conn.info.backend_pid
    finally:
        await reader._give_back(slot, broken=False)


def test_a_connection_kept_from_a_small_catalog_is_replaced_and_plans_again(
    pg_api: Api,
) -> None:
    """The plan kept while the warehouse held one table narrows by warehouse only (every
    index looks alike at one row); after the warehouse grew, a lookup on that connection
    read every row of it. Past MAX_AGE_S the connection is replaced and the new one's plan
    finds the table by its name."""
    api = pg_api
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    wid = str(api.services.warehouse_for_prefix(api.prefix))
    reader = reader_for(api, connections=1)

    async def scenario() -> tuple[tuple[str, int], tuple[str, int]]:
        await reader.open()
        try:
            small = await _head_plan(reader, wid, "t")
            # 3,000 more tables in the read model (rows as the projection writes them;
            # made directly: creating them through the API takes far longer).
            url = api.services.settings.database_url
            assert url is not None
            async with await AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(
                    "INSERT INTO icelog_tabulars (id, warehouse_id, ns_key, name, kind, "
                    "location, metadata_location, metadata, version, created_at, updated_at) "
                    "SELECT 'x' || i, %s, 'db', 'n' || i, 'table', 'file:///w/n' || i, "
                    "'file:///w/n' || i || '/m.json', '\\x7b7d'::bytea, 1, '', '' "
                    "FROM generate_series(1, 3000) AS i",
                    (wid,),
                )
            reader.MAX_AGE_S = 0.0  # the next lookup replaces the connection
            assert await reader.load_tabular(wid, NS, "t", "table") is not None
            reader.MAX_AGE_S = 3600.0
            assert reader.pool_stats()["pool_size"] == 1
            grown = await _head_plan(reader, wid, "t")
            return small, grown
        finally:
            await reader.close()

    (small, first), (grown, second) = asyncio.run(scenario())
    assert second != first, "the connection was replaced"
    assert "$1" in small, small  # a generic plan was kept while the warehouse was small
    assert "icelog_tabulars_by_name" in grown, grown
    assert "Filter: ((ns_key" not in grown, grown


def test_names_that_need_quoting_are_found_in_a_group_and_nul_finds_nothing(pg_api: Api) -> None:
    """The grouped lookup sends each column as one text[] literal (raw_queries.py): every
    character a name may hold must reach PostgreSQL as it was, and a name with NUL (which
    libpq would cut short, finding the table of the name before it) finds nothing."""
    api = pg_api
    namespace = 'n "q" \\ ,{}'
    api.post("/namespaces", {"namespace": [namespace]})
    tricky = ['a"b', "c\\d", "e,f", "{g}", "NULL", "h i", "ü€😀", "'", "a"]
    created = {name: create_table(api, namespace, name) for name in tricky}
    wid = str(api.services.warehouse_for_prefix(api.prefix))
    ns = NamespaceName((namespace,))
    reader = reader_for(api, connections=1)
    asked = [*tricky, "a\x00b", "a\\", 'a"'] * 2

    async def work() -> list[Any]:
        return list(
            await asyncio.gather(*(reader.load_tabular(wid, ns, n, "table") for n in asked))
        )

    rows = run(reader, work)
    for name, row in zip(asked, rows, strict=True):
        if name in created:
            assert row is not None, name
            assert row.id == created[name]["metadata"]["table-uuid"], name
        else:
            assert row is None, name
    assert reader.group_stats()["queries"] < len(asked)  # they were grouped
    # Alone (the single-lookup statement); the API refuses such a name before any read.
    lone = reader_for(api)
    assert run(lone, lambda: lone.load_tabular(wid, ns, "a\x00b", "table")) is None
    response = api.get("/namespaces/n%20%22q%22%20%5C%20%2C%7B%7D/tables/a%00b")
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "BadRequestException"


def _one_table(api: Api) -> tuple[str, str]:
    """Table db.t; (its warehouse id, the database URL)."""
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    url = api.services.settings.database_url
    assert url is not None
    return str(api.services.warehouse_for_prefix(api.prefix)), url


def _location_of(api: Api, name: str) -> str:
    location: str = api.get(f"/namespaces/db/tables/{name}").json()["metadata-location"]
    return location


def test_a_lookup_cancelled_during_its_own_query_leaves_the_reader_working(pg_api: Api) -> None:
    """A lone lookup runs its query in the request's task: cancelling it mid-query (the
    request's task is cancelled at shutdown) leaves the connection in an unknown state, so
    it is closed, and the next lookup gets a new one."""
    wid, url = _one_table(pg_api)
    reader = reader_for(pg_api, connections=1)

    async def work() -> Any:
        assert await reader.load_tabular(wid, NS, "t", "table") is not None  # connected
        with psycopg.connect(url) as locker:
            # Held mid-query: a local PostgreSQL can answer within the loop turn that sent it.
            locker.execute("LOCK TABLE icelog_tabulars IN ACCESS EXCLUSIVE MODE")
            lone = asyncio.ensure_future(reader.load_tabular(wid, NS, "t", "table"))
            await asyncio.sleep(0.2)
            lone.cancel()
            with pytest.raises(asyncio.CancelledError):
                await lone
            locker.rollback()
        opened = reader.pool_stats()["pool_size"]
        again = await reader.load_tabular(wid, NS, "t", "table")
        return opened, again

    opened, again = run(reader, work)
    assert opened == 0  # the interrupted connection was closed
    assert again is not None and again.metadata_location == _location_of(pg_api, "t")


def test_a_statement_timeout_is_retried_then_answered_as_unavailable(pg_api: Api) -> None:
    """A failed lookup keeps PostgreSQL's error class (a statement timeout is an
    OperationalError): retried once on a new connection, then a 503 — not a 500."""
    wid, url = _one_table(pg_api)
    reader = PostgresTabularReader(
        {"conninfo": url, "options": "-c statement_timeout=200"}, max_size=1, cache_bytes=1 << 20
    )

    async def work() -> Any:
        assert await reader.load_tabular(wid, NS, "t", "table") is not None
        with psycopg.connect(url) as locker:
            locker.execute("LOCK TABLE icelog_tabulars IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(ServiceUnavailableError):
                await reader.load_tabular(wid, NS, "t", "table")
            locker.rollback()
        return await reader.load_tabular(wid, NS, "t", "table")

    assert run(reader, work) is not None
    assert reader.pool_stats()["connections_lost"] == 2


def test_close_waits_for_a_lookup_running_in_its_request(pg_api: Api) -> None:
    """A lone lookup runs in its request's task, outside the reader's groups: close() must
    still wait for it, or its connection would come back after the reader closed them."""
    wid, url = _one_table(pg_api)
    reader = reader_for(pg_api, connections=1)

    async def scenario() -> Any:
        await reader.open()
        assert await reader.load_tabular(wid, NS, "t", "table") is not None  # connected
        with psycopg.connect(url) as locker:
            locker.execute("LOCK TABLE icelog_tabulars IN ACCESS EXCLUSIVE MODE")
            lone = asyncio.ensure_future(reader.load_tabular(wid, NS, "t", "table"))
            await asyncio.sleep(0.2)  # its query waits for the lock
            closing = asyncio.ensure_future(reader.close())
            await asyncio.sleep(0.2)
            waited = not closing.done()
            locker.rollback()
        await closing
        assert lone.done()
        return waited, lone.result(), reader.pool_stats()["pool_size"]

    waited, row, still_open = asyncio.run(scenario())
    assert waited  # close() waited for the lookup
    assert row is not None
    assert still_open == 0

"""The event-log API: paging, filters, per-table history, read-your-writes (both backends)."""

from __future__ import annotations

from typing import Any

from tests.integration.conftest import Api, create_table
from tests.integration.test_views_api import create_view

ROOT = "/management/v1"


def events(api: Api, **params: Any) -> Any:
    response = api.client.get(f"{ROOT}/events", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_pages_cover_the_whole_log_in_order(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    for name in ("a", "b", "c"):
        create_table(api, "db", name)
    head = api.position()
    seen: list[int] = []
    after = 0
    while True:
        page = events(api, after=after, limit=4)
        seen += [e["position"] for e in page["events"]]
        if page["next-after"] is None:
            break
        after = page["next-after"]
    assert seen == sorted(seen) and seen[-1] == head
    assert len(seen) == len(set(seen))
    recorder = api.services.catalog.app.recorder
    stored = recorder.select_notifications(start=0, limit=10_000, inclusive_of_start=False)
    assert seen == [n.id for n in stored], "every stored event, nothing else"


def test_newest_first_and_before_a_position(api: Api) -> None:
    """`order=desc` pages back in time with `next-before`; `before` bounds either order
    (the console's log as of a position)."""
    api.post("/namespaces", {"namespace": ["db"]})
    for name in ("a", "b", "c"):
        create_table(api, "db", name)
    everything = [e["position"] for e in events(api, limit=1000)["events"]]
    seen: list[int] = []
    query: dict[str, Any] = {"order": "desc", "limit": 4}
    while True:
        page = events(api, **query)
        assert page["next-after"] is None
        seen += [e["position"] for e in page["events"]]
        if page["next-before"] is None:
            break
        query["before"] = page["next-before"]
    assert seen == list(reversed(everything)), "every event once, newest first"
    cut = everything[len(everything) // 2]
    older = events(api, order="desc", before=cut, limit=1000)["events"]
    assert [e["position"] for e in older] == [p for p in reversed(everything) if p < cut]
    bounded = events(api, before=cut, limit=1000)
    assert [e["position"] for e in bounded["events"]] == [p for p in everything if p < cut]
    assert bounded["next-before"] is None
    tables = events(api, order="desc", type="io.icelog.table.", limit=2)["events"]
    assert [e["subject"] for e in tables] == ["db.c", "db.b"]
    for bad in ({"order": "newest"}, {"before": "x"}, {"before": str(2**65)}):
        assert api.client.get(f"{ROOT}/events", params=bad).status_code == 400


def test_filters_and_a_callers_own_writes(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["sales"]})
    api.post("/namespaces", {"namespace": ["sales", "eu"]})
    api.post("/namespaces", {"namespace": ["hr"]})
    table = create_table(api, "sales", "orders")["metadata"]["table-uuid"]
    create_table(api, "hr", "people")
    commit = api.post(
        "/namespaces/sales/tables/orders",
        {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
        headers={"X-Request-Id": "req-42"},
    )
    assert commit.status_code == 200
    # Read-your-writes: the commit is listed at once, without waiting for the indexer.
    [committed] = events(api, type="io.icelog.table.committed")["events"]
    assert committed["tabular-id"] == table
    assert committed["request-id"] == "req-42"
    assert committed["namespace"] == "sales" and committed["subject"] == "sales.orders"
    assert committed["data"]["updates"] == [{"action": "set-properties", "updates": {"k": "v"}}]
    assert committed["warehouse-id"] == api.prefix
    sales = {e["namespace"] for e in events(api, namespace="sales", limit=1000)["events"]}
    assert sales == {"sales", "sales.eu"}, "a namespace filter includes nested namespaces"
    # `_` and `%` in a filter are the characters, and case counts (SQLite's LIKE ignored it).
    for levels in (["s_les"], ["sa%"], ["SALES"]):
        api.post("/namespaces", {"namespace": levels})
    for name in ("s_les", "sa%", "SALES"):
        found = {e["namespace"] for e in events(api, namespace=name, limit=1000)["events"]}
        assert found == {name}, (name, found)
    assert events(api, type="io.icelog.table_")["events"] == []
    assert events(api, type="IO.ICELOG.")["events"] == []
    assert all(e["tabular-id"] == table for e in events(api, **{"tabular-id": table})["events"])
    assert events(api, actor="nobody")["events"] == []
    everything = events(api, limit=1000)["events"]
    middle = everything[len(everything) // 2]["time"]
    later = events(api, since=middle, limit=1000)["events"]
    earlier = events(api, until=middle, limit=1000)["events"]
    assert len(later) + len(earlier) == len(everything)
    assert all(e["time"] >= middle for e in later)
    # A position beyond 64 bits is a 400, not a database overflow (found by the fuzz).
    huge = str(2**65)
    for bad in ({"since": "yesterday"}, {"after": "x"}, {"tabular-id": "nope"}, {"after": huge}):
        assert api.client.get(f"{ROOT}/events", params=bad).status_code == 400
    assert api.client.get(f"{ROOT}/as-of", params={"position": huge}).status_code == 400


def test_table_and_view_history(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    table = create_table(api, "db", "t")["metadata"]["table-uuid"]
    for n in range(3):
        api.post(
            "/namespaces/db/tables/t",
            {"updates": [{"action": "set-properties", "updates": {"n": str(n)}}]},
        )
    api.post(
        "/tables/rename",
        {
            "source": {"namespace": ["db"], "name": "t"},
            "destination": {"namespace": ["db"], "name": "t2"},
        },
    )
    history = api.client.get(f"{ROOT}/warehouse/{api.prefix}/table/{table}/history").json()
    kinds = [e["type"].split(".")[3] for e in history["events"]]
    assert kinds == ["created", "committed", "committed", "committed", "renamed"]
    assert [e["version"] for e in history["events"]] == [1, 2, 3, 4, 5]
    assert history["events"][-1]["subject"] == "db.t2"
    view = create_view(api, "v").json()["metadata"]["view-uuid"]
    view_history = api.client.get(f"{ROOT}/warehouse/{api.prefix}/view/{view}/history")
    assert [e["type"] for e in view_history.json()["events"]] == ["io.icelog.view.created.v1"]
    unknown = "11111111-1111-1111-1111-111111111111"
    missing = api.client.get(f"{ROOT}/warehouse/{unknown}/table/{table}/history")
    assert missing.status_code == 404


def test_the_catalog_as_of_a_past_position_and_time(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"], "properties": {"owner": "ann"}})
    first = create_table(api, "db", "t")
    then = api.position()
    then_time = events(api, after=then - 1)["events"][0]["time"]
    commit = api.post(
        "/namespaces/db/tables/t",
        {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
    )
    assert commit.status_code == 200
    api.post("/namespaces/db/properties", {"updates": {"owner": "bob"}, "removals": []})
    create_table(api, "db", "u")
    api.delete("/namespaces/db/tables/u")
    create_view(api, "v")

    def at(**params: Any) -> Any:
        response = api.client.get(f"{ROOT}/as-of", params=params)
        assert response.status_code == 200, response.text
        return response.json()

    for past in (at(position=then), at(time=then_time)):
        assert past["position"] == then
        [warehouse] = past["warehouses"]
        [ns] = warehouse["namespaces"]
        assert ns["namespace"] == ["db"] and ns["properties"] == {"owner": "ann"}
        assert [(t["name"], t["metadata-location"]) for t in ns["tables"]] == [
            ("t", first["metadata-location"])
        ]
        assert ns["views"] == []
        assert past["next-page-token"] is None, "one page holds it all"
    now = at(position=api.position(), **{"warehouse-id": api.prefix})
    [ns] = now["warehouses"][0]["namespaces"]
    assert ns["properties"] == {"owner": "bob"}
    assert [t["name"] for t in ns["tables"]] == ["t"], "u was dropped"
    assert ns["tables"][0]["metadata-location"] == commit.json()["metadata-location"]
    assert [v["name"] for v in ns["views"]] == ["v"]
    assert at(position=0)["warehouses"] == []
    for bad in ({}, {"position": 1, "time": then_time}, {"time": "soon"}):
        assert api.client.get(f"{ROOT}/as-of", params=bad).status_code == 400

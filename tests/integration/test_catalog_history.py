"""The catalog history behind `GET /management/v1/as-of` (projections/catalog_history.py):
as-of against a plain in-memory fold of the log at every position, paging that gives every
object exactly once in a stable order, rebuild from scratch, bad page parameters (both
backends)."""

from __future__ import annotations

import base64
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icelog.api.event_log import AsOfRequest, Indexer, catalog_document
from icelog.domain.context import RequestContext
from icelog.domain.identifiers import SEPARATOR, NamespaceName, TabularName
from icelog.domain.namespace import Namespace
from icelog.domain.project import Project
from icelog.domain.table import Table
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse
from icelog.projections import as_of
from icelog.projections.event_index import EventFilter
from tests.integration.conftest import SCHEMA, Api, create_table
from tests.integration.test_soft_delete import set_profile, undrop
from tests.integration.test_views_api import VIEW_SCHEMA, create_view, version
from tests.support.commands import create_plain_table

ROOT = "/management/v1"
NIL = "00000000-0000-0000-0000-000000000000"


# -- the reference: the original in-memory fold (what as-of computed before the history) -----
@dataclass
class _Tabular:
    kind: str
    warehouse_id: str
    namespace: tuple[str, ...]
    name: str
    metadata_location: str
    state: str = "live"


@dataclass
class Reference:
    position: int = 0
    time: str | None = None
    projects: dict[str, str] = field(default_factory=dict)
    warehouses: dict[str, dict[str, Any]] = field(default_factory=dict)
    namespaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    tabulars: dict[str, _Tabular] = field(default_factory=dict)

    def apply(self, position: int, event: Any) -> None:
        self.position, self.time = position, event.timestamp.isoformat()
        agg = str(event.originator_id)
        if isinstance(event, (Project.Created, Project.Renamed)):
            self.projects[agg] = event.name
        elif isinstance(event, Project.Deleted):
            self.projects.pop(agg, None)
        elif isinstance(event, Warehouse.Created):
            self.warehouses[agg] = {"name": event.name, "project-id": str(event.project_id)}
        elif isinstance(event, Warehouse.Renamed) and agg in self.warehouses:
            self.warehouses[agg]["name"] = event.name
        elif isinstance(event, Warehouse.Deleted):
            self.warehouses.pop(agg, None)
        elif isinstance(event, Namespace.Event):
            self._namespace(agg, event)
        elif isinstance(event, (Table.Event, View.Event)):
            self._tabular(agg, event)

    def _namespace(self, agg: str, event: Any) -> None:
        if isinstance(event, (Namespace.Created, Namespace.Recreated)):
            self.namespaces[agg] = {
                "warehouse-id": str(event.warehouse_id),
                "levels": tuple(event.levels),
                "properties": dict(event.properties),
            }
        elif agg in self.namespaces and isinstance(event, Namespace.PropertiesUpdated):
            for key in event.removed:
                self.namespaces[agg]["properties"].pop(key, None)
            self.namespaces[agg]["properties"].update(event.updated)
        elif agg in self.namespaces and isinstance(event, Namespace.Dropped):
            del self.namespaces[agg]

    def _tabular(self, agg: str, event: Any) -> None:
        if isinstance(event, (Table.Created, Table.Registered, View.Created, View.Registered)):
            self.tabulars[agg] = _Tabular(
                "view" if isinstance(event, View.Event) else "table",
                str(event.warehouse_id),
                tuple(event.namespace),
                event.name,
                event.metadata_location,
            )
            return
        found = self.tabulars.get(agg)
        if found is None:
            return
        if isinstance(event, (Table.Committed, View.Replaced)):
            found.metadata_location = event.metadata_location
        elif isinstance(event, (Table.Renamed, View.Renamed, Table.Undropped, View.Undropped)):
            found.namespace, found.name, found.state = tuple(event.namespace), event.name, "live"
        elif isinstance(event, (Table.SoftDropped, View.SoftDropped)):
            found.state = "soft-deleted"
        elif isinstance(event, (Table.Dropped, View.Dropped, Table.Expired, View.Expired)):
            found.state = "dropped"

    def canonical(self) -> dict[str, Any]:
        namespaces = {
            (ns["warehouse-id"], ns["levels"]): ns["properties"]
            for ns in self.namespaces.values()
            if ns["warehouse-id"] in self.warehouses
        }
        return {
            "position": self.position,
            "time": self.time,
            "projects": [{"project-id": p, "name": n} for p, n in sorted(self.projects.items())],
            "warehouses": {w: (i["name"], i["project-id"]) for w, i in self.warehouses.items()},
            "namespaces": namespaces,
            "tabulars": {
                tid: (t.warehouse_id, t.namespace, f"{t.kind}s", t.name, t.metadata_location)
                + ((True,) if t.state == "soft-deleted" else ())
                for tid, t in self.tabulars.items()
                if t.state != "dropped" and (t.warehouse_id, t.namespace) in namespaces
            },
        }


def logged(api: Api) -> list[tuple[int, Any]]:
    catalog = api.services.catalog
    found = catalog.app.recorder.select_notifications(
        start=0, limit=1_000_000, inclusive_of_start=False
    )
    return [(n.id, catalog.app.mapper.to_domain_event(n)) for n in found]


# -- reading as-of page by page ----------------------------------------------------------------
def as_of_pages(api: Api, page_size: int | None = None, **params: Any) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = []
    token = None
    while True:
        query = {**params, **({"page-size": page_size} if page_size else {})}
        if token is not None:
            query["page-token"] = token
        response = api.client.get(f"{ROOT}/as-of", params=query)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        token = pages[-1]["next-page-token"]
        if token is None:
            return pages
        assert len(pages) < 20_000, "paging does not end"


def merged(pages: list[dict[str, Any]], page_size: int) -> dict[str, Any]:
    """The pages as one canonical catalog, checking that every namespace, table and view
    comes exactly once, no page holds more than `page_size` of them, and they come in the
    order (warehouse id, namespace levels, kind, name, id)."""
    first = pages[0]
    found: dict[str, Any] = {
        "position": first["position"],
        "time": first["time"],
        "projects": first["projects"],
        "warehouses": {},
        "namespaces": {},
        "tabulars": {},
    }
    order: list[tuple[str, str, int, str, str]] = []
    for page in pages:
        assert {k: page[k] for k in ("position", "time", "projects")} == {
            k: first[k] for k in ("position", "time", "projects")
        }
        before = len(order)
        for warehouse in page["warehouses"]:
            _merge_warehouse(found, order, warehouse)
        assert len(order) - before <= page_size
    assert order == sorted(order), "a stable order across pages"
    return found


def _merge_warehouse(found: dict[str, Any], order: list[Any], warehouse: dict[str, Any]) -> None:
    wid = warehouse["warehouse-id"]
    info = (warehouse["name"], warehouse["project-id"])
    assert found["warehouses"].setdefault(wid, info) == info
    for ns in warehouse["namespaces"]:
        levels = tuple(ns["namespace"])
        key = (wid, levels)
        if ns.get("continued"):
            assert found["namespaces"][key] == ns["properties"], "continues an earlier page"
        else:
            assert key not in found["namespaces"], f"{key} twice"
            found["namespaces"][key] = ns["properties"]
            order.append((wid, SEPARATOR.join(levels), 2, "", ""))
        for kind, rank in (("tables", 3), ("views", 4)):
            for item in ns[kind]:
                assert item["id"] not in found["tabulars"], f"{item['name']} twice"
                found["tabulars"][item["id"]] = (
                    wid,
                    levels,
                    kind,
                    item["name"],
                    item["metadata-location"],
                ) + ((True,) if item.get("soft-deleted") else ())
                order.append((wid, SEPARATOR.join(levels), rank, item["name"], item["id"]))


def indexer_of(api: Api) -> Indexer:
    indexer: Indexer = api.client.app.state.indexer  # type: ignore[attr-defined]
    return indexer


# -- a history with every kind of change -------------------------------------------------------
def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if status == 200 else None


def commit(api: Api, ns: str, name: str, n: int) -> None:
    update = {"action": "set-properties", "updates": {"n": str(n)}}
    ok(api.post(f"/namespaces/{ns}/tables/{name}", {"updates": [update]}))


def rename(api: Api, kind: str, source: tuple[str, str], destination: tuple[str, str]) -> None:
    body = {
        "source": {"namespace": [source[0]], "name": source[1]},
        "destination": {"namespace": [destination[0]], "name": destination[1]},
    }
    ok(api.post(f"/{kind}/rename", body), 204)


def make_history(api: Api, tmp_path: Path) -> None:
    """Projects, warehouses, namespaces, tables and views going through every change the
    fold knows."""
    c = api.client
    set_profile(api, {"type": "soft", "expiration-seconds": 3600})
    project = ok(c.post(f"{ROOT}/project", json={"project-name": "analytics"}))["project-id"]
    headers = {"x-project-id": project}
    ok(c.post(f"{ROOT}/project/rename", json={"new-name": "bi"}, headers=headers), 204)
    profile = {"type": "file", "base-location": f"file://{tmp_path / 'lake'}"}
    lake = ok(
        c.post(
            f"{ROOT}/warehouse",
            json={"warehouse-name": "lake", "project-id": NIL, "storage-profile": profile},
        )
    )["warehouse-id"]
    ok(c.post(f"/catalog/v1/{lake}/namespaces", json={"namespace": ["n"]}))

    ok(api.post("/namespaces", {"namespace": ["db"], "properties": {"owner": "ann", "x": "1"}}))
    ok(api.post("/namespaces", {"namespace": ["db", "sub"]}))
    ok(api.post("/namespaces", {"namespace": ["other"]}))
    for name in ("t", "u", "w", "x"):
        create_table(api, "db", name)
    create_table(api, "db%1Fsub", "deep")
    commit(api, "db", "t", 1)
    commit(api, "db", "t", 2)
    body = {"updates": {"owner": "bob"}, "removals": ["x"]}
    ok(api.post("/namespaces/db/properties", body))
    rename(api, "tables", ("db", "t"), ("other", "t2"))
    commit(api, "other", "t2", 3)
    rename(api, "tables", ("db", "u"), ("db", "u2"))

    w_id = api.get("/namespaces/db/tables/w").json()["metadata"]["table-uuid"]
    ok(api.delete("/namespaces/db/tables/w"), 204)  # soft
    ok(undrop(api, {"type": "table", "id": w_id}), 204)
    ok(api.delete("/namespaces/db/tables/w"), 204)  # soft again, stays so

    ok(create_view(api, "v"))
    replaced = [
        {"action": "add-view-version", "view-version": version("SELECT 2", version_id=2)},
        {"action": "set-current-view-version", "view-version-id": -1},
    ]
    ok(api.post("/namespaces/db/views/v", {"updates": replaced}))
    rename(api, "views", ("db", "v"), ("other", "v2"))
    ok(create_view(api, "v3"))

    set_profile(api, {"type": "hard"})
    ok(api.delete("/namespaces/db/tables/u2"), 204)  # dropped
    ok(api.delete("/namespaces/db/views/v3"), 204)
    set_profile(api, {"type": "soft", "expiration-seconds": 0})
    ok(api.delete("/namespaces/db/tables/x"), 204)
    assert api.run_tasks() >= 1  # x expires

    # A namespace dropped and recreated; one dropped with a soft-deleted table inside.
    ok(api.post("/namespaces", {"namespace": ["tmp"], "properties": {"k": "1"}}))
    ok(api.delete("/namespaces/tmp"), 204)
    ok(api.post("/namespaces", {"namespace": ["tmp"], "properties": {"k": "2"}}))
    set_profile(api, {"type": "soft", "expiration-seconds": 3600})
    ok(api.post("/namespaces", {"namespace": ["gone"]}))
    create_table(api, "gone", "kept")
    ok(api.delete("/namespaces/gone/tables/kept"), 204)
    api.delete("/namespaces/gone")  # refused or not, the fold decides what shows
    ok(api.post("/namespaces/other/views", _view_body("ov")))

    ok(c.post(f"{ROOT}/warehouse/{lake}/rename", json={"new-name": "pond"}), 204)
    ok(c.delete(f"/catalog/v1/{lake}/namespaces/n"), 204)
    ok(c.delete(f"{ROOT}/warehouse/{lake}"), 204)
    ok(c.delete(f"{ROOT}/project/{project}"), 204)


def _view_body(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "schema": VIEW_SCHEMA,
        "view-version": version("SELECT 1"),
        "properties": {},
    }


def test_as_of_equals_a_fold_of_the_log_at_every_position(api: Api, tmp_path: Path) -> None:
    make_history(api, tmp_path)
    reference = Reference()
    events = logged(api)
    checked = 0
    for position in range(events[-1][0] + 1):
        while events and events[0][0] <= position:
            reference.apply(*events.pop(0))
        expected = reference.canonical()
        assert merged(as_of_pages(api, 2, position=position), 2) == expected, position
        checked += 1
        if position % 25 == 0:
            assert merged(as_of_pages(api, position=position), 1000) == expected
    assert checked > 90  # a long history: every kind of change, at every position
    now = reference.canonical()
    shown = {t[3]: t for t in now["tabulars"].values()}
    assert set(shown) == {"t2", "w", "deep", "v2", "ov"} | ({"kept"} & set(shown))
    assert shown["w"][-1] is True, "soft-deleted, flagged"
    assert now["namespaces"][(api.prefix, ("db",))] == {"owner": "bob"}
    assert now["namespaces"][(api.prefix, ("tmp",))] == {"k": "2"}
    # A time resolves to the last event at or before it.
    [event] = api.client.get(f"{ROOT}/events", params={"after": 30, "limit": 1}).json()["events"]
    at_time = merged(as_of_pages(api, 3, time=event["time"]), 3)
    assert at_time["position"] >= 31 and at_time["time"] == event["time"]


def test_pages_cover_a_large_catalog_exactly_once(api: Api) -> None:
    ctx = RequestContext("test", "fill")
    catalog, wid = api.services.catalog, api.services.warehouse_for_prefix(None)
    layout = {("big",): 1200, ("big", "inner"): 1200, ("other",): 97}
    for levels, count in layout.items():
        namespace = NamespaceName(levels)
        catalog.namespaces.create_namespace(ctx, wid, namespace, {"n": str(count)})
        for i in range(count):
            create_plain_table(catalog, ctx, wid, TabularName(namespace, f"t{i:04d}"), SCHEMA)
    position = api.position()
    pages = as_of_pages(api, 1000, position=position)
    assert [_items(p) for p in pages] == [1000, 1000, 500]
    whole = merged(pages, 1000)
    assert len(whole["namespaces"]) + len(whole["tabulars"]) == 2500
    assert merged(as_of_pages(api, position=position), 1000) == whole, "default page size"
    assert merged(as_of_pages(api, 37, position=position), 37) == whole
    only = merged(as_of_pages(api, 999, position=position, **{"warehouse-id": api.prefix}), 999)
    assert only == whole
    other = "11111111-1111-1111-1111-111111111111"
    assert as_of_pages(api, 10, position=position, **{"warehouse-id": other})[0]["warehouses"] == []


def _items(page: dict[str, Any]) -> int:
    return sum(
        (0 if ns.get("continued") else 1) + len(ns["tables"]) + len(ns["views"])
        for w in page["warehouses"]
        for ns in w["namespaces"]
    )


def test_rebuilt_from_scratch_the_history_equals_the_live_one(api: Api) -> None:
    ok(api.post("/namespaces", {"namespace": ["db"], "properties": {"a": "1"}}))
    table = create_table(api, "db", "t")["metadata"]["table-uuid"]
    for n in range(5):
        commit(api, "db", "t", n)
    create_table(api, "db", "gone")
    ok(api.delete("/namespaces/db/tables/gone"), 204)
    ok(api.post("/namespaces/db/properties", {"updates": {"a": "2"}, "removals": []}))
    rename(api, "tables", ("db", "t"), ("db", "t2"))
    indexer = indexer_of(api)
    indexer.catch_up()
    live = indexer.history.rows()
    answer = as_of_pages(api, 1, position=api.position())
    versions = [r for r in live[0] if r[4] == table]
    assert len(versions) == 2, "commits add metadata locations, not versions"
    assert len([r for r in live[1] if r[0] == table]) == 6

    indexer.history.drop()
    indexer.history.ensure_schema()
    assert indexer.history.position() == 0
    # Two indexers (two servers) catching up at once: each event is folded once.
    other = Indexer(api.services)
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda i: i.catch_up(batch=7), (indexer, other)))
    assert max(done) == len(logged(api))
    assert indexer.history.rows() == live
    assert as_of_pages(api, 1, position=api.position()) == answer
    indexed = [e["position"] for e in indexer.index.query(EventFilter(limit=1000))]
    assert indexed == [p for p, _ in logged(api)], "the event index was not written twice"

    # A batch folded twice (two indexers, or a retry) is folded once.
    head = api.position()
    events = [(p, e) for p, e in logged(api) if p > head - 5]
    indexer.history.write_batch(indexer.index, [], events)
    assert indexer.history.rows() == live


def test_streamed_document_equals_the_pages_merged(api: Api) -> None:
    ok(api.post("/namespaces", {"namespace": ["db"], "properties": {"p": "q"}}))
    ok(api.post("/namespaces", {"namespace": ["db", "a"]}))
    ok(api.post("/namespaces", {"namespace": ["e"]}))
    for name in ("t1", "t2", "t3"):
        create_table(api, "db", name)
    create_table(api, "e", "t")
    ok(create_view(api, "v1"))
    ok(create_view(api, "v2"))
    position = api.position()
    [single] = as_of_pages(api, position=position)
    del single["next-page-token"]
    indexer = indexer_of(api)
    for size in (1, 2, 3, 4, 1000):
        ask = AsOfRequest(position=position, time_us=None, page_size=size)
        document = json.loads("".join(catalog_document(indexer, ask)))
        assert document == single, size


def test_bad_page_sizes_and_tokens_are_400(api: Api) -> None:
    ok(api.post("/namespaces", {"namespace": ["db"]}))
    create_table(api, "db", "t")
    create_table(api, "db", "u")
    position = api.position()
    for size in ("0", "-1", "1001", "x", str(2**65)):
        bad = api.client.get(f"{ROOT}/as-of", params={"position": position, "page-size": size})
        assert bad.status_code == 400, size
    first = as_of_pages(api, 1, position=position)[0]
    token = first["next-page-token"]
    assert token
    forged = [
        "garbage!",
        "é",
        base64.urlsafe_b64encode(b"{}").decode(),
        base64.urlsafe_b64encode(b'[1, -1, null, ["a", "b", 1, "c", "d", 0]]').decode(),
        base64.urlsafe_b64encode(b'[2, 1, null, ["a", "b", 1, "c", "d", 0]]').decode(),
        base64.urlsafe_b64encode(b'[1, 1, null, ["a", "b", "1", "c", "d", 0]]').decode(),
        base64.urlsafe_b64encode(b'[1, 1, 7, ["a", "b", 1, "c", "d", 0]]').decode(),
        token[:-3],
    ]
    for raw in forged:
        bad = api.client.get(f"{ROOT}/as-of", params={"position": position, "page-token": raw})
        assert bad.status_code == 400, raw
    other = {"position": position, "page-token": token, "warehouse-id": api.prefix}
    assert api.client.get(f"{ROOT}/as-of", params=other).status_code == 400, "another filter"
    # A token keeps its position: later pages answer as of the first one.
    create_table(api, "db", "v")
    later = {"time": "2999-01-01T00:00:00Z", "page-token": token}
    rest = api.client.get(f"{ROOT}/as-of", params=later)
    assert rest.status_code == 200 and rest.json()["position"] == position


def test_a_page_reads_a_bounded_number_of_rows(api: Api, monkeypatch: Any) -> None:
    ok(api.post("/namespaces", {"namespace": ["db"]}))
    for name in ("a", "b", "c", "d", "e", "f", "g", "h"):
        create_table(api, "db", name)
    for name in ("a", "b", "c", "e", "f"):  # hard drops: versions the pages read and skip
        ok(api.delete(f"/namespaces/db/tables/{name}"), 204)
    position = api.position()
    whole = merged(as_of_pages(api, position=position), 1000)
    monkeypatch.setattr(as_of, "SCAN_BUDGET", 3)
    pages = as_of_pages(api, 2, position=position)
    assert merged(pages, 2) == whole
    assert any(_items(p) < 2 and p["next-page-token"] for p in pages), "ended short, went on"

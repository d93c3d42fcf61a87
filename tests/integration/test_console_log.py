"""The console's Log page (`/ui/events`) in-process, on both backends: as of a position it
lists nothing later, on every page; newest first; its type filter takes every spelling and
the rows show the one the events API uses; every position leads to a page that is there.
With authentication on, a user reads no event outside the warehouses they may read, whatever
as-of, type filter, paging or position they craft.

The same pages in Chromium: tests/e2e/test_console.py."""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

import pytest

from icelog.api.console.session import SESSION
from icelog.domain.identifiers import NamespaceName, namespace_id
from tests.integration.conftest import SCHEMA, Api, Authed, create_table
from tests.integration.test_views_api import create_view
from tests.support.callers import Caller

MGMT = "/management/v1"
NEXT = {"older": "data-older", "newer": "data-newer"}


def positions(html: str) -> list[int]:
    return [int(p) for p in re.findall(r"data-position>(\d+)<", html)]


def shown_types(html: str) -> list[str]:
    return re.findall(r"data-type>([^<]+)<", html)


def link(html: str, which: str) -> str | None:
    found = re.search(rf'href="([^"]+)" {NEXT[which]}', html)
    return None if found is None else found.group(1).replace("&amp;", "&")


def log_page(api: Api, url: str) -> str:
    response = api.client.get(url)
    assert response.status_code == 200, response.text
    return str(response.text)


def commit(api: Api, table: str, n: int) -> None:
    response = api.post(
        f"/namespaces/db/tables/{table}",
        {"updates": [{"action": "set-properties", "updates": {"n": str(n)}}]},
    )
    assert response.status_code == 200, response.text


def test_the_log_as_of_a_position_lists_nothing_later(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    for n in range(3):
        commit(api, "t", n)
    as_of = api.position()
    for n in range(3, 150):  # more than a page after the moment, and before it
        commit(api, "t", n)
    head = api.position()
    assert head > as_of + 100

    now = positions(log_page(api, "/ui/events"))
    assert now[0] == head and now == sorted(now, reverse=True), "newest first"

    html = log_page(api, f"/ui/events?as-of={as_of}")
    assert f"as of log position <strong>{as_of}</strong>" in html
    listed = positions(html)
    assert listed[0] == as_of and max(listed) == as_of
    assert listed == list(range(as_of, 0, -1)), "every event up to the moment, newest first"
    assert link(html, "older") is None and link(html, "newer") is None

    # Paged (a page is 100 events): the older pages and back again stay at or before it.
    later = head - 5
    html = log_page(api, f"/ui/events?as-of={later}")
    seen = positions(html)
    older = link(html, "older")
    while older is not None:
        assert "as-of=" in older
        html = log_page(api, older)
        seen += positions(html)
        older = link(html, "older")
    assert seen == list(range(later, 0, -1))
    newer = link(log_page(api, f"/ui/events?as-of={later}&before=20"), "newer")
    assert newer is not None
    assert max(positions(log_page(api, newer))) <= later

    # Crafted paging cannot reach past the moment.
    for crafted in (f"before={head + 10}", f"after={as_of - 1}", f"after={as_of}", "after=0"):
        shown = positions(log_page(api, f"/ui/events?as-of={as_of}&{crafted}"))
        assert all(p <= as_of for p in shown), crafted
    # As of a time: the last event at or before it.
    when = api.client.get(f"{MGMT}/events", params={"after": as_of - 1, "limit": 1})
    time = when.json()["events"][0]["time"]
    assert max(positions(log_page(api, f"/ui/events?{_q({'as-of': time})}"))) == as_of


def _q(params: dict[str, str]) -> str:
    from urllib.parse import urlencode

    return urlencode(params)


def test_the_type_filter_matches_the_spelling_the_rows_show(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    commit(api, "t", 1)
    every = shown_types(log_page(api, "/ui/events"))
    assert every and all(t.startswith("io.icelog.") for t in every), every
    for typed in ("io.icelog.table.", "icelog.table.", "table.", "table.committed", "io.icelog"):
        rows = shown_types(log_page(api, f"/ui/events?{_q({'type': typed})}"))
        assert rows, typed
        assert all(typed in t for t in rows), (typed, rows)
    committed = shown_types(log_page(api, "/ui/events?type=table.committed"))
    assert committed == ["io.icelog.table.committed.v1"]
    assert shown_types(log_page(api, "/ui/events?type=nothing.like.this")) == []


def test_every_position_leads_to_a_page_that_is_there(api: Api) -> None:
    """Whatever happened since (renamed, dropped), an event's position leads to the object
    it changed, as it was then: never to a page that is not found."""
    api.post("/namespaces", {"namespace": ["db"], "properties": {"owner": "ann"}})
    api.post("/namespaces/db/properties", {"updates": {"owner": "bob"}, "removals": []})
    create_table(api, "db", "t")
    commit(api, "t", 1)
    rename = {
        "source": {"namespace": ["db"], "name": "t"},
        "destination": {"namespace": ["db"], "name": "t2"},
    }
    assert api.post("/tables/rename", rename).status_code == 204
    assert api.delete("/namespaces/db/tables/t2").status_code == 204
    assert create_view(api, "v").status_code == 200
    api.post("/namespaces", {"namespace": ["gone"]})
    assert api.delete("/namespaces/gone").status_code == 204
    project = api.client.post(f"{MGMT}/project", json={"project-name": "p"}).json()["project-id"]
    assert api.client.post(f"{MGMT}/project/{project}/rename", json={"new-name": "p2"}).is_success
    assert api.client.delete(f"{MGMT}/project/{project}").status_code == 204

    def lands(position: int) -> str:
        moved = api.client.get(f"/ui/events/{position}", follow_redirects=False)
        assert moved.status_code == 303, (position, moved.text)
        target = str(moved.headers["location"])
        shown = api.client.get(target)
        assert shown.status_code == 200, (position, target, shown.text)
        return target

    for position in range(1, api.position() + 1):
        lands(position)

    def position_of(event_type: str) -> int:
        found = api.client.get(f"{MGMT}/events", params={"type": event_type}).json()["events"]
        return int(found[-1]["position"])

    committed, dropped = (
        position_of("io.icelog.table.committed"),
        position_of("io.icelog.table.dropped"),
    )
    assert "/table?ns=db&name=t&" in lands(committed) and f"as-of={committed}" in lands(committed)
    # The drop leads to the table as it was just before it, under its new name.
    assert lands(dropped).endswith(f"/table?ns=db&name=t2&as-of={dropped - 1}")
    assert api.client.get("/ui/events/0").status_code == 400
    assert api.client.get(f"/ui/events/{api.position() + 5}").status_code == 404


# -- authentication on ---------------------------------------------------------------------------
def _as(authed: Authed, who: Caller, url: str, **kwargs: Any) -> Any:
    """A console page as `who` (their session cookie)."""
    headers = {"Cookie": f"{SESSION}={who.token}"}
    return authed.client.get(url, headers=headers, follow_redirects=False, **kwargs)


@pytest.mark.attack
def test_a_user_reads_no_event_outside_the_warehouses_they_may_read(
    authed: Authed, tmp_path: Any
) -> None:
    """eve may describe her own warehouse and nothing else; alice's `hr.payroll` lives in
    the default warehouse. No as-of, type filter, paging or position shows eve its events."""
    alice, eve = Caller(authed, "alice", "Alice"), Caller(authed, "eve", "Eve")
    alice.ok("POST", f"{MGMT}/bootstrap", {"accept-terms-of-use": True})
    eve.ok("GET", f"{MGMT}/whoami")
    default = alice.ok("GET", "/catalog/v1/config", params={"warehouse": "default"})
    hidden = default["overrides"]["prefix"]
    storage = {"type": "file", "base-location": (tmp_path / "eve").as_uri()}
    own = alice.ok(
        "POST", f"{MGMT}/warehouse", {"warehouse-name": "eve", "storage-profile": storage}
    )
    mine = own["warehouse-id"]
    alice.ok(
        "POST",
        f"{MGMT}/permissions/warehouse/{mine}/assignments",
        {"writes": [{"type": "describe", "user": eve.id}]},
    )
    alice.ok("POST", f"/catalog/v1/{mine}/namespaces", {"namespace": ["open"]})
    alice.ok("POST", f"/catalog/v1/{hidden}/namespaces", {"namespace": ["hr"]})
    alice.ok(
        "POST", f"/catalog/v1/{hidden}/namespaces/hr/tables", {"name": "payroll", "schema": SCHEMA}
    )
    secret = authed.events()[-1].id  # the payroll table's creation
    alice.ok("POST", f"/catalog/v1/{mine}/namespaces", {"namespace": ["later"]})

    # Her own warehouse's log she reads, newest first, and only its events.
    own_log = _as(authed, eve, f"/ui/events?warehouse-id={mine}")
    assert own_log.status_code == 200, own_log.text
    assert positions(own_log.text) and secret not in positions(own_log.text)
    assert "payroll" not in own_log.text and "hr" not in shown_types(own_log.text)
    for crafted in (
        f"/ui/events?warehouse-id={mine}&type=io.icelog.table.",
        f"/ui/events?warehouse-id={mine}&type=%25",
        f"/ui/events?warehouse-id={mine}&type=_",
        f"/ui/events?warehouse-id={mine}&before={secret + 1}",
        f"/ui/events?warehouse-id={mine}&after={secret - 1}",
        f"/ui/events?warehouse-id={mine}&as-of={secret}",
        f"/ui/events?warehouse-id={mine}&namespace=hr",
        f"/ui/events?warehouse-id={hidden}",
        f"/ui/events?warehouse-id={hidden}&as-of={secret}",
        f"/ui/events?as-of={secret}",
        f"/ui/events?type=io.icelog.table.&after={secret - 1}",
        "/ui/events",
    ):
        answer = _as(authed, eve, crafted)
        assert answer.status_code in (200, 403, 404), (crafted, answer.status_code)
        assert secret not in positions(answer.text), crafted
        assert "payroll" not in answer.text, crafted
    # A position of the hidden warehouse leads nowhere, with or without her warehouse.
    for crafted in (
        f"/ui/events/{secret}?warehouse-id={mine}",
        f"/ui/events/{secret}?warehouse-id={hidden}",
        f"/ui/events/{secret}",
        f"/ui/events/{secret}?warehouse-id={mine}&as-of={secret}",
    ):
        answer = _as(authed, eve, crafted)
        assert answer.status_code in (403, 404), (crafted, answer.status_code)
        assert "location" not in answer.headers and "payroll" not in answer.text, crafted
    # carol holds `select` on another namespace of the payroll's warehouse: its log must not
    # show her the payroll either (refused, or without it), nor lead her to it.
    carol = Caller(authed, "carol", "Carol")
    carol.ok("GET", f"{MGMT}/whoami")
    alice.ok("POST", f"/catalog/v1/{hidden}/namespaces", {"namespace": ["shared"]})
    shared = namespace_id(UUID(hidden), NamespaceName(("shared",)))
    alice.ok(
        "POST",
        f"{MGMT}/permissions/namespace/{shared}/assignments",
        {"writes": [{"type": "select", "user": carol.id}]},
    )
    for crafted in (
        f"/ui/events?warehouse-id={hidden}",
        f"/ui/events?warehouse-id={hidden}&namespace=hr",
        f"/ui/events?warehouse-id={hidden}&type=table.&before={secret + 1}",
        f"/ui/events/{secret}?warehouse-id={hidden}",
    ):
        answer = _as(authed, carol, crafted)
        assert answer.status_code in (200, 403, 404), (crafted, answer.status_code)
        assert secret not in positions(answer.text), crafted
        assert "location" not in answer.headers and "payroll" not in answer.text, crafted
    # The admin reads the whole log, the payroll table's creation included.
    assert secret in positions(_as(authed, alice, "/ui/events").text)


def test_a_reader_of_one_warehouse_log_follows_its_positions(authed: Authed, tmp_path: Any) -> None:
    """Only the server admin reads the catalog as of a past moment, so for eve (`describe`
    on her warehouse) a position leads to the object as it is now: a table under its
    current name, a namespace, the warehouse; and to the Log at the event when the object
    is gone. Never to a refusal."""
    alice, eve = Caller(authed, "alice", "Alice"), Caller(authed, "eve", "Eve")
    alice.ok("POST", f"{MGMT}/bootstrap", {"accept-terms-of-use": True})
    eve.ok("GET", f"{MGMT}/whoami")
    storage = {"type": "file", "base-location": (tmp_path / "eve").as_uri()}
    mine = alice.ok(
        "POST", f"{MGMT}/warehouse", {"warehouse-name": "eve", "storage-profile": storage}
    )["warehouse-id"]
    alice.ok(
        "POST",
        f"{MGMT}/permissions/warehouse/{mine}/assignments",
        {"writes": [{"type": "describe", "user": eve.id}]},
    )
    cat = f"/catalog/v1/{mine}"

    def last(kind: str) -> int:
        return max(int(e.id) for e in authed.events() if f".{kind}." in str(e.topic))

    created_warehouse = last("warehouse.created")
    alice.ok("POST", f"{cat}/namespaces", {"namespace": ["db"]})
    created_ns = last("namespace.created")
    alice.ok("POST", f"{cat}/namespaces/db/tables", {"name": "t", "schema": SCHEMA})
    created_table = last("table.created")
    alice.ok("POST", f"{cat}/tables/rename", {
        "source": {"namespace": ["db"], "name": "t"},
        "destination": {"namespace": ["db"], "name": "t2"},
    })  # fmt: skip
    alice.ok("POST", f"{cat}/namespaces/db/tables", {"name": "gone", "schema": SCHEMA})
    created_gone = last("table.created")
    alice.ok("DELETE", f"{cat}/namespaces/db/tables/gone")

    def lands(position: int) -> str:
        answer = _as(authed, eve, f"/ui/events/{position}?warehouse-id={mine}")
        assert answer.status_code == 303, (position, answer.status_code, answer.text[:300])
        target = str(answer.headers["location"])
        page = _as(authed, eve, target)
        assert page.status_code == 200, (target, page.status_code)
        return target

    assert lands(created_table) == f"/ui/warehouses/{mine}/table?ns=db&name=t2"
    assert lands(created_ns) == f"/ui/warehouses/{mine}/namespace?ns=db"
    assert lands(created_warehouse) == f"/ui/warehouses/{mine}"
    at_event = lands(created_gone)
    assert at_event.startswith("/ui/events?") and f"before={created_gone + 1}" in at_event
    assert created_gone == positions(_as(authed, eve, at_event).text)[0]

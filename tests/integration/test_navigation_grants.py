"""A right inside a warehouse lets its holder connect and find their way to it, as
Lakekeeper's bottom-up navigation does: a grant on a namespace, a table, a view or a nested
namespace gives `navigate` on every container above it — the warehouse's config, the
containers' metadata, their lists filtered to the way down — and nothing more: no other
namespace's contents, no create, nothing read from the warehouse whole. What lies off their
way still answers exactly as what does not exist (docs/auth.md, "What each right
allows")."""

from __future__ import annotations

import time
from typing import Any
from uuid import UUID, uuid4

import pytest

from icelog.api.app import GRANT_CACHE_SECONDS
from icelog.domain.identifiers import NamespaceName, namespace_id
from tests.integration.conftest import SCHEMA, Authed
from tests.integration.test_authorization_cache import _replica
from tests.support.callers import Caller
from tests.support.hostile import view_body

MGMT = "/management/v1"


class Scene:
    """alice (admin) builds, in the default warehouse: sales.{orders, refunds},
    hr.salaries and the view hr.v, a.b.t, a.c.secret. Each reader holds one grant."""

    def __init__(self, authed: Authed) -> None:
        self.authed = authed
        self.alice = Caller(authed, "alice")
        self.alice.ok("POST", f"{MGMT}/bootstrap", {"accept-terms-of-use": True})
        config = self.alice.ok("GET", "/catalog/v1/config", params={"warehouse": "default"})
        self.wid = str(config["overrides"]["prefix"])
        self.base = f"/catalog/v1/{self.wid}"
        self.ids: dict[str, str] = {}
        for levels in (["sales"], ["hr"], ["a"], ["a", "b"], ["a", "c"]):
            self.alice.ok("POST", f"{self.base}/namespaces", {"namespace": levels})
        for ns, name in (("sales", "orders"), ("sales", "refunds"), ("hr", "salaries"),
                         ("a%1Fb", "t"), ("a%1Fc", "secret")):  # fmt: skip
            made = self.alice.ok(
                "POST", f"{self.base}/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA}
            )
            self.ids[name] = made["metadata"]["table-uuid"]
        view = self.alice.ok("POST", f"{self.base}/namespaces/hr/views", view_body("v", ["hr"]))
        self.ids["v"] = view["metadata"]["view-uuid"]

    def namespace_id(self, dotted: str) -> str:
        found = self.alice.ok(
            "GET",
            f"{MGMT}/warehouse/{self.wid}/namespace-id",
            params={"namespace": dotted.replace(".", "\x1f")},
        )
        return str(found["namespace-id"])

    def grant_path(self, kind: str, name: str) -> str:
        if kind == "namespace":
            return f"{MGMT}/permissions/namespace/{self.namespace_id(name)}/assignments"
        return f"{MGMT}/permissions/warehouse/{self.wid}/{kind}/{self.ids[name]}/assignments"

    def reader(self, subject: str, kind: str, name: str, relation: str = "select") -> Caller:
        """`subject`, holding `relation` on one object and nothing else."""
        who = Caller(self.authed, subject)
        body = {"writes": [{"type": relation, "user": who.id}]}
        self.alice.ok("POST", self.grant_path(kind, name), body)
        return who

    def revoke(self, who: Caller, kind: str, name: str, relation: str = "select") -> None:
        body = {"deletes": [{"type": relation, "user": who.id}]}
        self.alice.ok("POST", self.grant_path(kind, name), body)

    def namespaces(self, who: Caller, parent: str | None = None) -> list[list[str]]:
        params = {"parent": parent.replace(".", "\x1f")} if parent else {}
        found = who.ok("GET", f"{self.base}/namespaces", params=params)
        return list(found["namespaces"])

    def names(self, who: Caller, namespace: str, kind: str = "tables") -> list[str]:
        found = who.ok("GET", f"{self.base}/namespaces/{namespace}/{kind}")
        return [i["name"] for i in found["identifiers"]]


def _config(who: Caller, warehouse: str = "default") -> Any:
    return who("GET", "/catalog/v1/config", params={"warehouse": warehouse})


def _status(who: Caller, method: str, path: str, body: Any = None) -> int:
    return int(who(method, path, body).status_code)


def test_a_namespace_grant_connects_lists_its_way_and_reads(authed: Authed) -> None:
    scene = Scene(authed)
    bob = scene.reader("bob", "namespace", "sales")
    base = scene.base
    config = _config(bob)
    assert config.status_code == 200, config.text
    assert config.json()["overrides"]["prefix"] == scene.wid
    assert _config(bob, scene.wid).status_code == 200  # by id too
    assert scene.namespaces(bob) == [["sales"]]
    assert scene.names(bob, "sales") == ["orders", "refunds"]  # select: everything in it
    loaded = bob.ok("GET", f"{base}/namespaces/sales/tables/orders")
    assert loaded["metadata"]["table-uuid"] == scene.ids["orders"]
    # The warehouse's own page (what the console shows him), and his access there.
    assert bob.ok("GET", f"{MGMT}/warehouse/{scene.wid}")["name"] == "default"
    access = bob.ok("GET", f"{MGMT}/permissions/warehouse/{scene.wid}/access")
    allowed = set(access["allowed-actions"])
    assert {"get_config", "get_metadata", "list_namespaces"} <= allowed
    assert not allowed & {"create_namespace", "list_everything", "list_deleted_tabulars"}
    # Nothing beside his way: the sibling answers as an unknown namespace does.
    for path in ("/namespaces/hr", "/namespaces/hr/tables", "/namespaces/hr/views",
                 "/namespaces/hr/tables/salaries", "/namespaces/nothing",
                 "/namespaces/nothing/tables"):  # fmt: skip
        assert _status(bob, "GET", base + path) == 404, path
    hr = bob("GET", f"{base}/namespaces", params={"parent": "hr"})
    assert hr.status_code == 404 and "salaries" not in hr.text
    # No create at the warehouse root nor in his namespace (select is not create): 403,
    # as he sees both.
    assert _status(bob, "POST", f"{base}/namespaces", {"namespace": ["mine"]}) == 403
    made = bob("POST", f"{base}/namespaces/sales/tables", {"name": "x", "schema": SCHEMA})
    assert made.status_code == 403, made.text
    # What reads the warehouse whole is not his: its log, its soft-deleted tables, its tasks.
    assert _status(bob, "GET", f"{MGMT}/events?warehouse-id={scene.wid}") == 403
    assert _status(bob, "POST", f"{base}/events", {}) == 403
    assert _status(bob, "GET", f"{MGMT}/warehouse/{scene.wid}/deleted-tabulars") == 403
    assert _status(bob, "POST", f"{MGMT}/warehouse/{scene.wid}/task/list", {}) == 403


def test_a_table_grant_navigates_to_exactly_that_table(authed: Authed) -> None:
    scene = Scene(authed)
    carol = scene.reader("carol", "table", "orders")
    base = scene.base
    assert _config(carol).status_code == 200
    assert scene.namespaces(carol) == [["sales"]]
    assert scene.names(carol, "sales") == ["orders"]
    assert scene.names(carol, "sales", "views") == []  # on her way, so listed: empty
    # The namespace on her way: its metadata (Lakekeeper's can_get_metadata), not more.
    assert carol.ok("GET", f"{base}/namespaces/sales")["namespace"] == ["sales"]
    assert _status(carol, "HEAD", f"{base}/namespaces/sales") == 204
    assert _status(carol, "GET", f"{base}/namespaces/sales/tables/orders") == 200
    assert _status(carol, "GET", f"{base}/namespaces/sales/tables/refunds") == 404
    assert _status(carol, "GET", f"{base}/namespaces/sales/functions") == 403
    made = carol("POST", f"{base}/namespaces/sales/tables", {"name": "x", "schema": SCHEMA})
    assert made.status_code == 403, made.text
    update = {"removals": [], "updates": {"owner": "carol"}}
    assert _status(carol, "POST", f"{base}/namespaces/sales/properties", update) == 403


def test_a_nested_namespace_grant_opens_each_level_above_it(authed: Authed) -> None:
    scene = Scene(authed)
    erin = scene.reader("erin", "namespace", "a.b")
    base = scene.base
    assert _config(erin).status_code == 200
    assert scene.namespaces(erin) == [["a"]]
    assert scene.namespaces(erin, "a") == [["a", "b"]]
    assert scene.namespaces(erin, "a.b") == []
    assert scene.names(erin, "a") == []  # `a` is on her way: its list is hers, empty
    assert scene.names(erin, "a%1Fb") == ["t"]
    assert _status(erin, "GET", f"{base}/namespaces/a%1Fb/tables/t") == 200
    for path in ("/namespaces/a%1Fc", "/namespaces/a%1Fc/tables",
                 "/namespaces/a%1Fc/tables/secret"):  # fmt: skip
        assert _status(erin, "GET", base + path) == 404, path
    c = erin("GET", f"{base}/namespaces", params={"parent": "a\x1fc"})
    assert c.status_code == 404 and "secret" not in c.text
    assert _status(erin, "POST", f"{base}/namespaces", {"namespace": ["a", "z"]}) == 403


def test_a_view_grant_and_a_role_grant_navigate_alike(authed: Authed) -> None:
    scene = Scene(authed)
    dave = scene.reader("dave", "view", "v")
    assert scene.namespaces(dave) == [["hr"]]
    assert scene.names(dave, "hr", "views") == ["v"]
    assert scene.names(dave, "hr") == []  # not salaries
    assert _status(dave, "GET", f"{scene.base}/namespaces/hr/views/v") == 200
    # Through a role: frank is a member of `readers`, which holds select on `a.b`.
    frank = Caller(scene.authed, "frank")
    readers = scene.alice.ok("POST", f"{MGMT}/role", {"name": "readers"})
    scene.alice.ok(
        "POST", f"{MGMT}/permissions/role/{readers['id']}/assignments",
        {"writes": [{"type": "assignee", "user": frank.id}]},
    )  # fmt: skip
    scene.alice.ok(
        "POST", scene.grant_path("namespace", "a.b"),
        {"writes": [{"type": "select", "role": readers["id"]}]},
    )  # fmt: skip
    assert _config(frank).status_code == 200
    assert scene.namespaces(frank, "a") == [["a", "b"]]


def test_only_rights_that_show_an_object_open_the_way_to_it(authed: Authed) -> None:
    """`pass_grants` alone lets its holder see nothing (it passes on what they hold):
    no way in either — lists and loads agree."""
    scene = Scene(authed)
    gail = scene.reader("gail", "table", "orders", relation="pass_grants")
    assert _status(gail, "GET", f"{scene.base}/namespaces/sales/tables/orders") == 404
    assert _config(gail).status_code == 404
    assert _status(gail, "GET", f"{scene.base}/namespaces") == 404


def test_the_way_in_ends_with_the_grant_and_with_the_object(authed: Authed) -> None:
    scene = Scene(authed)
    bob = scene.reader("bob", "namespace", "sales")
    erin = scene.reader("erin", "table", "t")
    for _ in range(3):  # decisions now cached
        assert _config(bob).status_code == 200
        assert _status(bob, "GET", f"{MGMT}/warehouse/{scene.wid}") == 200
    scene.revoke(bob, "namespace", "sales")
    assert _config(bob).status_code == 404
    assert _status(bob, "GET", f"{MGMT}/warehouse/{scene.wid}") == 404
    assert _status(bob, "GET", f"{scene.base}/namespaces") == 404
    # A dropped table takes its grant, and with it the way to it.
    assert _status(erin, "GET", f"{scene.base}/namespaces", None) == 200
    assert _status(scene.alice, "DELETE", f"{scene.base}/namespaces/a%1Fb/tables/t") == 204
    assert _config(erin).status_code == 404
    assert _status(erin, "GET", f"{scene.base}/namespaces?parent=a") == 404


def test_another_replica_ends_the_way_in_within_the_cache_time(authed: Authed) -> None:
    scene = Scene(authed)
    bob = scene.reader("bob", "namespace", "sales")
    headers = {"Authorization": f"Bearer {bob.token}"}
    warehouse = f"{MGMT}/warehouse/{scene.wid}"
    with _replica(authed) as other:
        assert other.get(warehouse, headers=headers).status_code == 200  # cached there
        scene.revoke(bob, "namespace", "sales")  # on this replica
        time.sleep(GRANT_CACHE_SECONDS + 0.2)
        assert other.get(warehouse, headers=headers).status_code == 404
        config = other.get("/catalog/v1/config", params={"warehouse": "default"}, headers=headers)
        assert config.status_code == 404
        # A grant there counts at once (a refusal is confirmed from the read model).
        scene.alice.ok(
            "POST", scene.grant_path("table", "orders"),
            {"writes": [{"type": "select", "user": bob.id}]},
        )  # fmt: skip
        assert other.get(warehouse, headers=headers).status_code == 200


def test_who_could_navigate_when(authed: Authed) -> None:
    """As of a past moment, the way in follows the grants held then."""
    scene = Scene(authed)
    bob = scene.reader("bob", "namespace", "sales")
    scene.revoke(bob, "namespace", "sales")
    events = scene.alice.ok("GET", f"{MGMT}/events", params={"type": "io.icelog.grants."})
    granted = next(e for e in events["events"] if e["type"].endswith("granted.v1")
                   and e["data"]["principal-id"] == bob.id)  # fmt: skip
    access = f"{MGMT}/permissions/warehouse/{scene.wid}/access"
    about_bob = {"principalUser": bob.id}
    then = scene.alice.ok("GET", access, params={**about_bob, "as-of": granted["position"]})
    assert "get_config" in then["allowed-actions"]
    assert "list_everything" not in then["allowed-actions"]
    now = scene.alice.ok("GET", access, params=about_bob)
    assert "get_config" not in now["allowed-actions"]


@pytest.mark.attack
def test_attack_a_way_into_one_warehouse_opens_no_other_and_names_nothing_off_it(
    authed: Authed,
) -> None:
    """mallory holds select on `sales` in the default warehouse. She tries the other
    warehouse (by name and id), and probes names off her way in her own: each answers as
    what does not exist, and no answer names anything she may not see."""
    scene = Scene(authed)
    mallory = scene.reader("mallory", "namespace", "sales")
    other = scene.alice.ok(
        "POST", f"{MGMT}/warehouse",
        {"warehouse-name": "finance", "storage-profile": {
            "type": "file", "base-location": f"file://{scene.authed.services.settings.data_dir}/f"}},
    )  # fmt: skip
    owid = str(other["warehouse-id"])
    scene.alice.ok("POST", f"/catalog/v1/{owid}/namespaces", {"namespace": ["payroll"]})

    def same(hidden: Any, unknown: Any, *secrets: str) -> None:
        a, b = hidden.text, unknown.text
        for secret in secrets:
            a, b = a.replace(secret, "X"), b.replace(secret, "X")
        assert (hidden.status_code, a) == (unknown.status_code, b), (hidden.text, unknown.text)
        assert hidden.status_code == 404

    same(_config(mallory, "finance"), _config(mallory, "nothing"), "finance", "nothing")
    stranger = str(uuid4())
    same(_config(mallory, owid), _config(mallory, stranger), owid, stranger)
    assert _status(mallory, "GET", f"/catalog/v1/{owid}/namespaces") == 404
    # Her own warehouse's page answers her; the other's as an unknown one.
    assert _status(mallory, "GET", f"{MGMT}/warehouse/{scene.wid}") == 200
    same(mallory("GET", f"{MGMT}/warehouse/{owid}"),
         mallory("GET", f"{MGMT}/warehouse/{stranger}"), owid, stranger)  # fmt: skip
    listed = mallory.ok("GET", f"{MGMT}/warehouse")["warehouses"]
    assert [w["name"] for w in listed] == ["default"]
    # In her own warehouse: a sibling, a nested one, by name and by its (derivable) id.
    base = scene.base
    for hidden, unknown in ((["hr"], ["nothing"]), (["a", "b"], ["a", "nothing"])):
        names = (".".join(hidden), ".".join(unknown))
        for suffix in ("", "/tables", "/views", "/tables/salaries"):
            same(mallory("GET", f"{base}/namespaces/{'%1F'.join(hidden)}{suffix}"),
                 mallory("GET", f"{base}/namespaces/{'%1F'.join(unknown)}{suffix}"),
                 *names)  # fmt: skip
        same(mallory("GET", f"{base}/namespaces", params={"parent": "\x1f".join(hidden)}),
             mallory("GET", f"{base}/namespaces", params={"parent": "\x1f".join(unknown)}),
             *names)  # fmt: skip
    hr_id = scene.namespace_id("hr")
    unknown_id = str(namespace_id(UUID(scene.wid), NamespaceName(("nothing",))))
    same(mallory("GET", f"{MGMT}/permissions/namespace/{hr_id}/access"),
         mallory("GET", f"{MGMT}/permissions/namespace/{unknown_id}/access"),
         hr_id, unknown_id)  # fmt: skip
    nid_path = f"{MGMT}/warehouse/{scene.wid}/namespace-id"
    same(mallory("GET", nid_path, params={"namespace": "hr"}),
         mallory("GET", nid_path, params={"namespace": "nothing"}),
         hr_id, unknown_id)  # fmt: skip
    # Her lists name nothing off her way.
    seen = [mallory("GET", f"{base}/namespaces").text,
            mallory("GET", f"{base}/namespaces/sales/tables").text,
            mallory("GET", f"{MGMT}/warehouse").text]  # fmt: skip
    for text in seen:
        for secret in ("hr", "salaries", "secret", "payroll", "finance", owid):
            assert f'"{secret}"' not in text and owid not in text, text

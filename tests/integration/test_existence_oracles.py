"""No answer tells a hidden object from one that does not exist.

Namespace ids are `uuid5(warehouse, path)`: anyone can compute the id of `finance.payroll`.
A caller who may not see an object must get, byte for byte, the answer an unknown id gets
from `permissions/check`, `.../access` and `namespace-id`; and a 409 on a taken location
must not name the table that holds it."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import pytest

from icelog.domain.identifiers import NamespaceName, namespace_id
from tests.integration.conftest import Authed
from tests.support.callers import Caller

pytestmark = pytest.mark.attack

MGMT = "/management/v1"
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": True}]}


def _scene(authed: Authed) -> tuple[Caller, Caller, str, str, str]:
    """alice (admin) owns `finance.payroll` and a table in it; mallory holds nothing there.
    (alice, mallory, warehouse id, namespace id, table id)."""
    alice, mallory = Caller(authed, "alice"), Caller(authed, "mallory")
    alice.ok("POST", f"{MGMT}/bootstrap", {"accept-terms-of-use": True})
    mallory.ok("GET", f"{MGMT}/whoami")  # mallory is a known user, with no grants
    wid = alice.ok("GET", "/catalog/v1/config", params={"warehouse": "default"})["overrides"][
        "prefix"
    ]
    alice.ok("POST", f"/catalog/v1/{wid}/namespaces", {"namespace": ["finance"]})
    alice.ok("POST", f"/catalog/v1/{wid}/namespaces", {"namespace": ["finance", "payroll"]})
    table = alice.ok(
        "POST",
        f"/catalog/v1/{wid}/namespaces/finance%1Fpayroll/tables",
        {"name": "salaries", "schema": SCHEMA},
    )
    nid = str(namespace_id(UUID(wid), NamespaceName(("finance", "payroll"))))
    return alice, mallory, wid, nid, table["metadata"]["table-uuid"]


def _same_answer(hidden: Any, unknown: Any, hidden_id: str, unknown_id: str) -> None:
    assert hidden.status_code == unknown.status_code == 404, (hidden.text, unknown.text)
    assert hidden.text.replace(hidden_id, "ID") == unknown.text.replace(unknown_id, "ID")


def test_check_answers_a_hidden_namespace_as_an_unknown_one(authed: Authed) -> None:
    alice, mallory, _wid, nid, _ = _scene(authed)
    other = str(uuid4())

    def ask(caller: Caller, ns: str) -> Any:
        body = {"operation": {"namespace": {"action": "get_metadata", "namespace-id": ns}}}
        return caller("POST", f"{MGMT}/permissions/check", body)

    _same_answer(ask(mallory, nid), ask(mallory, other), nid, other)
    assert ask(alice, nid).json() == {"allowed": True}  # the owner still gets an answer


def test_check_answers_a_hidden_table_as_an_unknown_one(authed: Authed) -> None:
    _, mallory, _wid, _nid, tid = _scene(authed)
    other = str(uuid4())

    def ask(table: str) -> Any:
        body = {"operation": {"table": {"action": "read_data", "table-id": table}}}
        return mallory("POST", f"{MGMT}/permissions/check", body)

    _same_answer(ask(tid), ask(other), tid, other)


def test_access_answers_hidden_objects_as_unknown_ones(authed: Authed) -> None:
    alice, mallory, wid, nid, tid = _scene(authed)
    other = str(uuid4())
    for path in ("namespace/{}/access", f"warehouse/{wid}/table/{{}}/access"):
        real = path.format(nid if "namespace" in path else tid)
        fake = path.format(other)
        hidden = mallory("GET", f"{MGMT}/permissions/{real}")
        unknown = mallory("GET", f"{MGMT}/permissions/{fake}")
        _same_answer(hidden, unknown, nid if "namespace" in path else tid, other)
        assert "get_metadata" in alice.ok("GET", f"{MGMT}/permissions/{real}")["allowed-actions"]


def test_a_table_in_another_warehouse_answers_as_unknown(authed: Authed) -> None:
    """Asking for a table under the wrong warehouse must not say it lives elsewhere."""
    alice, _, wid, _nid, tid = _scene(authed)
    other_wh = str(uuid4())
    elsewhere = alice(
        "GET", f"{MGMT}/permissions/warehouse/{other_wh}/table/{tid}/access"
    )  # a table that exists, asked under a warehouse it is not in
    unknown = alice("GET", f"{MGMT}/permissions/warehouse/{wid}/table/{uuid4()}/access")
    assert elsewhere.status_code == unknown.status_code == 404
    assert other_wh not in elsewhere.text and "is not in" not in elsewhere.text


def test_namespace_id_lookup_does_not_confirm_a_hidden_namespace(authed: Authed) -> None:
    alice, mallory, wid, nid, _ = _scene(authed)
    path = f"{MGMT}/warehouse/{wid}/namespace-id"
    hidden = mallory("GET", path, params={"namespace": "finance\x1fpayroll"})
    unknown = mallory("GET", path, params={"namespace": "finance\x1fnothing"})
    unknown_id = str(namespace_id(UUID(wid), NamespaceName(("finance", "nothing"))))
    _same_answer(hidden, unknown, nid, unknown_id)
    found = alice.ok("GET", path, params={"namespace": "finance\x1fpayroll"})
    assert found["namespace-id"] == nid


def give_a_sandbox(alice: Caller, mallory: Caller, wid: str) -> None:
    """Namespace `sandbox`, where mallory may create (and nothing more)."""
    alice.ok("POST", f"/catalog/v1/{wid}/namespaces", {"namespace": ["sandbox"]})
    sandbox = str(namespace_id(UUID(wid), NamespaceName(("sandbox",))))
    me = mallory.ok("GET", f"{MGMT}/whoami")["id"]
    alice.ok(
        "POST",
        f"{MGMT}/permissions/namespace/{sandbox}/assignments",
        {"writes": [{"type": "create", "user": me}]},
    )


def test_a_taken_location_is_refused_without_naming_its_table(authed: Authed) -> None:
    alice, mallory, wid, _nid, _tid = _scene(authed)
    # mallory may create in her own namespace, and tries alice's table's location.
    give_a_sandbox(alice, mallory, wid)
    taken = alice.ok("GET", f"/catalog/v1/{wid}/namespaces/finance%1Fpayroll/tables/salaries")
    location = taken["metadata"]["location"]
    answer = mallory(
        "POST",
        f"/catalog/v1/{wid}/namespaces/sandbox/tables",
        {"name": "probe", "schema": SCHEMA, "location": location + "/sub"},
    )
    assert answer.status_code == 409, answer.text
    for secret in ("salaries", "payroll", "finance"):
        text = answer.text.replace(location, "")  # her own request echoed back is fine
        assert secret not in text, answer.text

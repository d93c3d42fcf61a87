"""Staged creates with authentication on: `POST .../tables` with `stage-create`, then
`POST .../tables/{name}` with only `assert-create` — the path of DuckDB's CREATE TABLE,
PyIceberg's `create_table_transaction`, Spark's CTAS and REPLACE.

The commit makes the table, so it needs what a create needs (`create` on the namespace),
not rights on a table that does not exist yet; and it must not become a way round those
rights: without `create` no table is made, and nothing about an existing table is learnt
or changed by who cannot see it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import SCHEMA, Authed
from tests.integration.test_permissions_api import MGMT
from tests.support.callers import Caller
from tests.support.staging import staged_create_updates

CATALOG = "/catalog/v1"


@pytest.fixture
def place(authed: Authed) -> Iterator[tuple[str, Caller, str]]:
    """Alice (the bootstrapped admin) made namespace `sales` with table `orders`:
    (the warehouse prefix, alice, the namespace's id)."""
    alice = Caller(authed, "alice", "Alice")
    alice.ok("POST", f"{MGMT}/bootstrap", {"accept-terms-of-use": True})
    prefix = alice.ok("GET", f"{CATALOG}/config", params={"warehouse": "default"})["overrides"][
        "prefix"
    ]
    alice.ok("POST", f"{CATALOG}/{prefix}/namespaces", {"namespace": ["sales"]})
    alice.ok(
        "POST",
        f"{CATALOG}/{prefix}/namespaces/sales/tables",
        {"name": "orders", "schema": SCHEMA},
    )
    found = alice.ok(
        "GET", f"{MGMT}/warehouse/{prefix}/namespace-id", params={"namespace": "sales"}
    )
    yield prefix, alice, found["namespace-id"]


def _grant(alice: Caller, namespace_id: str, relation: str, who: Caller) -> None:
    alice.ok(
        "POST",
        f"{MGMT}/permissions/namespace/{namespace_id}/assignments",
        {"writes": [{"type": relation, "user": who.id}]},
    )


def _granted(authed: Authed, place: tuple[str, Caller, str], subject: str, relation: str) -> Caller:
    """User `subject`, granted `relation` on namespace `sales` by alice."""
    _, alice, namespace_id = place
    who = Caller(authed, subject)
    _grant(alice, namespace_id, relation, who)
    return who


def _stage(caller: Caller, prefix: str, name: str) -> Any:
    return caller(
        "POST",
        f"{CATALOG}/{prefix}/namespaces/sales/tables",
        {"name": name, "schema": SCHEMA, "stage-create": True},
    )


def _create_updates(staged: dict[str, Any]) -> list[dict[str, Any]]:
    """The updates a client sends to commit a staged create (as PyIceberg does)."""
    metadata = staged["metadata"]
    return [
        *staged_create_updates(metadata, metadata["location"]),
        {"action": "set-properties", "updates": metadata.get("properties", {})},
    ]


def _commit_create(caller: Caller, prefix: str, name: str, staged: dict[str, Any]) -> Any:
    return caller(
        "POST",
        f"{CATALOG}/{prefix}/namespaces/sales/tables/{name}",
        {"requirements": [{"type": "assert-create"}], "updates": _create_updates(staged)},
    )


def _staged_by_admin(alice: Caller, prefix: str, name: str) -> dict[str, Any]:
    staged = _stage(alice, prefix, name)
    assert staged.status_code == 200, staged.text
    body: dict[str, Any] = staged.json()
    return body


def test_the_admin_commits_a_staged_create(authed: Authed, place: tuple[str, Caller, str]) -> None:
    """Failed before: 404 NoSuchTableException (the guard looked for the table)."""
    prefix, alice, _ = place
    staged = _staged_by_admin(alice, prefix, "made")
    committed = _commit_create(alice, prefix, "made", staged)
    assert committed.status_code == 200, committed.text
    assert committed.json()["metadata"]["table-uuid"] == staged["metadata"]["table-uuid"]
    alice.ok("GET", f"{CATALOG}/{prefix}/namespaces/sales/tables/made")


def test_create_on_the_namespace_is_enough_and_the_maker_owns_the_table(
    authed: Authed, place: tuple[str, Caller, str]
) -> None:
    prefix, alice, _ = place
    bob = _granted(authed, place, "bob", "create")
    # Bob's engine configures itself, stages, commits, then writes to what he made.
    config = bob.ok("GET", f"{CATALOG}/config", params={"warehouse": "default"})
    assert config["overrides"]["prefix"] == prefix
    staged = _stage(bob, prefix, "bobs")
    assert staged.status_code == 200, staged.text
    committed = _commit_create(bob, prefix, "bobs", staged.json())
    assert committed.status_code == 200, committed.text
    table_id = committed.json()["metadata"]["table-uuid"]
    found = alice.ok("GET", f"{MGMT}/permissions/warehouse/{prefix}/table/{table_id}/assignments")
    assert {(a["type"], a.get("user")) for a in found["assignments"]} == {("ownership", bob.id)}
    later = bob(
        "POST",
        f"{CATALOG}/{prefix}/namespaces/sales/tables/bobs",
        {
            "requirements": [{"type": "assert-table-uuid", "uuid": table_id}],
            "updates": [{"action": "set-properties", "updates": {"owner": "bob"}}],
        },
    )
    assert later.status_code == 200, later.text


def test_a_transaction_that_creates_needs_create_not_a_table(
    authed: Authed, place: tuple[str, Caller, str]
) -> None:
    """transactions/commit with assert-create: the guard asks for `create` on the namespace
    (before: 404 for everyone); the catalog then answers as without auth (not supported)."""
    prefix, alice, namespace_id = place
    bob, carol = Caller(authed, "bob", "Bob"), Caller(authed, "carol", "Carol")
    _grant(alice, namespace_id, "create", bob)
    _grant(alice, namespace_id, "select", carol)
    staged = _staged_by_admin(alice, prefix, "tx")
    body = {
        "table-changes": [
            {
                "identifier": {"namespace": ["sales"], "name": "tx"},
                "requirements": [{"type": "assert-create"}],
                "updates": _create_updates(staged),
            }
        ]
    }
    path = f"{CATALOG}/{prefix}/transactions/commit"
    for caller in (alice, bob):
        answer = caller("POST", path, body)
        assert answer.status_code == 400, answer.text
        assert "assert-create" in answer.json()["error"]["message"]
    refused = carol("POST", path, body)
    assert refused.status_code == 403, refused.text
    hidden = Caller(authed, "dave", "Dave")("POST", path, body)
    assert hidden.status_code == 404, hidden.text


@pytest.mark.attack
def test_read_on_the_namespace_cannot_stage_or_commit_a_create(
    authed: Authed, place: tuple[str, Caller, str]
) -> None:
    prefix, alice, _ = place
    carol = _granted(authed, place, "carol", "select")
    refused = _stage(carol, prefix, "carols")
    assert refused.status_code == 403, refused.text
    # Skipping the stage: the commit alone would make the table.
    staged = _staged_by_admin(alice, prefix, "carols")
    refused = _commit_create(carol, prefix, "carols", staged)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["type"] == "ForbiddenException"
    gone = alice("GET", f"{CATALOG}/{prefix}/namespaces/sales/tables/carols")
    assert gone.status_code == 404


@pytest.mark.attack
def test_without_sight_of_the_namespace_a_create_commit_is_404_whatever_exists(
    authed: Authed, place: tuple[str, Caller, str]
) -> None:
    """Dave holds nothing in `sales`: a create commit onto the existing `orders` and onto a
    name nobody uses answer alike (no oracle) and change nothing."""
    prefix, alice, _ = place
    dave = Caller(authed, "dave", "Dave")
    before = alice.ok("GET", f"{CATALOG}/{prefix}/namespaces/sales/tables/orders")
    staged = _staged_by_admin(alice, prefix, "orders_shadow")
    answers = [_commit_create(dave, prefix, name, staged) for name in ("orders", "nobody")]
    assert [a.status_code for a in answers] == [404, 404], [a.text for a in answers]
    assert answers[0].json()["error"]["type"] == answers[1].json()["error"]["type"]
    after = alice.ok("GET", f"{CATALOG}/{prefix}/namespaces/sales/tables/orders")
    assert after["metadata-location"] == before["metadata-location"]
    assert alice("GET", f"{CATALOG}/{prefix}/namespaces/sales/tables/nobody").status_code == 404


@pytest.mark.attack
def test_a_table_right_elsewhere_does_not_let_a_create_replace_an_existing_table(
    authed: Authed, place: tuple[str, Caller, str]
) -> None:
    """Erin may write one table of `sales` but cannot create in it: an assert-create commit
    onto `orders` (a table she cannot see) is refused and leaves it as it was; with
    `create` it is a failed requirement (409), never a replacement."""
    prefix, alice, namespace_id = place
    erin = Caller(authed, "erin", "Erin")
    mine = alice.ok(
        "POST",
        f"{CATALOG}/{prefix}/namespaces/sales/tables",
        {"name": "erins", "schema": SCHEMA},
    )
    alice.ok(
        "POST",
        f"{MGMT}/permissions/warehouse/{prefix}/table/{mine['metadata']['table-uuid']}/assignments",
        {"writes": [{"type": "modify", "user": erin.id}]},
    )
    before = alice.ok("GET", f"{CATALOG}/{prefix}/namespaces/sales/tables/orders")
    staged = _staged_by_admin(alice, prefix, "orders_shadow")
    refused = _commit_create(erin, prefix, "orders", staged)
    assert refused.status_code in (403, 404), refused.text
    _grant(alice, namespace_id, "create", erin)
    conflict = _commit_create(erin, prefix, "orders", staged)
    assert conflict.status_code == 409, conflict.text
    after = alice.ok("GET", f"{CATALOG}/{prefix}/namespaces/sales/tables/orders")
    assert after["metadata-location"] == before["metadata-location"]
    assert after["metadata"]["table-uuid"] == before["metadata"]["table-uuid"]


@pytest.mark.attack
def test_a_create_decision_is_not_reused_for_a_plain_commit(
    authed: Authed, place: tuple[str, Caller, str]
) -> None:
    """Bob may create in `sales` but holds no `modify` on alice's `orders`: having been
    allowed a create commit on that path must not let a plain commit through."""
    prefix, alice, _ = place
    bob = _granted(authed, place, "bob", "create")
    staged = _staged_by_admin(alice, prefix, "orders_shadow")
    assert _commit_create(bob, prefix, "orders", staged).status_code == 409
    plain = bob(
        "POST",
        f"{CATALOG}/{prefix}/namespaces/sales/tables/orders",
        {"updates": [{"action": "set-properties", "updates": {"taken": "yes"}}]},
    )
    assert plain.status_code == 403, plain.text
    loaded = alice.ok("GET", f"{CATALOG}/{prefix}/namespaces/sales/tables/orders")
    assert "taken" not in loaded["metadata"].get("properties", {})


def test_config_answers_a_user_whose_only_grant_is_inside_the_warehouse(
    authed: Authed, place: tuple[str, Caller, str]
) -> None:
    """Failed before: 404 NoSuchWarehouse for a user granted on a namespace only."""
    prefix, alice, namespace_id = place
    frank, gina = Caller(authed, "frank", "Frank"), Caller(authed, "gina", "Gina")
    _grant(alice, namespace_id, "select", frank)
    config = frank.ok("GET", f"{CATALOG}/config", params={"warehouse": "default"})
    assert config["overrides"]["prefix"] == prefix
    assert frank.ok("GET", f"{CATALOG}/config", params={"warehouse": prefix})
    # Nothing held in the warehouse: as if it did not exist.
    for wanted in ("default", "nowhere"):
        hidden = gina("GET", f"{CATALOG}/config", params={"warehouse": wanted})
        assert hidden.status_code == 404, hidden.text
        assert hidden.json()["error"]["type"] == "NoSuchWarehouseException"

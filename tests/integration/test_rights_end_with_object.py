"""Rights end with their object: a namespace's id derives from its name and a user's from
its subject, so grants left behind by a dropped namespace, a dropped table, a deleted role
or a deleted user would pass to the next object or user of that name. Each attack below is
what the previous holder of such rights would try; the read model, the as-of history and a
rebuild from the log must all have ended them (docs/auth.md)."""

from __future__ import annotations

from typing import Any

import pytest

from icelog.domain.context import RequestContext
from icelog.domain.errors import NotFoundError
from icelog.domain.permissions import ObjectRef, PrincipalRef
from icelog.projections.rebuild import differences, rebuild
from tests.integration.conftest import SCHEMA, Authed
from tests.support.callers import Caller, People, bootstrapped
from tests.support.callers import assignments as _assignments
from tests.support.callers import grant as _grant

pytestmark = pytest.mark.attack

MGMT = "/management/v1"
REFUSED = (403, 404)


def _prefix(who: Caller) -> str:
    config = who.ok("GET", "/catalog/v1/config", params={"warehouse": "default"})
    return str(config["overrides"]["prefix"])


def _namespace_id(who: Caller, prefix: str, name: str) -> str:
    found = who.ok("GET", f"{MGMT}/warehouse/{prefix}/namespace-id", params={"namespace": name})
    return str(found["namespace-id"])


def _table(who: Caller, prefix: str, ns: str, name: str) -> str:
    made = who.ok(
        "POST", f"/catalog/v1/{prefix}/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA}
    )
    return str(made["metadata"]["table-uuid"])


def _db_and_t(who: Caller) -> tuple[str, str]:
    """Namespace `db` and its table `t` in the default warehouse, made by `who`: the
    warehouse's prefix and the table's id."""
    prefix = _prefix(who)
    who.ok("POST", f"/catalog/v1/{prefix}/namespaces", {"namespace": ["db"]})
    return prefix, _table(who, prefix, "db", "t")


def _commit(who: Caller, prefix: str, ns: str, name: str) -> Any:
    return who(
        "POST",
        f"/catalog/v1/{prefix}/namespaces/{ns}/tables/{name}",
        {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
    )


def _grant_rows(authed: Authed, where: str, params: tuple[Any, ...], prefix: str = "") -> int:
    """Grant rows of the read model (or of a rebuild's tables, `prefix`) matching `where`."""
    found = authed.services.primary.row(
        f"SELECT count(*) FROM {prefix}icelog_grants WHERE {where}", params
    )
    return 0 if found is None else int(found[0])


@pytest.fixture
def people(authed: Authed) -> People:
    return bootstrapped(authed)


def test_a_namespace_of_the_same_name_does_not_inherit_the_dropped_ones_rights(
    authed: Authed, people: People
) -> None:
    alice, bob, carol = people
    prefix = _prefix(alice)
    alice.ok("POST", f"/catalog/v1/{prefix}/namespaces", {"namespace": ["shared"]})
    old = _namespace_id(alice, prefix, "shared")
    _grant(alice, f"namespace/{old}", {"type": "ownership", "user": bob.id})
    _grant(alice, f"namespace/{old}", {"type": "select", "user": carol.id})
    _table(bob, prefix, "shared", "t")
    assert bob("DELETE", f"/catalog/v1/{prefix}/namespaces/shared/tables/t").status_code == 204
    assert bob("DELETE", f"/catalog/v1/{prefix}/namespaces/shared").status_code == 204
    assert _grant_rows(authed, "object_id = ?", (old,)) == 0, "they went with the namespace"

    # The same name again, by alice: the same id (derived from the name), none of the rights.
    alice.ok("POST", f"/catalog/v1/{prefix}/namespaces", {"namespace": ["shared"]})
    assert _namespace_id(alice, prefix, "shared") == old
    _table(alice, prefix, "shared", "t")
    assert _assignments(alice, f"namespace/{old}") == {("ownership", alice.id)}
    table = f"/catalog/v1/{prefix}/namespaces/shared/tables/t"
    for who in (bob, carol):
        assert who("GET", table).status_code in REFUSED
        assert _commit(who, prefix, "shared", "t").status_code in REFUSED
    creates = bob(
        "POST", f"/catalog/v1/{prefix}/namespaces/shared/tables", {"name": "x", "schema": SCHEMA}
    )
    assert creates.status_code in REFUSED
    regrant = bob(
        "POST", f"{MGMT}/permissions/namespace/{old}/assignments",
        {"writes": [{"type": "select", "user": bob.id}]},
    )  # fmt: skip
    assert regrant.status_code in REFUSED
    # Credentials are vended by loadTable: refused with it.
    vend = bob("GET", table, headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
    assert vend.status_code in REFUSED

    # A grant on the new namespace is a fresh grant (the stream still remembers the old
    # one, the read model does not): it must land, and a revoke must remove it.
    _grant(alice, f"namespace/{old}", {"type": "select", "user": carol.id})
    assert carol("GET", table).status_code == 200
    alice.ok(
        "POST", f"{MGMT}/permissions/namespace/{old}/assignments",
        {"deletes": [{"type": "select", "user": carol.id}]},
    )  # fmt: skip
    assert carol("GET", table).status_code in REFUSED

    _same_after_rebuild(authed)


def test_a_table_dropped_with_purge_takes_its_grants(authed: Authed, people: People) -> None:
    alice, bob, _ = people
    prefix, old = _db_and_t(alice)
    _grant(alice, f"warehouse/{prefix}/table/{old}", {"type": "modify", "user": bob.id})
    assert _commit(bob, prefix, "db", "t").status_code == 200
    dropped = alice("DELETE", f"/catalog/v1/{prefix}/namespaces/db/tables/t",
                    params={"purgeRequested": "true"})  # fmt: skip
    assert dropped.status_code == 204
    assert _grant_rows(authed, "object_id = ?", (old,)) == 0
    new = _table(alice, prefix, "db", "t")
    assert new != old
    assert bob("GET", f"/catalog/v1/{prefix}/namespaces/db/tables/t").status_code in REFUSED
    assert _commit(bob, prefix, "db", "t").status_code in REFUSED
    # Unregistered: the same.
    _grant(alice, f"warehouse/{prefix}/table/{new}", {"type": "select", "user": bob.id})
    gone = alice("DELETE", f"/catalog/v1/{prefix}/namespaces/db/tables/t")
    assert gone.status_code == 204
    assert _grant_rows(authed, "object_id = ?", (new,)) == 0
    _same_after_rebuild(authed)


def test_a_soft_dropped_table_keeps_its_grants_until_it_expires(
    authed: Authed, people: People
) -> None:
    alice, bob, _ = people
    prefix = _prefix(alice)
    alice.ok(
        "POST", f"{MGMT}/warehouse/{prefix}/delete-profile",
        {"delete-profile": {"type": "soft", "expiration-seconds": 0}},
    )  # fmt: skip
    alice.ok("POST", f"/catalog/v1/{prefix}/namespaces", {"namespace": ["db"]})
    tid = _table(alice, prefix, "db", "t")
    _grant(alice, f"warehouse/{prefix}/table/{tid}", {"type": "select", "user": bob.id})
    table = f"/catalog/v1/{prefix}/namespaces/db/tables/t"
    assert alice("DELETE", table).status_code == 204
    assert _grant_rows(authed, "object_id = ?", (tid,)) == 2, "undroppable: kept"
    undrop = {"targets": [{"type": "table", "id": tid}]}
    alice.ok("POST", f"{MGMT}/warehouse/{prefix}/deleted-tabulars/undrop", undrop)
    assert bob("GET", table).status_code == 200, "undropped with its grants"
    assert alice("DELETE", table).status_code == 204
    assert authed.services.tasks.run_until_idle() >= 1  # the expiry
    assert _grant_rows(authed, "object_id = ?", (tid,)) == 0, "ended with the expiry"
    _same_after_rebuild(authed)


def test_a_deleted_role_takes_its_members_and_rights(authed: Authed, people: People) -> None:
    alice, _, carol = people
    prefix, _ = _db_and_t(alice)
    nid = _namespace_id(alice, prefix, "db")
    role = alice.ok("POST", f"{MGMT}/role", {"name": "analysts"})["id"]
    _grant(alice, f"role/{role}", {"type": "assignee", "user": carol.id})
    _grant(alice, f"namespace/{nid}", {"type": "select", "role": role})
    table = f"/catalog/v1/{prefix}/namespaces/db/tables/t"
    assert carol("GET", table).status_code == 200
    assert alice("DELETE", f"{MGMT}/role/{role}").status_code == 204
    assert carol("GET", table).status_code in REFUSED
    again = alice.ok("POST", f"{MGMT}/role", {"name": "analysts"})["id"]
    assert _assignments(alice, f"role/{again}") == {("ownership", alice.id)}
    assert carol("GET", table).status_code in REFUSED
    assert _grant_rows(authed, "object_id = ? OR principal_id = ?", (role, role)) == 0
    # A grant to the deleted role is refused (it would dangle).
    to_gone = alice(
        "POST", f"{MGMT}/permissions/namespace/{nid}/assignments",
        {"writes": [{"type": "select", "role": role}]},
    )  # fmt: skip
    assert to_gone.status_code == 404, to_gone.text
    _same_after_rebuild(authed)


def test_a_deleted_user_coming_back_has_none_of_the_old_grants(
    authed: Authed, people: People
) -> None:
    alice, bob, _ = people
    prefix, _ = _db_and_t(alice)
    nid = _namespace_id(alice, prefix, "db")
    _grant(alice, f"namespace/{nid}", {"type": "modify", "user": bob.id})
    role = alice.ok("POST", f"{MGMT}/role", {"name": "writers"})["id"]
    _grant(alice, f"role/{role}", {"type": "assignee", "user": bob.id})
    bob.ok("GET", f"{MGMT}/whoami")
    table = f"/catalog/v1/{prefix}/namespaces/db/tables/t"
    assert _commit(bob, prefix, "db", "t").status_code == 200
    assert alice("DELETE", f"{MGMT}/user/{bob.id}").status_code == 204
    assert _grant_rows(authed, "principal_id = ?", (bob.id,)) == 0
    # The provider hands the same subject out again (or bob simply comes back).
    back = Caller(authed, "bob", "Someone Else")
    assert back("GET", table).status_code in REFUSED
    assert _commit(back, prefix, "db", "t").status_code in REFUSED
    assert (("modify", bob.id)) not in _assignments(alice, f"namespace/{nid}")
    assert ("assignee", bob.id) not in _assignments(alice, f"role/{role}")
    _same_after_rebuild(authed)


def test_the_last_server_admin_cannot_be_deleted(authed: Authed, people: People) -> None:
    """Deleting a user ends their grants; deleting the only admin would leave the server
    with none for good (bootstrap is closed once used)."""
    alice, bob, _ = people
    bob.ok("GET", f"{MGMT}/whoami")
    refused = alice("DELETE", f"{MGMT}/user/{alice.id}")
    assert refused.status_code == 409, refused.text
    assert "last admin" in refused.json()["error"]["message"]
    _grant(alice, "server", {"type": "admin", "user": bob.id})
    assert bob("DELETE", f"{MGMT}/user/{alice.id}").status_code == 204
    assert ("admin", bob.id) in _assignments(bob, "server")
    assert bob("DELETE", f"{MGMT}/user/{bob.id}").status_code == 409


def test_a_project_with_roles_cannot_be_deleted(authed: Authed, people: People) -> None:
    alice, _, _ = people
    project = alice.ok("POST", f"{MGMT}/project", {"project-name": "p2"})["project-id"]
    in_p2 = {"x-project-id": project}
    _grant(alice, f"project/{project}", {"type": "project_admin", "user": alice.id})
    role = alice.ok("POST", f"{MGMT}/role", {"name": "r"}, headers=in_p2)["id"]
    refused = alice("DELETE", f"{MGMT}/project/{project}")
    assert refused.status_code == 409, refused.text
    assert "role" in refused.json()["error"]["message"]
    assert alice("DELETE", f"{MGMT}/role/{role}").status_code == 204
    assert alice("DELETE", f"{MGMT}/project/{project}").status_code == 204
    assert _grant_rows(authed, "object_id = ?", (project,)) == 0


def _same_after_rebuild(authed: Authed) -> None:
    """The log folds to the same grants: none of an object or principal that is gone, in
    the rebuilt read model and in the as-of history."""
    app = authed.services.catalog.app
    rebuild(app.recorder, app.mapper, "rebuilt_")
    assert differences(app.recorder, "rebuilt_") == []
    gone = _dangling("rebuilt_")
    assert authed.services.primary.rows(gone) == []
    assert authed.services.primary.rows(_dangling("")) == []
    # The as-of history, caught up: the grants it holds now are the live ones.
    authed.client.app.state.indexer.catch_up()  # type: ignore[attr-defined]
    columns = "object_kind, object_id, relation, principal_kind, principal_id"
    history = authed.services.primary.rows(
        f"SELECT {columns} FROM icelog_grant_versions WHERE to_position IS NULL"
    )
    live = authed.services.primary.rows(f"SELECT {columns} FROM icelog_grants")
    assert sorted(map(tuple, history)) == sorted(map(tuple, live))


def _dangling(prefix: str) -> str:
    p = prefix
    return (
        f"SELECT object_kind, object_id, principal_id FROM {p}icelog_grants AS g WHERE "
        f"(object_kind = 'namespace' AND NOT EXISTS (SELECT 1 FROM {p}icelog_namespaces n "
        "WHERE n.id = g.object_id)) OR (object_kind IN ('table', 'view') AND NOT EXISTS "
        f"(SELECT 1 FROM {p}icelog_tabulars t WHERE t.id = g.object_id) AND NOT EXISTS "
        f"(SELECT 1 FROM {p}icelog_deleted_tabulars d WHERE d.id = g.object_id)) OR "
        f"(object_kind = 'role' AND NOT EXISTS (SELECT 1 FROM {p}icelog_roles r "
        "WHERE r.id = g.object_id)) OR (principal_kind = 'role' AND NOT EXISTS "
        f"(SELECT 1 FROM {p}icelog_roles r WHERE r.id = g.principal_id)) OR "
        f"(object_kind = 'project' AND NOT EXISTS (SELECT 1 FROM {p}icelog_projects pr "
        "WHERE pr.id = g.object_id))"
    )


def test_a_grant_racing_the_drop_of_its_object_is_refused_in_the_append(
    authed: Authed, people: People, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command checks that the object exists, then appends: a drop landing in between
    must not leave a grant behind (the append checks again, and the retry answers 404)."""
    alice, bob, _ = people
    prefix = _prefix(alice)
    alice.ok("POST", f"/catalog/v1/{prefix}/namespaces", {"namespace": ["racy"]})
    nid = _namespace_id(alice, prefix, "racy")
    assert alice("DELETE", f"/catalog/v1/{prefix}/namespaces/racy").status_code == 204
    catalog = authed.services.catalog
    checks: list[ObjectRef] = []
    real = catalog.access._require_object

    def stale_first(obj: ObjectRef) -> None:
        checks.append(obj)
        if len(checks) > 1:  # the first check saw the namespace before its drop
            real(obj)

    monkeypatch.setattr(catalog.access, "_require_object", stale_first)
    ctx = RequestContext(actor=alice.id, request_id="race")
    with pytest.raises(NotFoundError):
        catalog.access.change_grants(
            ctx, ObjectRef("namespace", nid), writes=[("select", PrincipalRef("user", bob.id))],
            deletes=[],
        )  # fmt: skip
    assert len(checks) == 2, "the append refused the first attempt"
    assert _grant_rows(authed, "object_id = ?", (nid,)) == 0

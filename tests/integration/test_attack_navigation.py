"""Break-it attacks on the way in (ADR 0020) and on what outlives a revoke: a former reader
must learn nothing about what was made after their rights ended."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from icelog.domain.identifiers import NamespaceName, namespace_id
from tests.integration.conftest import Authed
from tests.integration.test_navigation_grants import MGMT, Scene
from tests.support.callers import Caller


def _granted_at(scene: Scene, who: Caller) -> int:
    """The log position of the first grant `who` was given."""
    events = scene.alice.ok("GET", f"{MGMT}/events", params={"type": "io.icelog.grants."})
    return int(next(e for e in events["events"] if e["type"].endswith("granted.v1")
                    and e["data"]["principal-id"] == who.id)["position"])  # fmt: skip


@pytest.mark.attack
def test_attack_own_access_as_of_a_revoked_right_names_nothing_made_since(
    authed: Authed,
) -> None:
    """mallory could read the whole default warehouse until her `select` was revoked.
    Asking for her own access as of then, on a namespace id she derives from a guessed
    name, must not tell her whether a namespace of that name was created after the revoke:
    both answer as an unknown namespace. What she could see then still answers."""
    scene = Scene(authed)
    grants = f"{MGMT}/permissions/warehouse/{scene.wid}/assignments"
    mallory = Caller(authed, "mallory")
    scene.alice.ok("POST", grants, {"writes": [{"type": "select", "user": mallory.id}]})
    then = _granted_at(scene, mallory)
    scene.alice.ok("POST", grants, {"deletes": [{"type": "select", "user": mallory.id}]})
    scene.alice.ok("POST", f"{scene.base}/namespaces", {"namespace": ["merger"]})

    def access(name: str) -> Any:
        nid = namespace_id(UUID(scene.wid), NamespaceName((name,)))
        path = f"{MGMT}/permissions/namespace/{nid}/access"
        return mallory("GET", path, params={"as-of": then}), str(nid)

    (made_since, made_id), (unknown, unknown_id) = access("merger"), access("nothing")
    assert made_since.status_code == 404, made_since.text
    assert made_since.text.replace(made_id, "X") == unknown.text.replace(unknown_id, "X")
    # What she could see then is still hers to ask about, as of then.
    seen, _ = access("sales")
    assert seen.status_code == 200, seen.text
    assert "list_everything" in seen.json()["allowed-actions"]

"""The edge's kept route decision and a revoke made in this process meanwhile.

docs/security.md: "a grant change in this process clears the cache, including reads already
in flight". `TtlCache.get` honours that (a load begun before `clear` stores nothing), but
the edge keeps its per-route answer with `Authorizer.remember` -> `TtlCache.put`, which takes
the cache's generation at the time of the *put*, not of the reads the decision came from.
A check that read "allowed", then a revoke (`forget()`) on this replica, then the edge's
`remember`: the revoked "allowed" is kept and answered from `recall` (api/edge.py
`_guarded`) for up to the cache time, on the very replica that made the revoke.
"""

from __future__ import annotations

import pytest

from icelog.api.auth.authorizer import SERVER, GrantAuthorizer, watching_staleness
from icelog.domain.permissions import PrincipalRef


class _Grants:
    def __init__(self) -> None:
        self.rows = [("server", SERVER.id, "admin", "oidc~bob")]

    def grants_held(self, principal_ids, object_ids=None, object_kind=None):  # type: ignore[no-untyped-def]
        return [r for r in self.rows if object_kind is None or r[0] == object_kind]


@pytest.mark.attack
def test_a_decision_read_before_a_local_revoke_is_not_kept_by_the_edge() -> None:
    grants = _Grants()
    auth = GrantAuthorizer(queries=None, grants=grants, ttl_s=60.0)  # type: ignore[arg-type]
    bob = frozenset({PrincipalRef("user", "oidc~bob")})
    key = ("route", "oidc~bob", ("GET", "/v1/{prefix}/namespaces"), ("p",))
    with watching_staleness():
        caps, _ = auth.decide(bob, SERVER)  # the guard reads: allowed
        assert caps
        # Meanwhile another request on this replica revokes and forgets (api/edge.py serve).
        grants.rows = []
        auth.forget()
        # The guard's request goes on: the edge keeps its answer (api/edge.py _guarded).
        auth.remember(key, (caps,))
    assert auth.recall(key) is None, "a decision read before the revoke is answered after it"

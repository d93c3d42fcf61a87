"""A user of an in-process catalog with authentication on: their token from the test
OpenID provider, their user id, and calls made with that token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.integration.conftest import Authed


class Caller:
    def __init__(self, authed: Authed, subject: str, name: str | None = None) -> None:
        self.authed = authed
        self.token = authed.idp.issue(subject, extra_claims={"name": name or subject.title()})
        self.id = f"oidc~{subject}"  # the default (keyless) provider's ids (ADR 0019)

    def __call__(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        if body is not None:
            kwargs["json"] = body
        return self.authed.call(method, path, self.token, **kwargs)

    def ok(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        response = self(method, path, body, **kwargs)
        assert response.status_code in (200, 204), (method, path, response.text)
        return response.json() if response.content else None


People = tuple[Caller, Caller, Caller]
MGMT = "/management/v1"


def bootstrapped(authed: Authed) -> People:
    """Alice, Bob and Carol; Alice bootstrapped the catalog, so she is its admin."""
    alice, bob, carol = (
        Caller(authed, "alice", "Alice"),
        Caller(authed, "bob", "Bob"),
        Caller(authed, "carol", "Carol"),
    )
    alice.ok("POST", f"{MGMT}/bootstrap", {"accept-terms-of-use": True})
    return alice, bob, carol


def grant(who: Caller, path: str, *writes: dict[str, str]) -> None:
    """`who` grants `writes` on the object at `/permissions/<path>`."""
    who.ok("POST", f"{MGMT}/permissions/{path}/assignments", {"writes": list(writes)})


def assignments(who: Caller, path: str) -> set[tuple[str, str]]:
    """(relation, user or role) of the grants on the object at `/permissions/<path>`."""
    found = who.ok("GET", f"{MGMT}/permissions/{path}/assignments")["assignments"]
    return {(a["type"], a.get("user") or a.get("role")) for a in found}

"""Attack: the console's login callback as an unlimited way to the provider.

docs/security.md: "The token endpoint and console cannot be turned against the provider";
api/auth/provider_calls.py: the rate limit exists "so one client cannot keep the pool full
by itself". But `/ui/callback` runs a code exchange with the provider (in the same pool)
for any request whose `state` matches the login cookie, and that cookie is plain base64
JSON the client writes itself: no `/ui/login/start`, no signature, no rate limit. One
client sends as many provider requests as it likes (and, with a slow provider, keeps the
shared pool full, so the token endpoint answers 503 to everyone).
"""

from __future__ import annotations

import base64

import orjson
import pytest

from icelog.api.auth.provider_calls import RateLimiter
from tests.integration.conftest import Authed

LOGIN = "icelog_console_login"


@pytest.mark.attack
def test_attack_forged_login_cookies_do_not_reach_the_provider_without_limit(
    authed: Authed,
) -> None:
    authed.client.app.state.token_limiter = RateLimiter(60, 2)  # type: ignore[attr-defined]
    forged = base64.urlsafe_b64encode(orjson.dumps({"state": "s", "verifier": "v"})).decode()
    before = authed.idp.token_requests
    for n in range(10):
        authed.client.cookies.set(LOGIN, forged, path="/ui")
        authed.client.get("/ui/callback", params={"code": f"made-up-{n}", "state": "s"})
    reached = authed.idp.token_requests - before
    assert reached <= 2, (
        f"{reached} code exchanges reached the provider from one client with a login "
        "cookie it wrote itself (the token endpoint would have allowed 2)"
    )

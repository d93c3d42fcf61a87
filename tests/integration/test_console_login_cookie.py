"""The console's login callback as a way to the provider (api/console/session.py).

`/ui/callback` runs a code exchange with the provider (in the shared provider pool) for a
request whose `state` matches the login cookie. That cookie was plain base64 JSON the client
could write itself: no `/ui/login/start`, no signature, no rate limit — one client sent as
many provider requests as it liked. The cookie is now signed and dated, and start and
callback share the token endpoint's per-address rate limit.
"""

from __future__ import annotations

import base64
import hmac
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import orjson
import pytest
from starlette.testclient import TestClient

from icelog.api.auth.provider_calls import RateLimiter
from icelog.api.console import session
from icelog.api.services import derived_key
from tests.integration.conftest import Authed

LOGIN = "icelog_console_login"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _started(client: TestClient) -> tuple[str, str]:
    """(the signed login cookie, the provider's authorization URL) of a fresh login; the
    cookie is `Secure`, so it is set again for the client's plain-http requests."""
    started = client.get("/ui/login/start", follow_redirects=False)
    assert started.status_code == 303, started.text
    cookie = client.cookies[LOGIN]
    client.cookies.delete(LOGIN)
    client.cookies.set(LOGIN, cookie, path="/ui")
    return cookie, started.headers["location"]


def _code(authorization_url: str) -> tuple[str, str]:
    back = httpx.get(authorization_url, follow_redirects=False)
    query = parse_qs(urlsplit(back.headers["location"]).query)
    return query["code"][0], query["state"][0]


@pytest.mark.attack
def test_forged_login_cookies_do_not_reach_the_provider(authed: Authed) -> None:
    authed.client.app.state.token_limiter = RateLimiter(60, 2)  # type: ignore[attr-defined]
    forged = base64.urlsafe_b64encode(orjson.dumps({"state": "s", "verifier": "v"})).decode()
    before = authed.idp.token_requests
    for n in range(10):
        authed.client.cookies.set(LOGIN, forged, path="/ui")
        authed.client.get("/ui/callback", params={"code": f"made-up-{n}", "state": "s"})
    reached = authed.idp.token_requests - before
    assert reached == 0, f"{reached} code exchanges reached the provider with a forged cookie"


@pytest.mark.attack
def test_a_login_cookie_is_refused_when_altered_or_old(authed: Authed) -> None:
    authed.client.app.state.token_limiter = RateLimiter(600, 100)  # type: ignore[attr-defined]
    cookie, _ = _started(authed.client)
    payload, mac = cookie.split(".")
    held = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    altered = _b64(orjson.dumps({**held, "state": "mine"}))
    old = _b64(orjson.dumps({**held, "at": int(time.time()) - 601}))
    key = derived_key(authed.services.settings, "console-login-cookie")
    mac_of_old = _b64(hmac.digest(key, old.encode(), "sha256"))
    before = authed.idp.token_requests
    for value, state in ((f"{altered}.{mac}", "mine"), (f"{old}.{mac_of_old}", held["state"])):
        authed.client.cookies.set(LOGIN, value, path="/ui")
        answer = authed.client.get("/ui/callback", params={"code": "c", "state": state})
        assert answer.status_code == 401, answer.text
        assert "took too long or was started elsewhere" in answer.text
    assert authed.idp.token_requests == before


def test_a_login_started_here_finishes(authed: Authed) -> None:
    client = authed.client
    _, authorization = _started(client)
    code, state = _code(authorization)
    answer = client.get(
        "/ui/callback", params={"code": code, "state": state}, follow_redirects=False
    )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/ui/projects"
    assert client.cookies.get(session.SESSION)


@pytest.mark.attack
def test_login_start_and_callback_are_rate_limited_per_address(authed: Authed) -> None:
    authed.client.app.state.token_limiter = RateLimiter(60, 3)  # type: ignore[attr-defined]
    _, authorization = _started(authed.client)
    code, state = _code(authorization)
    assert authed.client.get("/ui/login/start", follow_redirects=False).status_code == 303
    # The bucket (shared with the token endpoint) is down to one: the callback takes it.
    assert authed.client.get("/ui/callback", params={"code": code, "state": "x"}).status_code == 401
    for path in ("/ui/login/start", "/ui/callback"):
        limited = authed.client.get(path, params={"code": code, "state": state})
        assert limited.status_code == 429, (path, limited.status_code, limited.text)
        assert int(limited.headers["Retry-After"]) >= 1
    token = authed.client.post(
        "/catalog/v1/oauth/tokens", data={"grant_type": "client_credentials"}
    )
    assert token.status_code == 429

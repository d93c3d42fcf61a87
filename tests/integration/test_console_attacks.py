"""The console attacked: framed by another site, logged out by another site's form or link,
its cookies sent over plain http behind a TLS proxy; and the start-up warning for a server
without authentication."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.cli import open_mode_warning
from icelog.api.console.session import LOGIN, SESSION
from icelog.api.services import Services
from icelog.api.settings import Settings
from tests.integration.conftest import Api, Authed, _env_of, make_settings
from tests.support.idp import TestIdentityProvider

pytestmark = pytest.mark.attack


def _framing_refused(response: object) -> None:
    headers = response.headers  # type: ignore[attr-defined]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"


def test_console_answers_refuse_to_be_framed(authed: Authed, api: Api) -> None:
    for client, path in (
        (authed.client, "/ui/login"),
        (authed.client, "/ui/projects"),  # a redirect to the login page
        (authed.client, "/ui/static/console.css"),
        (api.client, "/ui/projects"),
        (api.client, "/ui/no/such/page"),
    ):
        response = client.get(path, follow_redirects=False)
        assert response.status_code in (200, 303, 404), (path, response.status_code)
        _framing_refused(response)
    # The API itself is not a page and keeps its own headers.
    assert "x-frame-options" not in api.client.get("/health").headers


def _session_deleted(response: object) -> bool:
    cookies = response.headers.get_list("set-cookie")  # type: ignore[attr-defined]
    return any(c.startswith(f"{SESSION}=") for c in cookies)


def test_logout_is_a_same_site_post(authed: Authed) -> None:
    client = authed.client
    client.cookies.set(SESSION, authed.idp.issue("alice"), path="/ui")
    link = client.get("/ui/logout", follow_redirects=False)  # e.g. <img src=/ui/logout>
    assert not _session_deleted(link) and link.status_code == 404
    for headers in ({"origin": "https://evil.example"}, {"sec-fetch-site": "cross-site"}):
        cross = client.post("/ui/logout", headers=headers, follow_redirects=False)
        assert cross.status_code == 403, cross.text
        assert not _session_deleted(cross)
    own = client.post("/ui/logout", headers={"origin": "http://testserver"}, follow_redirects=False)
    assert own.status_code == 303 and own.headers["location"] == "/ui/login?reason=out"
    assert _session_deleted(own)
    _framing_refused(own)


def _login_cookie(client: TestClient) -> str:
    started = client.get("/ui/login/start", follow_redirects=False)
    assert started.status_code == 303, started.text
    cookies: list[str] = started.headers.get_list("set-cookie")
    return next(c for c in cookies if c.startswith(f"{LOGIN}="))


def test_cookies_are_secure_even_when_icelog_sees_http(authed: Authed) -> None:
    # icelog behind a TLS-terminating proxy sees http; the cookie must still be Secure.
    assert "secure" in _login_cookie(authed.client).lower().split("; ")


@pytest.fixture
def insecure(tmp_path: Path, idp: TestIdentityProvider) -> Iterator[TestClient]:
    base = make_settings(tmp_path, None)
    env = {f"ICELOG_{k}": v for k, v in _env_of(base).items()}
    env |= {
        "ICELOG_OPENID_PROVIDER_URI": idp.uri,
        "ICELOG_OPENID_AUDIENCE": "icelog",
        "ICELOG_CONSOLE_INSECURE_COOKIES": "true",
    }
    settings = Settings.from_env(env)
    services = Services.build(settings)
    with TestClient(create_app(settings, services), raise_server_exceptions=False) as client:
        yield client
    services.close()


def test_plain_http_cookies_only_when_configured(insecure: TestClient) -> None:
    assert "secure" not in _login_cookie(insecure).lower().split("; ")


def test_the_open_mode_warning_names_the_reverse_proxy_hole() -> None:
    text = open_mode_warning("127.0.0.1")
    assert text.startswith("WARNING: authentication is OFF")
    assert "reverse proxy" in text and "ICELOG_OPENID_PROVIDER_URI" in text

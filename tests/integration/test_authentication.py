"""Authentication against a real local OpenID provider (tests/support/idp.py): every route
but the open ones needs a valid bearer token; callers are provisioned as users on their
first call (events with the real actor); tokens never reach the log or an error body."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icelog.api.cli import unauthenticated_refusal
from icelog.api.listen import is_loopback
from icelog.api.settings import Settings, SettingsError
from tests.integration.conftest import Authed
from tests.support.idp import new_rsa_key


def _assert_401(response: Any, token: str | None = None) -> None:
    assert response.status_code == 401, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("NotAuthorizedException", 401)
    assert response.headers["www-authenticate"].startswith("Bearer")
    if token:
        assert token not in response.text


ANY_ADDRESS = "0.0.0.0"  # noqa: S104 - what the refusal is about

ROUTES = [
    ("GET", "/catalog/v1/config"),
    ("GET", "/catalog/v1/namespaces"),
    ("POST", "/catalog/v1/namespaces"),
    ("GET", "/catalog/v1/namespaces/db/tables/t"),
    ("GET", "/management/v1/info"),
    ("GET", "/management/v1/warehouse"),
    ("GET", "/management/v1/events"),
    ("GET", "/management/v1/whoami"),
    ("GET", "/management/v1/user"),
]


def test_every_route_needs_a_valid_token(authed: Authed) -> None:
    idp = authed.idp
    expired = idp.issue("alice", expires_in=-600)
    other_audience = idp.issue("alice", audience="someone-else")
    unknown_key = idp.sign(
        {"iss": idp.issuer, "sub": "alice", "aud": "icelog", "exp": 2**31},
        kid="not-published",
        private_key=new_rsa_key(),
    )
    for method, path in ROUTES:
        _assert_401(authed.call(method, path, None))
        for bad in (expired, other_audience, unknown_key, "not.a.jwt"):
            _assert_401(authed.call(method, path, bad), bad)
        response = authed.client.request(method, path, headers={"Authorization": "Basic eDp5"})
        _assert_401(response)
    # Nothing was recorded for the refused calls.
    assert authed.services.primary.users(name=None, ids=None, after=None, limit=10) == []


def test_open_routes_need_no_token(authed: Authed) -> None:
    for path in ("/health", "/ready", "/metrics", "/api-docs/management/v1/openapi.json"):
        response = authed.client.get(path)
        assert response.status_code == 200, (path, response.text)


def test_a_first_call_provisions_the_user_and_every_event_carries_them(authed: Authed) -> None:
    token = authed.idp.issue(
        "alice", extra_claims={"name": "Alice Liddell", "email": "alice@example.com"}
    )
    # Alice's first call: she bootstraps (and so may use the default warehouse).
    bootstrap = {"accept-terms-of-use": True}
    assert authed.call("POST", "/management/v1/bootstrap", token, json=bootstrap).status_code == 204
    config = authed.call("GET", "/catalog/v1/config", token, params={"warehouse": "default"})
    assert config.status_code == 200, config.text
    prefix = config.json()["overrides"]["prefix"]
    me = authed.call("GET", "/management/v1/whoami", token).json()
    assert me["id"] == "oidc~alice"
    assert (me["name"], me["email"], me["user-type"]) == (
        "Alice Liddell",
        "alice@example.com",
        "human",
    )
    assert me["last-updated-with"] == "config-call-creation"
    created = authed.call(
        "POST", f"/catalog/v1/{prefix}/namespaces", token, json={"namespace": ["db"]}
    )
    assert created.status_code == 200, created.text
    # A second call appends nothing more for the user; a new name in the token updates them.
    authed.call("GET", "/management/v1/whoami", token)
    renamed = authed.idp.issue(
        "alice", extra_claims={"name": "Alice L.", "email": "alice@example.com"}
    )
    assert authed.call("GET", "/management/v1/whoami", renamed).json()["name"] == "Alice L."

    events = authed.events()
    user_events = [e.topic for e in events if e.topic.startswith("icelog.user.")]
    assert user_events == ["icelog.user.provisioned.v1", "icelog.user.updated.v1"]
    namespace_events = [e for e in events if e.topic.startswith("icelog.namespace.")]
    assert namespace_events
    assert all(b"oidc~alice" in e.state for e in namespace_events)
    for event in events:  # no token, no part of one, anywhere in the log
        assert token.encode() not in event.state
        assert token.split(".")[2].encode() not in event.state


def test_users_list_get_and_delete(authed: Authed) -> None:
    alice = authed.idp.issue("alice", extra_claims={"name": "Alice"})
    bob = authed.idp.issue("bob", extra_claims={"name": "Bob", "email": "bob@example.com"})
    app = authed.idp.issue("svc-etl", extra_claims={"app_displayname": "ETL"})
    bootstrap = {"accept-terms-of-use": True}  # alice administers users
    assert authed.call("POST", "/management/v1/bootstrap", alice, json=bootstrap).status_code == 204
    for token in (alice, bob, app):
        assert authed.call("GET", "/management/v1/whoami", token).status_code == 200
    listed = authed.call("GET", "/management/v1/user", alice).json()
    assert [u["id"] for u in listed["users"]] == ["oidc~alice", "oidc~bob", "oidc~svc-etl"]
    assert listed["users"][2]["user-type"] == "application"
    page = authed.call("GET", "/management/v1/user", alice, params={"pageSize": 2}).json()
    assert len(page["users"]) == 2 and page["next-page-token"]
    rest = authed.call(
        "GET",
        "/management/v1/user",
        alice,
        params={"pageSize": 2, "pageToken": page["next-page-token"]},
    ).json()
    assert [u["id"] for u in rest["users"]] == ["oidc~svc-etl"] and rest.get(
        "next-page-token"
    ) is None
    found = authed.call("GET", "/management/v1/user", alice, params={"name": "EXAMPLE.com"}).json()
    assert [u["id"] for u in found["users"]] == ["oidc~bob"]
    assert authed.call("GET", "/management/v1/user/oidc~bob", alice).json()["name"] == "Bob"
    assert authed.call("DELETE", "/management/v1/user/oidc~bob", alice).status_code == 204
    assert authed.call("GET", "/management/v1/user/oidc~bob", alice).status_code == 404
    # Bob's next call brings him back.
    assert authed.call("GET", "/management/v1/whoami", bob).json()["id"] == "oidc~bob"


def test_key_rotation_is_followed(authed: Authed) -> None:
    before = authed.idp.issue("alice")
    assert authed.call("GET", "/management/v1/whoami", before).status_code == 200
    authed.idp.rotate_keys()
    after = authed.idp.issue("alice")
    assert authed.call("GET", "/management/v1/whoami", after).status_code == 200
    # A withdrawn key is dropped when the cached key set is reloaded (hourly): unit-tested
    # with a clock in tests/unit/test_oidc.py.


def test_without_a_provider_only_loopback_is_served(tmp_path: Path) -> None:
    open_settings = Settings.from_env({"ICELOG_DATA_DIR": str(tmp_path)})
    assert not open_settings.auth.enabled
    assert unauthenticated_refusal(open_settings, "127.0.0.1") is None
    assert unauthenticated_refusal(open_settings, "::1") is None
    assert unauthenticated_refusal(open_settings, "localhost") is None
    refusal = unauthenticated_refusal(open_settings, ANY_ADDRESS)
    assert refusal is not None and "ICELOG_ALLOW_UNAUTHENTICATED" in refusal
    allowed = Settings.from_env(
        {"ICELOG_DATA_DIR": str(tmp_path), "ICELOG_ALLOW_UNAUTHENTICATED": "true"}
    )
    assert unauthenticated_refusal(allowed, ANY_ADDRESS) is None
    with_provider = Settings.from_env(
        {
            "ICELOG_DATA_DIR": str(tmp_path),
            "ICELOG_OPENID_PROVIDER_URI": "https://idp.example/realms/x",
        }
    )
    assert unauthenticated_refusal(with_provider, "10.0.0.5") is None
    assert not is_loopback("10.0.0.5") and is_loopback("127.0.0.2")
    with pytest.raises(SettingsError):
        Settings.from_env(
            {"ICELOG_DATA_DIR": str(tmp_path), "ICELOG_OPENID_PROVIDER_URI": "idp.example"}
        )


def test_the_token_endpoint_passes_client_credentials_and_exchange_to_the_provider(
    authed: Authed,
) -> None:
    idp = authed.idp
    idp.add_client("spark-job", "s3cret", {"aud": "icelog"})
    form = {"grant_type": "client_credentials", "client_id": "spark-job",
            "client_secret": "s3cret", "scope": "catalog"}  # fmt: skip
    answer = authed.client.post("/catalog/v1/oauth/tokens", data=form)
    assert answer.status_code == 200, answer.text
    token = answer.json()
    assert token["token_type"] == "bearer" and token["access_token"]
    me = authed.call("GET", "/management/v1/whoami", token["access_token"])
    assert me.json()["id"] == "oidc~service-account-spark-job"
    # HTTP Basic client authentication, as Iceberg Java sends it.
    basic = authed.client.post(
        "/catalog/v1/oauth/tokens", data={"grant_type": "client_credentials"},
        auth=("spark-job", "s3cret"),
    )  # fmt: skip
    assert basic.status_code == 200, basic.text
    # An end user's token exchanged for one the engine uses on their behalf.
    user_token = idp.issue("dana", audience="portal")
    exchanged = authed.client.post(
        "/catalog/v1/oauth/tokens",
        data={
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token": user_token,
            "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "audience": "icelog",
        },
        auth=("spark-job", "s3cret"),
    )
    assert exchanged.status_code == 200, exchanged.text
    dana = authed.call("GET", "/management/v1/whoami", exchanged.json()["access_token"])
    assert dana.json()["id"] == "oidc~dana"
    # The provider's refusals come back in the OAuth error shape, secrets never echoed.
    wrong = authed.client.post("/catalog/v1/oauth/tokens", data={**form, "client_secret": "x"})
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    assert "s3cret" not in wrong.text
    for bad in ({"grant_type": "password", "username": "a", "password": "b"}, {}):
        refused = authed.client.post("/catalog/v1/oauth/tokens", data=bad)
        assert refused.status_code == 400
        assert refused.json()["error"] == "unsupported_grant_type"


def test_the_token_endpoint_without_a_provider_says_so(api: Any) -> None:
    answer = api.client.post("/catalog/v1/oauth/tokens", data={"grant_type": "client_credentials"})
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_request"
    assert "ICELOG_OPENID_PROVIDER_URI" in answer.json()["error_description"]

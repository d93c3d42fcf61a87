"""Identities attacked through the API: a second provider cannot speak for the first
provider's users, and the user directory is the server admin's (users read themselves;
names and e-mails come from the token)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.api.settings import Settings
from tests.integration.conftest import BACKENDS, Authed, _env_of, make_settings
from tests.support import postgres
from tests.support.api_contract import check_response
from tests.support.idp import TestIdentityProvider

pytestmark = pytest.mark.attack
BOOTSTRAP = {"accept-terms-of-use": True}


@pytest.fixture(scope="module")
def partner() -> Iterator[TestIdentityProvider]:
    with TestIdentityProvider(path="/partner") as provider:
        yield provider


@pytest.fixture(params=BACKENDS)
def two(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    idp: TestIdentityProvider,
    partner: TestIdentityProvider,
) -> Iterator[Authed]:
    """A server trusting two providers: `idp` (the default, keyless) and `partner`."""
    database_url = postgres.create_database() if request.param == "postgres" else None
    try:
        base = make_settings(tmp_path, database_url)
        env = {
            "ICELOG_OPENID_PROVIDER_URI": f"{idp.uri},partner={partner.uri}",
            "ICELOG_OPENID_AUDIENCE": "icelog",
        }
        settings = Settings.from_env(
            {**{f"ICELOG_{k}": v for k, v in _env_of(base).items()}, **env}
        )
        services = Services.build(settings)
        with TestClient(create_app(settings, services), raise_server_exceptions=False) as client:
            client.event_hooks["response"].append(check_response)
            yield Authed(client, services, idp)
        services.close()
    finally:
        if database_url:
            postgres.drop_database(database_url)


def _server_actions(authed: Authed, token: str) -> list[str]:
    answer = authed.call("GET", "/management/v1/permissions/server/access", token)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["allowed-actions"])


def test_the_second_provider_cannot_be_the_first_providers_admin(
    two: Authed, partner: TestIdentityProvider
) -> None:
    admin = two.idp.issue("root", extra_claims={"name": "Root"})
    assert two.call("POST", "/management/v1/bootstrap", admin, json=BOOTSTRAP).status_code == 204
    assert "create_project" in _server_actions(two, admin)
    impostor = partner.issue("root", extra_claims={"name": "Root"})
    me = two.call("GET", "/management/v1/whoami", impostor).json()
    assert me["id"] == "partner~root"
    assert "create_project" not in _server_actions(two, impostor)
    refused = two.call("POST", "/management/v1/project", impostor, json={"project-name": "p"})
    assert refused.status_code == 403, refused.text
    # Nor does an `oid` claim (not Entra) pick someone else's id.
    oid = two.idp.issue("mallory", extra_claims={"oid": "root"})
    assert two.call("GET", "/management/v1/whoami", oid).json()["id"] == "oidc~mallory"
    assert "create_project" not in _server_actions(two, oid)


def test_a_user_without_grants_cannot_read_the_directory(authed: Authed) -> None:
    admin = authed.idp.issue("root", extra_claims={"name": "Root"})
    assert authed.call("POST", "/management/v1/bootstrap", admin, json=BOOTSTRAP).status_code == 204
    bob = authed.idp.issue("bob", extra_claims={"name": "Bob", "email": "bob@example.com"})
    eve = authed.idp.issue("eve", extra_claims={"name": "Eve"})
    for token in (bob, eve):
        assert authed.call("GET", "/management/v1/whoami", token).status_code == 200
    listed = authed.call("GET", "/management/v1/user", eve, params={"name": "example"})
    assert listed.status_code == 403, listed.text
    assert "bob@example.com" not in listed.text
    other = authed.call("GET", "/management/v1/user/oidc~bob", eve)
    assert other.status_code == 403, other.text
    assert "bob@example.com" not in other.text
    # Eve reads herself; the admin reads and lists everyone.
    assert authed.call("GET", "/management/v1/user/oidc~eve", eve).json()["name"] == "Eve"
    assert authed.call("GET", "/management/v1/user/oidc~bob", admin).status_code == 200
    everyone = authed.call("GET", "/management/v1/user", admin).json()["users"]
    assert {u["id"] for u in everyone} == {"oidc~root", "oidc~bob", "oidc~eve"}
    # A project's security admin finds whom to grant to there.
    nil = "00000000-0000-0000-0000-000000000000"
    grant = {"writes": [{"type": "security_admin", "user": "oidc~eve"}]}
    path = f"/management/v1/permissions/project/{nil}/assignments"
    assert authed.call("POST", path, admin, json=grant).status_code == 204
    found = authed.call("GET", "/management/v1/user", eve, params={"name": "bob"})
    assert found.status_code == 200, found.text
    assert [u["id"] for u in found.json()["users"]] == ["oidc~bob"]


def test_users_cannot_give_themselves_another_name_or_email(authed: Authed) -> None:
    eve = authed.idp.issue("eve", extra_claims={"name": "Eve", "email": "eve@example.com"})
    assert authed.call("GET", "/management/v1/whoami", eve).status_code == 200
    for body in (
        {"name": "Bob", "update-if-exists": True},
        {"email": "bob@example.com", "update-if-exists": True},
        {"id": "oidc~eve", "name": "Bob", "email": "bob@example.com", "update-if-exists": True},
    ):
        answer = authed.call("POST", "/management/v1/user", eve, json=body)
        assert answer.status_code == 403, (body, answer.text)
    update = {"name": "Bob", "email": "bob@example.com", "user-type": "human"}
    answer = authed.call("PUT", "/management/v1/user/oidc~eve", eve, json=update)
    assert answer.status_code == 403, answer.text
    me = authed.call("GET", "/management/v1/whoami", eve).json()
    assert (me["name"], me["email"]) == ("Eve", "eve@example.com")
    # Provisioning oneself from the token is still open.
    assert authed.call("POST", "/management/v1/user", eve, json={}).status_code in (200, 201)

"""The token endpoint attacked: repeated fields, fields icelog does not know, a flood from one
address, a provider slow enough to fill its pool."""

from __future__ import annotations

import time

import pytest

from icelog.api.auth.provider_calls import ProviderCalls, RateLimiter
from tests.integration.conftest import Authed

pytestmark = pytest.mark.attack
TOKENS = "/catalog/v1/oauth/tokens"
CLIENT = {"client_id": "spark-job", "client_secret": "s3cret"}


@pytest.fixture
def client_idp(authed: Authed) -> Authed:
    authed.idp.add_client("spark-job", "s3cret", {"aud": "icelog"})
    return authed


def _post(authed: Authed, body: str) -> object:
    headers = {"content-type": "application/x-www-form-urlencoded"}
    return authed.client.post(TOKENS, content=body.encode(), headers=headers)


def test_a_repeated_grant_type_is_refused(client_idp: Authed) -> None:
    before = client_idp.idp.token_requests
    for body in (
        "grant_type=client_credentials&grant_type=authorization_code"
        "&client_id=spark-job&client_secret=s3cret",
        "grant_type=client_credentials&grant_type=&client_id=spark-job&client_secret=s3cret",
        "grant_type=client_credentials&client_id=spark-job&client_id=other&client_secret=s3cret",
    ):
        answer = _post(client_idp, body)
        assert answer.status_code == 400, answer.text  # type: ignore[attr-defined]
        assert answer.json()["error"] == "invalid_request"  # type: ignore[attr-defined]
    assert client_idp.idp.token_requests == before  # nothing reached the provider


def test_only_the_grants_fields_reach_the_provider(client_idp: Authed) -> None:
    body = (
        "grant_type=client_credentials&client_id=spark-job&client_secret=s3cret&scope=catalog"
        "&code=stolen&redirect_uri=https%3A%2F%2Fevil.example&extra=1"
    )
    answer = _post(client_idp, body)
    assert answer.status_code == 200, answer.text  # type: ignore[attr-defined]
    assert set(client_idp.idp.last_token_form) == {
        "grant_type", "client_id", "client_secret", "scope",
    }  # fmt: skip


def test_a_flood_from_one_address_gets_429(client_idp: Authed) -> None:
    client_idp.client.app.state.token_limiter = RateLimiter(60, 2)  # type: ignore[attr-defined]
    form = {"grant_type": "client_credentials", **CLIENT}
    statuses = [client_idp.client.post(TOKENS, data=form).status_code for _ in range(4)]
    assert statuses[:2] == [200, 200] and statuses[2:] == [429, 429]
    refused = client_idp.client.post(TOKENS, data=form)
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.json()["error"] == "invalid_request"


def test_a_full_provider_pool_answers_503_at_once(client_idp: Authed) -> None:
    pool = ProviderCalls(threads=1, waiting=0)
    client_idp.client.app.state.provider_calls = pool  # type: ignore[attr-defined]
    form = {"grant_type": "client_credentials", **CLIENT}
    assert pool.try_hold()  # a slow provider call holds the only slot
    try:
        started = time.monotonic()
        answer = client_idp.client.post(TOKENS, data=form)
        assert answer.status_code == 503, answer.text
        assert answer.headers["retry-after"] == "1"
        assert time.monotonic() - started < 2.0
        # The rest of the API is not held up meanwhile.
        me = client_idp.call("GET", "/management/v1/whoami", client_idp.idp.issue("alice"))
        assert me.status_code == 200
    finally:
        pool.release()
    assert client_idp.client.post(TOKENS, data=form).status_code == 200


def test_the_rate_limiter_forgets_the_least_recent_address_first() -> None:
    now = [0.0]
    limiter = RateLimiter(60, 1, max_keys=3, clock=lambda: now[0])
    for address in ("a", "b", "c", "d"):
        assert limiter.take(address) is None
    assert len(limiter) == 3
    assert limiter.take("d") == 1  # still limited
    assert limiter.take("a") is None  # forgotten: a fresh bucket
    now[0] += 1.0
    assert limiter.take("d") is None

"""OIDC bearer-token verification against a real local IdP (tests/support/idp.py) over HTTP.

Nothing of the verifier is mocked: it discovers the IdP, fetches its JWKS and checks tokens
with PyJWT. Only the clock is sometimes a fake one (to cross the refetch and retry windows
without sleeping) and the fetcher sometimes a wrapper that can play an IdP outage.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from icelog.api.auth.oidc import (
    IdentityProviderUnavailable,
    InvalidToken,
    OidcProvider,
    TokenVerifier,
    fetch_url,
)
from icelog.api.auth.principal import Principal
from tests.support.idp import TOKEN_EXCHANGE, TestIdentityProvider, new_rsa_key


@pytest.fixture
def idp() -> Iterator[TestIdentityProvider]:
    with TestIdentityProvider() as provider:
        yield provider


class FakeClock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class SwitchableFetch:
    """The real fetcher, counting calls, that fails while `down` (an IdP outage)."""

    def __init__(self) -> None:
        self.down = False
        self.calls: list[str] = []
        self.gate: threading.Event | None = None  # when set, fetches wait for it (a slow IdP)

    def __call__(self, url: str) -> bytes:
        self.calls.append(url)
        if self.gate is not None:
            assert self.gate.wait(timeout=10)
        if self.down:
            raise ConnectionRefusedError("IdP is down")
        return fetch_url(url)


def verifier(
    idp: TestIdentityProvider,
    *,
    fetch: Callable[[str], bytes] = fetch_url,
    clock: Callable[[], float] = time.time,
    **config: Any,
) -> TokenVerifier:
    config.setdefault("audiences", ("icelog",))
    return TokenVerifier([OidcProvider(idp.uri, **config)], fetch=fetch, clock=clock)


def verify(v: TokenVerifier, token: str) -> Principal:
    return asyncio.run(v.verify(token))


def refused(v: TokenVerifier, token: str) -> InvalidToken:
    """The refusal of `token`, checked to be safe to show: it never echoes the token."""
    with pytest.raises(InvalidToken) as caught:
        verify(v, token)
    error = caught.value
    for text in (str(error), repr(error)):
        assert token not in text or not token
        for part in token.split("."):
            assert len(part) < 8 or part not in text
    # No chained exception (PyJWT's, with its details) would reach a traceback in a log.
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__
    return error


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(header: dict[str, Any], claims: object) -> str:
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"


def claims_of(idp: TestIdentityProvider) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": idp.issuer, "sub": "alice", "aud": "icelog", "iat": now, "exp": now + 600}


# -- valid tokens -------------------------------------------------------------------------


def test_a_valid_token_gives_its_principal(idp: TestIdentityProvider) -> None:
    token = idp.issue("alice", extra_claims={"name": "Alice Adams", "email": "alice@example.com"})
    assert verify(verifier(idp), token) == Principal(
        user_id="oidc~alice",
        name="Alice Adams",
        email="alice@example.com",
        user_type="human",
        issuer=idp.issuer,
    )


def test_a_machine_token_is_an_application(idp: TestIdentityProvider) -> None:
    token = idp.issue("c0ffee", extra_claims={"azp": "spark"})
    principal = verify(verifier(idp), token)
    assert principal.user_type == "application"
    assert principal.name == "Nameless App with ID oidc~c0ffee"


def test_expiry_within_the_leeway_is_accepted(idp: TestIdentityProvider) -> None:
    v = verifier(idp, leeway_seconds=60)
    assert verify(v, idp.issue(expires_in=-30)).user_id == "oidc~alice"
    assert "expired" in str(refused(verifier(idp, leeway_seconds=0), idp.issue(expires_in=-30)))


def test_an_integer_subject_and_configured_subject_claims(idp: TestIdentityProvider) -> None:
    assert verify(verifier(idp), idp.sign(claims_of(idp) | {"sub": 4711})).user_id == "oidc~4711"
    token = idp.issue(extra_claims={"oid": "object-1", "employee_id": "e-7"})
    assert verify(verifier(idp), token).user_id == "oidc~alice"  # not Entra: `sub`
    assert verify(verifier(idp, subject_claims=("employee_id",)), token).user_id == "oidc~e-7"
    assert "configured subject" in str(refused(verifier(idp, subject_claims=("nope",)), token))


def test_provider_uri_with_a_path_and_a_trailing_slash() -> None:
    with TestIdentityProvider(path="/realms/iceberg") as idp:
        v = TokenVerifier([OidcProvider(idp.uri + "/")])
        assert idp.issuer.endswith("/realms/iceberg")
        assert verify(v, idp.issue("bob")).user_id == "oidc~bob"


# -- refusals -----------------------------------------------------------------------------


def alg_none(idp: TestIdentityProvider) -> str:
    return unsigned({"alg": "none", "typ": "JWT"}, claims_of(idp)) + "."


def hs256_with_the_public_key(idp: TestIdentityProvider) -> str:
    """The classic confusion attack: HMAC keyed with the (public) RSA key's PEM."""
    signing_input = unsigned({"alg": "HS256", "typ": "JWT", "kid": idp.signing_kid}, claims_of(idp))
    mac = hmac.new(idp.public_pem(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(mac)}"


def foreign_signature(idp: TestIdentityProvider) -> str:
    """Signed by a key the IdP does not publish, under the kid of one it does."""
    return idp.sign(claims_of(idp), kid=idp.signing_kid, private_key=new_rsa_key())


def tampered(idp: TestIdentityProvider) -> str:
    header, _, signature = idp.issue("alice").split(".")
    payload = b64(json.dumps(claims_of(idp) | {"sub": "admin"}).encode())
    return f"{header}.{payload}.{signature}"


def now_plus(seconds: int) -> int:
    return int(time.time()) + seconds


REFUSALS: dict[str, tuple[Callable[[TestIdentityProvider], str], str]] = {
    "expired": (lambda idp: idp.issue(expires_in=-600), "token has expired"),
    "not yet valid": (lambda idp: idp.issue(not_before=now_plus(600)), "not yet valid"),
    "issued in the future": (
        lambda idp: idp.issue(extra_claims={"iat": now_plus(600)}),
        "not yet valid",
    ),
    "wrong audience": (lambda idp: idp.issue(audience="other-app"), "audience is not accepted"),
    "no audience": (lambda idp: idp.issue(audience=None), "lacks the aud claim"),
    "wrong issuer": (
        lambda idp: idp.issue(extra_claims={"iss": "https://evil.example"}),
        "issuer is not accepted",
    ),
    "no issuer": (lambda idp: idp.issue(extra_claims={"iss": None}), "token has no issuer"),
    "no expiry": (lambda idp: idp.issue(extra_claims={"exp": None}), "lacks the exp claim"),
    "no subject": (lambda idp: idp.issue(extra_claims={"sub": None}), "token has no subject"),
    "bad signature": (foreign_signature, "signature is invalid"),
    "tampered payload": (tampered, "signature is invalid"),
    "alg none": (alg_none, "algorithm is not accepted"),
    "HS256 keyed with the public key": (hs256_with_the_public_key, "algorithm is not accepted"),
    "algorithm other than the key's": (
        lambda idp: idp.sign(claims_of(idp), algorithm="PS256"),
        "does not match its key",
    ),
    "unknown kid": (
        lambda idp: idp.sign(claims_of(idp), kid="no-such-kid", private_key=new_rsa_key()),
        "signing key is unknown",
    ),
    "empty": (lambda idp: "", "malformed"),
    "one word": (lambda idp: "not-a-jwt", "malformed"),
    "three dots of garbage": (lambda idp: "abc.def.ghi", "malformed"),
    "header not JSON": (lambda idp: f"{b64(b'{nope')}.{b64(b'{}')}.sig", "malformed"),
    "payload not an object": (lambda idp: unsigned({"alg": "RS256"}, [1]) + ".c2ln", "malformed"),
    "huge": (lambda idp: "eyJ" + "A" * 40_000, "malformed"),
}


@pytest.mark.parametrize("case", REFUSALS, ids=list(REFUSALS))
def test_bad_tokens_are_refused_with_a_safe_reason(idp: TestIdentityProvider, case: str) -> None:
    make, reason = REFUSALS[case]
    token = make(idp)
    error = refused(verifier(idp), token)
    assert reason in str(error)
    assert not isinstance(error, IdentityProviderUnavailable)


def test_refusals_never_echo_claims(idp: TestIdentityProvider) -> None:
    secret_sub = "sub-" + secrets.token_hex(16)
    token = idp.issue(secret_sub, audience="other-app")
    assert secret_sub not in str(refused(verifier(idp), token))


# -- audiences and issuers ----------------------------------------------------------------


def test_any_one_of_several_audiences_is_enough(idp: TestIdentityProvider) -> None:
    v = verifier(idp, audiences=("lakehouse", "icelog"))
    assert verify(v, idp.issue(audience="icelog")).user_id == "oidc~alice"
    assert verify(v, idp.issue(audience=["account", "lakehouse"])).user_id == "oidc~alice"
    assert "audience" in str(refused(v, idp.issue(audience=["account", "other"])))


def test_without_configured_audiences_aud_is_not_checked(idp: TestIdentityProvider) -> None:
    v = verifier(idp, audiences=())
    assert verify(v, idp.issue(audience="anything")).user_id == "oidc~alice"
    assert verify(v, idp.issue(audience=None)).user_id == "oidc~alice"


def test_additional_issuers_are_accepted(idp: TestIdentityProvider) -> None:
    legacy = "https://sts.example/tenant-1/"
    token = idp.issue(extra_claims={"iss": legacy})
    assert "issuer" in str(refused(verifier(idp), token))
    principal = verify(verifier(idp, additional_issuers=(legacy,)), token)
    assert principal.issuer == legacy


def test_several_providers_each_verify_their_own_tokens() -> None:
    with TestIdentityProvider() as first, TestIdentityProvider(path="/eks") as second:
        v = TokenVerifier([OidcProvider(first.uri), OidcProvider(second.uri, key="eks")])
        assert verify(v, first.issue("alice")).issuer == first.issuer
        assert verify(v, second.issue("pod")).issuer == second.issuer
        # A token claiming one IdP but signed by the other's key is no token of either.
        forged = second.sign(claims_of(first), kid=first.signing_kid, private_key=new_rsa_key())
        assert "signature" in str(refused(v, forged))
        assert (first.jwks_requests, second.jwks_requests) == (1, 1)


def test_an_unreachable_provider_does_not_block_the_others(idp: TestIdentityProvider) -> None:
    dead = OidcProvider("http://127.0.0.1:9")  # the discard port: connection refused
    v = TokenVerifier([dead, OidcProvider(idp.uri, key="second")])
    assert verify(v, idp.issue("alice")).user_id == "second~alice"
    error = refused(v, idp.issue(extra_claims={"iss": "https://unknown.example"}))
    assert isinstance(error, IdentityProviderUnavailable)


@pytest.mark.attack
def test_a_second_provider_cannot_mint_the_first_providers_users() -> None:
    """Provider B's token naming A's admin's subject is B's user, not A's."""
    with TestIdentityProvider() as first, TestIdentityProvider(path="/b") as second:
        v = TokenVerifier([OidcProvider(first.uri), OidcProvider(second.uri, key="partner")])
        assert verify(v, first.issue("admin")).user_id == "oidc~admin"
        assert verify(v, second.issue("admin")).user_id == "partner~admin"
        # Subjects that try to spell the other form stay inside their provider's ids.
        assert verify(v, second.issue("~admin")).user_id == "partner~~admin"
        assert verify(v, first.issue("partner~admin")).user_id == "oidc~partner~admin"


@pytest.mark.attack
def test_oid_is_the_subject_only_for_entra(idp: TestIdentityProvider) -> None:
    """A non-Entra token's `oid` is a claim like any other: `sub` names the user."""
    token = idp.issue("alice", extra_claims={"oid": "the-admins-object-id"})
    assert verify(verifier(idp), token).user_id == "oidc~alice"


def test_two_providers_with_one_key_are_refused(idp: TestIdentityProvider) -> None:
    with pytest.raises(ValueError, match="own key"):
        TokenVerifier([OidcProvider(idp.uri), OidcProvider(idp.uri + "/x")])
    with pytest.raises(ValueError, match="own key"):
        TokenVerifier([OidcProvider(idp.uri, key="a"), OidcProvider(idp.uri + "/x", key="a")])


def test_an_unknown_issuer_with_every_provider_up(idp: TestIdentityProvider) -> None:
    error = refused(verifier(idp), idp.issue(extra_claims={"iss": "https://unknown.example"}))
    assert str(error) == "token issuer is not accepted"


# -- keys: algorithms, rotation, refetch limits -------------------------------------------


def test_keys_published_without_alg_accept_any_allowed_rsa_algorithm() -> None:
    with TestIdentityProvider(publish_alg=False) as idp:
        v = verifier(idp)
        assert verify(v, idp.sign(claims_of(idp), algorithm="RS256")).user_id == "oidc~alice"
        assert verify(v, idp.sign(claims_of(idp), algorithm="PS384")).user_id == "oidc~alice"
        only_rs256 = verifier(idp, algorithms=("RS256",))
        assert "algorithm" in str(refused(only_rs256, idp.sign(claims_of(idp), algorithm="PS256")))


def test_a_token_without_kid_uses_the_only_key(idp: TestIdentityProvider) -> None:
    token = idp.sign(claims_of(idp), private_key=idp.private_key())
    assert verify(verifier(idp), token).user_id == "oidc~alice"
    idp.rotate_keys()
    assert "unknown" in str(refused(verifier(idp), token))


def test_after_rotation_the_new_kid_verifies_with_one_refetch(idp: TestIdentityProvider) -> None:
    v = verifier(idp)
    old = idp.issue("alice")
    verify(v, old)
    assert idp.jwks_requests == 1
    idp.rotate_keys()
    assert verify(v, idp.issue("bob")).user_id == "oidc~bob"
    assert idp.jwks_requests == 2
    assert verify(v, old).user_id == "oidc~alice"  # the old key is still published
    assert idp.jwks_requests == 2


def test_a_flood_of_unknown_kids_causes_few_refetches(idp: TestIdentityProvider) -> None:
    clock = FakeClock()
    v = verifier(idp, clock=clock)
    verify(v, idp.issue())
    assert idp.jwks_requests == 1
    stranger = new_rsa_key()
    made_up = [
        idp.sign(claims_of(idp), kid=secrets.token_hex(8), private_key=stranger) for _ in range(50)
    ]

    async def all_at_once() -> list[BaseException | Principal]:
        return await asyncio.gather(*(v.verify(t) for t in made_up), return_exceptions=True)

    answers = asyncio.run(all_at_once())
    assert all("signing key is unknown" in str(a) for a in answers)
    # One refetch for the first, one (a slot later) for all that came while it ran.
    assert idp.jwks_requests <= 3
    fetched = idp.jwks_requests
    for token in made_up:  # the same made-up kids again: refused without fetching
        assert "signing key is unknown" in str(refused(v, token))
    assert idp.jwks_requests == fetched


@pytest.mark.attack
def test_a_made_up_kid_does_not_hold_back_a_real_rotation(idp: TestIdentityProvider) -> None:
    """A made-up kid just before a rotation used to block refetches for 30 s."""
    clock = FakeClock()
    v = verifier(idp, clock=clock)
    verify(v, idp.issue())
    stranger = new_rsa_key()
    attack = idp.sign(claims_of(idp), kid="made-up", private_key=stranger)
    assert "signing key is unknown" in str(refused(v, attack))
    assert idp.jwks_requests == 2
    idp.rotate_keys()
    new = idp.issue("bob")
    started = time.monotonic()
    assert verify(v, new).user_id == "oidc~bob"  # waits for the next slot, then fetches
    assert time.monotonic() - started < 5
    assert idp.jwks_requests == 3
    # A changed key set forgets the missed kids; the made-up one is looked up again later.
    clock.advance(3)
    assert "signing key is unknown" in str(refused(v, attack))
    assert idp.jwks_requests == 4


def test_concurrent_requests_with_a_new_kid_cause_one_fetch(idp: TestIdentityProvider) -> None:
    v = verifier(idp)
    verify(v, idp.issue())
    idp.rotate_keys()
    tokens = [idp.issue(f"user-{i}") for i in range(50)]

    async def all_at_once() -> list[Principal]:
        return await asyncio.gather(*(v.verify(t) for t in tokens))

    principals = asyncio.run(all_at_once())
    assert [p.user_id for p in principals] == [f"oidc~user-{i}" for i in range(50)]
    assert idp.jwks_requests == 2


def test_a_cold_start_under_load_fetches_discovery_and_keys_once(
    idp: TestIdentityProvider,
) -> None:
    v = verifier(idp)
    token = idp.issue()

    async def all_at_once() -> list[Principal]:
        return await asyncio.gather(*(v.verify(token) for _ in range(50)))

    assert len(asyncio.run(all_at_once())) == 50
    assert (idp.discovery_requests, idp.jwks_requests) == (1, 1)


def test_cached_keys_verify_inline_without_threads_or_fetches(
    idp: TestIdentityProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    v = verifier(idp)
    verify(v, idp.issue())

    def no_thread(*args: object, **kwargs: object) -> None:
        raise AssertionError("a thread hop with cached keys")

    monkeypatch.setattr(asyncio, "to_thread", no_thread)
    for i in range(20):
        assert verify(v, idp.issue(f"u{i}")).user_id == f"oidc~u{i}"
    assert (idp.discovery_requests, idp.jwks_requests) == (1, 1)


def test_keys_are_reloaded_after_an_hour_so_withdrawn_keys_stop_working(
    idp: TestIdentityProvider,
) -> None:
    clock = FakeClock()
    v = verifier(idp, clock=clock)
    old = idp.issue("alice")
    verify(v, old)
    idp.rotate_keys(drop_old=True)
    clock.advance(3601)
    assert "unknown" in str(refused(v, old))
    assert verify(v, idp.issue("bob")).user_id == "oidc~bob"
    assert idp.jwks_requests == 2


# -- outages ------------------------------------------------------------------------------


def test_discovery_failures_are_retried_no_more_than_every_5_s(idp: TestIdentityProvider) -> None:
    clock, fetch = FakeClock(), SwitchableFetch()
    v = verifier(idp, clock=clock, fetch=fetch)
    fetch.down = True
    token = idp.issue()
    assert isinstance(refused(v, token), IdentityProviderUnavailable)
    assert len(fetch.calls) == 1
    for _ in range(10):
        assert str(refused(v, token)) == "identity provider is unavailable"
    assert len(fetch.calls) == 1
    clock.advance(5)
    fetch.down = False
    assert verify(v, token).user_id == "oidc~alice"
    assert fetch.calls[-2:] == [f"{idp.uri}/.well-known/openid-configuration", f"{idp.uri}/jwks"]


def test_cached_keys_outlive_an_idp_outage(idp: TestIdentityProvider) -> None:
    clock, fetch = FakeClock(), SwitchableFetch()
    v = verifier(idp, clock=clock, fetch=fetch)
    token = idp.issue()
    verify(v, token)
    fetch.down = True
    clock.advance(3601)  # keys are stale, and reloading them fails
    assert verify(v, token).user_id == "oidc~alice"
    calls = len(fetch.calls)
    assert verify(v, token).user_id == "oidc~alice"
    assert len(fetch.calls) == calls  # the failed reload is not retried at once


def test_a_slow_reload_of_stale_keys_does_not_hold_up_known_kids(
    idp: TestIdentityProvider,
) -> None:
    clock, fetch = FakeClock(), SwitchableFetch()
    v = verifier(idp, clock=clock, fetch=fetch)
    token = idp.issue()
    verify(v, token)
    clock.advance(3601)
    fetch.gate = gate = threading.Event()

    async def scenario() -> None:
        reloading = asyncio.create_task(v.verify(token))
        while len(fetch.calls) < 3:  # discovery, JWKS, and now the reload under way
            await asyncio.sleep(0.01)
        others = asyncio.gather(*(v.verify(idp.issue(f"u{i}")) for i in range(10)))
        assert len(await asyncio.wait_for(others, timeout=5)) == 10
        assert not reloading.done()
        gate.set()
        assert (await reloading).user_id == "oidc~alice"

    asyncio.run(scenario())
    assert idp.jwks_requests == 2


def test_a_discovery_document_without_jwks_uri_is_unusable(idp: TestIdentityProvider) -> None:
    body = json.dumps({"issuer": idp.issuer, "token_endpoint": idp.token_endpoint}).encode()
    idp.documents["/.well-known/openid-configuration"] = body
    assert isinstance(refused(verifier(idp), idp.issue()), IdentityProviderUnavailable)


def test_an_unusable_jwks_is_unavailable_not_unknown_key(idp: TestIdentityProvider) -> None:
    idp.documents["/jwks"] = b'{"keys": "none"}'
    assert isinstance(refused(verifier(idp), idp.issue()), IdentityProviderUnavailable)


# -- configuration and the default fetcher ------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        {"algorithms": ("HS256",)},
        {"algorithms": ("RS256", "none")},
        {"algorithms": ()},
        {"leeway_seconds": -1},
        {"provider_uri": "file:///etc/idp"},
    ],
)
def test_unsafe_provider_configuration_is_refused(config: dict[str, Any]) -> None:
    uri = config.pop("provider_uri", "https://idp.example")
    with pytest.raises(ValueError):
        OidcProvider(uri, **config)


def test_fetch_url_refuses_other_schemes_and_big_documents(idp: TestIdentityProvider) -> None:
    with pytest.raises(ValueError):
        fetch_url("file:///etc/passwd")
    idp.documents["/big"] = b" " * (1024 * 1024) + b"{}"
    with pytest.raises(ValueError, match="1 MiB"):
        fetch_url(f"{idp.uri}/big")
    assert json.loads(fetch_url(f"{idp.uri}/jwks"))["keys"]


def test_token_endpoint_comes_from_discovery(idp: TestIdentityProvider) -> None:
    assert asyncio.run(verifier(idp).token_endpoint()) == idp.token_endpoint
    assert asyncio.run(TokenVerifier([]).token_endpoint()) is None


# -- the test IdP's token endpoint, end to end --------------------------------------------


def test_client_credentials_tokens_verify(idp: TestIdentityProvider) -> None:
    idp.add_client("spark", "s3cret", {"app_displayname": "Spark ETL"})
    basic = httpx.post(
        idp.token_endpoint, data={"grant_type": "client_credentials"}, auth=("spark", "s3cret")
    )
    form = httpx.post(
        idp.token_endpoint,
        data={"grant_type": "client_credentials", "client_id": "spark", "client_secret": "s3cret"},
    )
    for answer in (basic, form):
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["token_type"] == "Bearer"
        assert body["expires_in"] > 0
        assert body["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
        principal = verify(verifier(idp), body["access_token"])
        assert principal.user_id == "oidc~service-account-spark"
        assert (principal.name, principal.user_type) == ("Spark ETL", "application")


@pytest.mark.parametrize(
    ("data", "auth", "status", "error"),
    [
        ({"grant_type": "client_credentials"}, ("spark", "wrong"), 401, "invalid_client"),
        ({"grant_type": "client_credentials"}, ("nobody", "x"), 401, "invalid_client"),
        ({"grant_type": "client_credentials"}, None, 401, "invalid_client"),
        ({"grant_type": "password"}, ("spark", "s3cret"), 400, "unsupported_grant_type"),
        ({}, ("spark", "s3cret"), 400, "invalid_request"),
    ],
)
def test_token_endpoint_errors(
    idp: TestIdentityProvider,
    data: dict[str, str],
    auth: tuple[str, str] | None,
    status: int,
    error: str,
) -> None:
    idp.add_client("spark", "s3cret")
    answer = httpx.post(idp.token_endpoint, data=data, auth=auth)
    assert (answer.status_code, answer.json()["error"]) == (status, error)


def exchange(idp: TestIdentityProvider, subject_token: str, **extra: str) -> httpx.Response:
    data = {
        "grant_type": TOKEN_EXCHANGE,
        "subject_token": subject_token,
        "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
        **extra,
    }
    return httpx.post(idp.token_endpoint, data=data, auth=("engine", "pw"))


def test_token_exchange_keeps_the_subject_and_sets_the_audience(
    idp: TestIdentityProvider,
) -> None:
    idp.add_client("engine", "pw")
    alice = idp.issue("alice", audience="ui", extra_claims={"name": "Alice"})
    answer = exchange(idp, alice, audience="icelog")
    assert answer.status_code == 200, answer.text
    exchanged = answer.json()["access_token"]
    principal = verify(verifier(idp), exchanged)
    assert (principal.user_id, principal.name) == ("oidc~alice", "Alice")
    assert "audience" in str(refused(verifier(idp), alice))


@pytest.mark.parametrize(
    "subject_token",
    [
        lambda idp: idp.issue(expires_in=-600),
        foreign_signature,
        lambda idp: "garbage",
    ],
    ids=["expired", "foreign", "garbage"],
)
def test_token_exchange_needs_a_valid_token_of_this_idp(
    idp: TestIdentityProvider, subject_token: Callable[[TestIdentityProvider], str]
) -> None:
    idp.add_client("engine", "pw")
    answer = exchange(idp, subject_token(idp), audience="icelog")
    assert (answer.status_code, answer.json()["error"]) == (400, "invalid_request")

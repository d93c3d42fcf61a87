"""OpenID Connect bearer tokens, verified locally against the providers' published keys.

Like Lakekeeper, icelog never asks the IdP about a token: it loads each provider's
`.well-known/openid-configuration` (which must name `issuer` and `jwks_uri`) and its JWKS
once, then checks signatures and claims in-process. The token's (unverified) `iss` picks the
provider; PyJWT then checks signature, algorithm, issuer, audience and lifetime.

Keys are cached. A token signed with a key id the cache does not know makes the verifier
fetch the JWKS again (the IdP rotated its keys). A flood of made-up key ids can neither turn
icelog into an amplifier against the IdP nor hold a real rotation back:
unknown-kid refetches happen at most once per `UNKNOWN_KID_REFETCH_SECONDS` per provider,
and a request whose kid arrives in between *waits* for the next one (one fetch answers
everyone who arrived before it started) instead of being refused; a kid a refetch did not
find is refused without fetching for `UNKNOWN_KID_MEMORY_SECONDS` (at most
`MAX_UNKNOWN_KIDS` remembered, forgotten whenever a fetch brings a changed key set). The
JWKS is also
reloaded when it is an hour old, so a key the IdP withdrew stops being trusted. Network
fetches run in a worker thread (never on the event loop) and one at a time per provider; a
verification whose key is cached runs inline.

Every refusal is an `InvalidToken` whose message is a short reason that is safe to return to
the client; `IdentityProviderUnavailable` (a subclass) says the IdP could not be reached.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.client import HTTPMessage
from typing import IO, Any, TypeVar

import jwt
from jwt.types import Options

from icelog.api.auth.principal import InvalidToken, Principal, principal_from_claims
from icelog.domain.user_ids import subject_claim_order, valid_key

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "IdentityProviderUnavailable",
    "InvalidToken",
    "OidcProvider",
    "Principal",
    "TokenVerifier",
    "fetch_url",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Only public-key algorithms: with HS* the "key" would be public JWKS material anyone can
# read (the RS256→HS256 confusion attack), and `none` is no signature at all.
ASYMMETRIC_ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)  # fmt: skip

UNKNOWN_KID_REFETCH_SECONDS = 2.0  # unknown-kid refetches per provider: at most one per this
UNKNOWN_KID_MEMORY_SECONDS = 30.0  # a kid a refetch did not find is refused this long at once
MAX_UNKNOWN_KIDS = 1024
FAILED_FETCH_RETRY_SECONDS = 5.0  # an unreachable IdP is asked again no sooner than this
JWKS_MAX_AGE_SECONDS = 3600.0  # cached keys are reloaded after this, to drop withdrawn keys
VERIFIED_FOR_SECONDS = 300.0  # a verified token is trusted again for this long (or to exp)
MAX_VERIFIED_TOKENS = 10_000  # bounds the memory of remembered tokens
FETCH_TIMEOUT_SECONDS = 10.0
MAX_DOCUMENT_BYTES = 1 << 20
MAX_TOKEN_CHARS = 32 * 1024  # far above real tokens; bounds the JSON parsed before any check


class IdentityProviderUnavailable(InvalidToken):
    """The provider's discovery document or keys could not be loaded (now or recently)."""


@dataclass(frozen=True)
class OidcProvider:
    provider_uri: str
    audiences: tuple[str, ...] = ()
    additional_issuers: tuple[str, ...] = ()
    subject_claims: tuple[str, ...] = ()
    leeway_seconds: int = 60
    algorithms: tuple[str, ...] = ASYMMETRIC_ALGORITHMS
    # None: the default provider (user ids `oidc~<subject>`); else `<key>~<subject>`.
    key: str | None = None

    def __post_init__(self) -> None:
        if urllib.parse.urlsplit(self.provider_uri).scheme not in ("https", "http"):
            raise ValueError("provider_uri must be an http(s) URL")
        if self.key is not None and not valid_key(self.key):
            raise ValueError("key must be 1-32 lower-case letters, digits or '-'")
        if not self.algorithms or not set(self.algorithms) <= set(ASYMMETRIC_ALGORITHMS):
            raise ValueError(f"algorithms must be a non-empty subset of {ASYMMETRIC_ALGORITHMS}")
        if self.leeway_seconds < 0:
            raise ValueError("leeway_seconds must not be negative")

    @property
    def discovery_url(self) -> str:
        return self.provider_uri.rstrip("/") + "/.well-known/openid-configuration"


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    # urllib would also follow a redirect to ftp://; an IdP document only ever comes over HTTP.
    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        if urllib.parse.urlsplit(newurl).scheme not in ("https", "http"):
            raise ValueError("refusing a redirect away from http(s)")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_HttpOnlyRedirects)


def fetch_url(url: str) -> bytes:
    """GET an http(s) URL (10 s timeout), refusing bodies over 1 MiB: the default fetcher."""
    if urllib.parse.urlsplit(url).scheme not in ("https", "http"):
        raise ValueError("only http(s) URLs are fetched")
    with _OPENER.open(url, timeout=FETCH_TIMEOUT_SECONDS) as response:
        body: bytes = response.read(MAX_DOCUMENT_BYTES + 1)
    if len(body) > MAX_DOCUMENT_BYTES:
        raise ValueError("document exceeds 1 MiB")
    return body


@dataclass(frozen=True)
class _Discovery:
    issuer: str
    jwks_uri: str
    token_endpoint: str | None


def _parse_discovery(document: dict[str, Any]) -> _Discovery:
    issuer, jwks_uri = document.get("issuer"), document.get("jwks_uri")
    if not isinstance(issuer, str) or not issuer:
        raise ValueError("discovery document has no issuer")
    if not isinstance(jwks_uri, str) or not jwks_uri:
        raise ValueError("discovery document has no jwks_uri")
    endpoint = document.get("token_endpoint")
    return _Discovery(issuer, jwks_uri, endpoint if isinstance(endpoint, str) else None)


@dataclass(frozen=True)
class _KeySet:
    by_kid: dict[str, dict[str, Any]]
    sole: dict[str, Any] | None  # the only signing key: what a token without `kid` may use

    def find(self, kid: str | None) -> dict[str, Any] | None:
        return self.sole if kid is None else self.by_kid.get(kid)


def _parse_jwks(document: dict[str, Any]) -> _KeySet:
    keys = document.get("keys")
    if not isinstance(keys, list):
        raise ValueError("JWKS has no keys")
    # Encryption keys (`use: enc`) never verify signatures.
    signing = [k for k in keys if isinstance(k, dict) and k.get("use", "sig") == "sig"]
    by_kid = {k["kid"]: k for k in signing if isinstance(k.get("kid"), str)}
    return _KeySet(by_kid, signing[0] if len(signing) == 1 else None)


class _ProviderState:
    """What the verifier knows about one provider; mutated only on the event loop."""

    def __init__(self, config: OidcProvider) -> None:
        self.config = config
        self.discovery: _Discovery | None = None
        self.keys: _KeySet | None = None
        self.keys_loaded_at = 0.0
        self.last_unknown_kid_fetch: float | None = None
        self.fetches_started = 0  # JWKS fetches begun: which waiters a fetch answers
        self.unknown_kids: dict[str | None, float] = {}  # kid -> when a fetch missed it
        self.retry_at = 0.0  # after a failed fetch, no new attempt before this time
        self.parsed: dict[tuple[str | None, str], jwt.PyJWK] = {}
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    def lock(self) -> asyncio.Lock:
        # An asyncio.Lock belongs to one event loop; tests (and CLIs) may run several.
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    def accepts_issuer(self, issuer: str) -> bool:
        if self.discovery is None:
            return False
        return issuer == self.discovery.issuer or issuer in self.config.additional_issuers

    @property
    def issuers(self) -> list[str]:
        known = [self.discovery.issuer] if self.discovery else []
        return known + list(self.config.additional_issuers)


class TokenVerifier:
    def __init__(
        self,
        providers: Sequence[OidcProvider],
        *,
        fetch: Callable[[str], bytes] = fetch_url,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`clock` times the caches and retry windows; token lifetimes (`exp`, `nbf`, `iat`)
        are checked by PyJWT against the system clock."""
        keys = [p.key for p in providers]
        if len(set(keys)) != len(keys):
            # Two providers minting the same ids would speak for each other's users.
            raise ValueError("each provider needs its own key (at most one without a key)")
        self._states = [_ProviderState(p) for p in providers]
        self._fetch = fetch
        self._clock = clock
        self._verified: dict[str, _Remembered] = {}

    async def verify(self, token: str) -> Principal:
        """The principal of a valid bearer token; `InvalidToken` (with a safe reason) if not.
        A token verified once is remembered until it expires (at most `VERIFIED_FOR_SECONDS`):
        engines send the same token on every request, and the signature check is most of
        what authentication costs."""
        remembered = self._verified.get(token)
        if remembered is not None and self._still_good(remembered):
            return remembered.principal
        header, issuer = _peek(token)
        state = await self._provider_for(issuer)
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in state.config.algorithms:
            raise InvalidToken("token algorithm is not accepted")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("token is malformed")
        key = await self._signing_key(state, kid, algorithm)
        claims = _decode(token, state, key)
        config = state.config
        principal = principal_from_claims(
            claims,
            issuer=claims["iss"],
            subject_claims=config.subject_claims,
            provider_key=config.key,
            fallback_claims=subject_claim_order(config.provider_uri),
        )
        if len(self._verified) >= MAX_VERIFIED_TOKENS:
            self._verified.clear()
        self._verified[token] = _Remembered(
            principal, state, float(claims["exp"]), self._clock(), state.keys_loaded_at
        )
        return principal

    def _still_good(self, remembered: _Remembered) -> bool:
        """A remembered token counts until it expires, for at most `VERIFIED_FOR_SECONDS`,
        and only while the keys it was checked with are the provider's current, fresh ones
        (a withdrawn key stops its tokens at the next reload)."""
        state = remembered.state
        return (
            time.time() < remembered.expires_at
            and self._clock() - remembered.verified_at < VERIFIED_FOR_SECONDS
            and state.keys_loaded_at == remembered.keys_loaded_at
            and self._keys_fresh(state)
        )

    async def token_endpoint(self) -> str | None:
        """The first provider's `token_endpoint`, for passing `/oauth/tokens` requests on."""
        if not self._states:
            return None
        state = self._states[0]
        await self._discover(state)
        return state.discovery.token_endpoint if state.discovery else None

    async def _provider_for(self, issuer: str) -> _ProviderState:
        for state in self._states:
            if state.accepts_issuer(issuer):
                return state
        # Only providers never discovered remain: load them (each rate-limited) and look again.
        unavailable = False
        for state in self._states:
            if state.discovery is not None:
                continue
            try:
                await self._discover(state)
            except IdentityProviderUnavailable:
                unavailable = True
                continue
            if state.accepts_issuer(issuer):
                return state
        if unavailable:
            raise IdentityProviderUnavailable("identity provider is unavailable")
        raise InvalidToken("token issuer is not accepted")

    async def _discover(self, state: _ProviderState) -> None:
        if state.discovery is not None:
            return
        async with state.lock():
            if state.discovery is not None:  # loaded while this request waited
                return
            url = state.config.discovery_url
            state.discovery = await self._fetch_document(state, url, _parse_discovery)

    async def _signing_key(
        self, state: _ProviderState, kid: str | None, algorithm: str
    ) -> jwt.PyJWK:
        if self._must_fetch(state, kid):
            await self._refresh_keys(state, kid)
        jwk = state.keys.find(kid) if state.keys else None
        if jwk is None:
            raise InvalidToken("token signing key is unknown")
        return _pyjwk(state, kid, jwk, algorithm)

    def _must_fetch(self, state: _ProviderState, kid: str | None) -> bool:
        """Whether this request fetches the JWKS (or waits for a fetch under way) first."""
        if state.keys is None:
            return True
        known = state.keys.find(kid) is not None
        in_flight = state.lock().locked()
        if self._keys_fresh(state):
            # An unknown kid refetches (or waits for the next refetch) unless a refetch
            # lately missed this very kid: repeating a made-up kid costs nothing.
            return not known and not self._missed_lately(state, kid)
        if self._clock() < state.retry_at:
            return False  # stale, but the IdP just failed: the old keys serve meanwhile
        # Stale keys are reloaded by one request; known kids need not queue behind it.
        return not (known and in_flight)

    def _keys_fresh(self, state: _ProviderState) -> bool:
        age = self._clock() - state.keys_loaded_at
        return state.keys is not None and age < JWKS_MAX_AGE_SECONDS

    def _missed_lately(self, state: _ProviderState, kid: str | None) -> bool:
        missed = state.unknown_kids.get(kid)
        return missed is not None and self._clock() - missed < UNKNOWN_KID_MEMORY_SECONDS

    def _remember_missed(self, state: _ProviderState, kid: str | None) -> None:
        state.unknown_kids.pop(kid, None)
        state.unknown_kids[kid] = self._clock()
        while len(state.unknown_kids) > MAX_UNKNOWN_KIDS:
            del state.unknown_kids[next(iter(state.unknown_kids))]  # the oldest

    async def _refresh_keys(self, state: _ProviderState, kid: str | None) -> None:
        arrived = state.fetches_started
        async with state.lock():
            fresh = self._keys_fresh(state)
            if fresh and state.keys and state.keys.find(kid) is not None:
                return  # another request fetched the key while this one waited
            if fresh and (state.fetches_started != arrived or self._missed_lately(state, kid)):
                # A fetch begun after this request arrived did not find its kid.
                self._remember_missed(state, kid)
                return
            if state.discovery is None:  # cannot be: _provider_for discovered it
                raise IdentityProviderUnavailable("identity provider is unavailable")
            if fresh:
                # Wait for this provider's next unknown-kid slot; whoever arrives meanwhile
                # queues on the lock and is answered by this one fetch.
                last = state.last_unknown_kid_fetch
                wait = 0.0 if last is None else last + UNKNOWN_KID_REFETCH_SECONDS - self._clock()
                if wait > 0:
                    await asyncio.sleep(min(wait, UNKNOWN_KID_REFETCH_SECONDS))
                state.last_unknown_kid_fetch = self._clock()
            now = self._clock()
            state.fetches_started += 1
            try:
                keys = await self._fetch_document(state, state.discovery.jwks_uri, _parse_jwks)
            except IdentityProviderUnavailable:
                if state.keys is None:
                    raise
                return  # keys we already have stay usable while the IdP is down
            if state.keys is None or keys.by_kid.keys() != state.keys.by_kid.keys():
                state.unknown_kids.clear()  # a changed key set: every kid may be new now
            state.keys = keys
            state.keys_loaded_at = now
            state.parsed.clear()
            if fresh and keys.find(kid) is None:
                self._remember_missed(state, kid)

    async def _fetch_document(
        self, state: _ProviderState, url: str, parse: Callable[[dict[str, Any]], T]
    ) -> T:
        """`parse` of a JSON object from the IdP, fetched in a worker thread (under the lock)."""
        if self._clock() < state.retry_at:
            raise IdentityProviderUnavailable("identity provider is unavailable")
        try:
            document = json.loads(await asyncio.to_thread(self._fetch, url))
            if not isinstance(document, dict):
                raise ValueError("not a JSON object")
            return parse(document)
        # Whatever failed (network, HTTP status, size, JSON, missing fields, or anything an
        # injected fetcher raises), the provider is unusable right now.
        except Exception as error:
            state.retry_at = self._clock() + FAILED_FETCH_RETRY_SECONDS
            name = type(error).__name__
            log.warning(
                "OIDC provider %s: loading %s failed (%s)", state.config.provider_uri, url, name
            )
            raise IdentityProviderUnavailable("identity provider is unavailable") from None


@dataclass(frozen=True)
class _Remembered:
    principal: Principal
    state: _ProviderState
    expires_at: float  # the token's `exp` (system clock)
    verified_at: float  # `clock` time
    keys_loaded_at: float  # which key set checked it


def _peek(token: str) -> tuple[dict[str, Any], str]:
    """The unverified header and `iss`: only to choose the provider and key."""
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS:
        raise InvalidToken("token is malformed")
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise InvalidToken("token is malformed") from None
    issuer = claims.get("iss")
    if not isinstance(issuer, str):
        raise InvalidToken("token has no issuer")
    return header, issuer


def _pyjwk(
    state: _ProviderState, kid: str | None, jwk: dict[str, Any], algorithm: str
) -> jwt.PyJWK:
    """The key bound to `algorithm`: the JWK's own `alg`, if it names one, must agree."""
    if jwk.get("alg", algorithm) != algorithm:
        raise InvalidToken("token algorithm does not match its key")
    cached = state.parsed.get((kid, algorithm))
    if cached is None:
        try:
            cached = jwt.PyJWK(jwk, algorithm=algorithm)
        except jwt.PyJWTError:  # e.g. an EC algorithm named for an RSA key
            raise InvalidToken("token algorithm does not match its key") from None
        state.parsed[(kid, algorithm)] = cached
    return cached


# PyJWT's exceptions, most specific first, as the reasons a client may read.
_REASONS: tuple[tuple[type[jwt.PyJWTError], str], ...] = (
    (jwt.ExpiredSignatureError, "token has expired"),
    (jwt.ImmatureSignatureError, "token is not yet valid"),
    (jwt.InvalidAudienceError, "token audience is not accepted"),
    (jwt.InvalidIssuerError, "token issuer is not accepted"),
    (jwt.InvalidSignatureError, "token signature is invalid"),
    (jwt.InvalidAlgorithmError, "token algorithm is not accepted"),
    (jwt.InvalidIssuedAtError, "token issue time is invalid"),
    (jwt.DecodeError, "token is malformed"),
)


def _decode(token: str, state: _ProviderState, key: jwt.PyJWK) -> dict[str, Any]:
    config = state.config
    options: Options = {
        "require": ["exp", "iss"],
        # Without configured audiences the `aud` claim is not checked (Lakekeeper's rule).
        "verify_aud": bool(config.audiences),
        # The subject is judged by principal_from_claims, which also accepts integer ids.
        "verify_sub": False,
    }
    try:
        return jwt.decode(
            token,
            key,
            algorithms=list(config.algorithms),
            audience=list(config.audiences) or None,
            issuer=state.issuers,
            leeway=config.leeway_seconds,
            options=options,
        )
    except jwt.MissingRequiredClaimError as error:
        # Claim names come from PyJWT's fixed list, never from the token.
        raise InvalidToken(f"token lacks the {error.claim} claim") from None
    except jwt.PyJWTError as error:
        reason = next((r for t, r in _REASONS if isinstance(error, t)), "token is invalid")
        raise InvalidToken(reason) from None

"""The development provider's keys, tokens and grants, without HTTP (served by server.py).

Tokens are RS256 JWTs signed with the newest of its RSA-2048 keys; every key stays published
in the JWKS until dropped. The token endpoint answers like Keycloak (`access_token`,
`token_type`, `expires_in`, `issued_token_type`), errors as OAuth2 `{"error": ...}` with 400
or 401, for three grants:

- `client_credentials`: a registered client (id and secret by HTTP Basic or form fields);
  its token carries the client's claims over Keycloak-like defaults
  (`sub` = `service-account-<client id>`);
- RFC 8693 token exchange: a still-valid token of this provider → a token for the same
  subject with the requested `audience` (how engines act for a user, and how Iceberg Java
  refreshes);
- `authorization_code` with PKCE (S256): the code a sign-in handed out (`sign_in`), once,
  to the same client and redirect URI.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

CLIENT_CREDENTIALS = "client_credentials"
AUTHORIZATION_CODE = "authorization_code"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"  # noqa: S105 - a URN
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"  # noqa: S105 - a URN
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"  # noqa: S105 - a URN
# A user name becomes the token's `sub` and icelog's user id `oidc~<name>`: plain names only.
USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# A URL as a header may carry it: visible ASCII only (no space, no control character).
_PLAIN_URL = re.compile(r"[\x21-\x7e]+")
_CODE_SECONDS = 600  # how long a sign-in's code may wait for its exchange


def new_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def key_id(key: rsa.RSAPrivateKey) -> str:
    """A key's id, derived from its public half: a key kept in a file keeps its id."""
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()[:12]).decode()


def user_claims(name: str) -> dict[str, Any]:
    """The identity claims of a named user's tokens (console login and client credentials
    alike, so both are the same icelog user `oidc~<name>`, a person)."""
    return {
        "sub": name,
        "preferred_username": name,
        "name": name,
        "email": f"{name}@example.com",
    }


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private: rsa.RSAPrivateKey


@dataclass
class Client:
    secret: str
    claims: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Code:
    client_id: str
    redirect_uri: str
    challenge: str
    subject: str
    claims: dict[str, Any]
    issued_at: float


class OAuthError(Exception):
    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status, self.error, self.description = status, error, description


class OpenIdProvider:
    """Keys, clients and grants. `uri` (the issuer) is set by whoever serves it."""

    def __init__(
        self,
        *,
        audience: str = "icelog",
        token_seconds: int = 300,
        login_seconds: int = 3600,
        keys: Sequence[rsa.RSAPrivateKey] = (),
    ) -> None:
        self.uri = ""
        self.default_audience = audience
        self.token_seconds = token_seconds  # client credentials and exchanged tokens
        self.login_seconds = login_seconds  # tokens of a browser sign-in
        self._lock = threading.Lock()
        self._keys = [SigningKey(key_id(k), k) for k in (keys or [new_rsa_key()])]
        self._clients: dict[str, Client] = {}
        self._codes: dict[str, _Code] = {}

    @property
    def issuer(self) -> str:
        return self.uri

    @property
    def token_endpoint(self) -> str:
        return f"{self.uri}/token"

    # -- keys and tokens -------------------------------------------------------------------

    @property
    def signing_kid(self) -> str:
        with self._lock:
            return self._keys[-1].kid

    @property
    def kids(self) -> list[str]:
        with self._lock:
            return [k.kid for k in self._keys]

    def rotate_keys(self, *, drop_old: bool = False) -> str:
        """A new signing key (returns its kid); the old ones stay published unless
        `drop_old`."""
        private = new_rsa_key()
        key = SigningKey(key_id(private), private)
        with self._lock:
            self._keys = [key] if drop_old else [*self._keys, key]
        return key.kid

    def private_key(self, kid: str | None = None) -> rsa.RSAPrivateKey:
        """A published key's private half (default: the signing key)."""
        return self._key(kid).private

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            keys = list(self._keys)
        published = []
        for key in keys:
            jwk = RSAAlgorithm.to_jwk(key.private.public_key(), as_dict=True)
            jwk.update({"kid": key.kid, "use": "sig", "alg": "RS256"})
            published.append(jwk)
        return {"keys": published}

    def issue(
        self,
        subject: str = "alice",
        *,
        audience: str | list[str] | None = "icelog",
        expires_in: int = 3600,
        not_before: int | None = None,
        extra_claims: Mapping[str, Any] | None = None,
        kid: str | None = None,
    ) -> str:
        """A token of this provider. `not_before` is a Unix time; `audience=None` leaves
        `aud` out; in `extra_claims` a value None removes that claim (e.g. `{"exp": None}`)."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": subject,
            "aud": audience,
            "iat": now,
            "exp": now + expires_in,
            "nbf": not_before,
            "jti": secrets.token_hex(8),
        }
        claims.update(extra_claims or {})
        return self.sign({k: v for k, v in claims.items() if v is not None}, kid=kid)

    def sign(self, claims: Mapping[str, Any], *, kid: str | None = None) -> str:
        """Sign claims with a published key (by `kid`, default the signing key)."""
        key = self._key(kid)
        return jwt.encode(dict(claims), key.private, algorithm="RS256", headers={"kid": key.kid})

    def _key(self, kid: str | None) -> SigningKey:
        with self._lock:
            if kid is None:
                return self._keys[-1]
            for key in self._keys:
                if key.kid == kid:
                    return key
        raise KeyError(kid)

    # -- clients ---------------------------------------------------------------------------

    def add_client(
        self, client_id: str, secret: str, claims: Mapping[str, Any] | None = None
    ) -> None:
        """A confidential client for `client_credentials`; its tokens carry `claims` over
        the Keycloak-like defaults (`sub` = `service-account-<client_id>`, `azp`, `aud`)."""
        with self._lock:
            self._clients[client_id] = Client(secret, dict(claims or {}))

    def add_user(self, name: str, secret: str) -> None:
        """A named user: client credentials `<name>:<secret>` whose tokens are the user's."""
        self.add_client(name, secret, user_claims(name))

    # -- the token endpoint ----------------------------------------------------------------

    def token_response(
        self, form: Mapping[str, list[str]], basic: tuple[str, str] | None
    ) -> dict[str, Any]:
        """The answer to a POST /token (raises OAuthError)."""
        grant = single(form, "grant_type")
        if grant == AUTHORIZATION_CODE:
            return self._code_answer(form)
        client_id = self._authenticate(form, basic)
        if grant == CLIENT_CREDENTIALS:
            if client_id is None:
                raise OAuthError(401, "invalid_client", "client authentication is required")
            claims = self._client_claims(client_id)
        elif grant == TOKEN_EXCHANGE:
            claims = self._exchanged_claims(form, client_id)
        elif grant is None:
            raise OAuthError(400, "invalid_request", "grant_type is required")
        else:
            raise OAuthError(400, "unsupported_grant_type", f"unsupported grant: {grant}")
        scope = single(form, "scope")
        if scope:
            claims["scope"] = scope
        expires_in = self.token_seconds
        token = self.issue(
            claims.pop("sub"),
            audience=claims.pop("aud", None),
            expires_in=expires_in,
            extra_claims=claims,
        )
        answer: dict[str, Any] = {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": expires_in,
            "issued_token_type": ACCESS_TOKEN_TYPE,
        }
        if scope:
            answer["scope"] = scope
        return answer

    # -- browser sign-in (authorization code + PKCE) ---------------------------------------

    def check_authorize(self, query: Mapping[str, list[str]]) -> None:
        """What `GET /authorize` needs before anyone signs in (raises OAuthError)."""
        redirect = single(query, "redirect_uri") or ""
        if single(query, "response_type") != "code" or not redirect:
            raise OAuthError(400, "invalid_request", "response_type=code and redirect_uri")
        if urllib.parse.urlsplit(redirect).scheme not in ("http", "https"):
            raise OAuthError(400, "invalid_request", "redirect_uri must be http(s)")
        if not _PLAIN_URL.fullmatch(redirect):
            # It goes back out in a Location header: a CR/LF would add headers of the
            # requester's choosing, and a character beyond Latin-1 cannot be sent at all.
            raise OAuthError(400, "invalid_request", "redirect_uri must be printable ASCII")
        if single(query, "code_challenge_method") != "S256":
            raise OAuthError(400, "invalid_request", "PKCE with S256 is required")

    def sign_in(
        self, query: Mapping[str, list[str]], subject: str, claims: Mapping[str, Any]
    ) -> str:
        """`subject` signs in to the authorization request `query`: the URL to send the
        browser back to, with a one-time code."""
        self.check_authorize(query)
        redirect = single(query, "redirect_uri") or ""
        code = secrets.token_urlsafe(16)
        held = _Code(
            client_id=single(query, "client_id") or "",
            redirect_uri=redirect,
            challenge=single(query, "code_challenge") or "",
            subject=subject,
            claims=dict(claims),
            issued_at=time.monotonic(),
        )
        with self._lock:
            self._drop_stale_codes()
            self._codes[code] = held
        back = {"code": code, "state": single(query, "state") or ""}
        separator = "&" if urllib.parse.urlsplit(redirect).query else "?"
        return f"{redirect}{separator}{urllib.parse.urlencode(back)}"

    def _drop_stale_codes(self) -> None:
        now = time.monotonic()
        for code in [c for c, held in self._codes.items() if now - held.issued_at > _CODE_SECONDS]:
            del self._codes[code]

    def _code_answer(self, form: Mapping[str, list[str]]) -> dict[str, Any]:
        with self._lock:
            self._drop_stale_codes()
            held = self._codes.pop(single(form, "code") or "", None)
        if held is None:
            raise OAuthError(400, "invalid_grant", "unknown or used code")
        if (
            single(form, "redirect_uri") != held.redirect_uri
            or single(form, "client_id") != held.client_id
        ):
            raise OAuthError(400, "invalid_grant", "redirect_uri or client_id differs")
        verifier = (single(form, "code_verifier") or "").encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
        if not same_text(digest.decode(), held.challenge):
            raise OAuthError(400, "invalid_grant", "PKCE code_verifier does not match")
        claims = {k: v for k, v in held.claims.items() if k != "sub"}
        token = self.issue(
            held.subject,
            audience=self.default_audience,
            expires_in=self.login_seconds,
            extra_claims=claims,
        )
        return {"access_token": token, "token_type": "Bearer", "expires_in": self.login_seconds}

    # -- client authentication and claims --------------------------------------------------

    def _authenticate(
        self, form: Mapping[str, list[str]], basic: tuple[str, str] | None
    ) -> str | None:
        """The client id, when the request authenticates one; None when it names none (a
        public token exchange). Wrong credentials are `invalid_client`."""
        form_id, form_secret = single(form, "client_id"), single(form, "client_secret")
        if basic is not None:
            if form_secret is not None:
                raise OAuthError(400, "invalid_request", "use one client authentication method")
            client_id, secret = basic
        elif form_id is not None:
            client_id, secret = form_id, form_secret or ""
        else:
            return None
        with self._lock:
            client = self._clients.get(client_id)
        if client is None or not same_text(client.secret, secret):
            raise OAuthError(401, "invalid_client", "invalid client credentials")
        return client_id

    def _client_claims(self, client_id: str) -> dict[str, Any]:
        with self._lock:
            extra = dict(self._clients[client_id].claims)
        claims: dict[str, Any] = {
            "sub": f"service-account-{client_id}",
            "aud": self.default_audience,
            "azp": client_id,
            "preferred_username": f"service-account-{client_id}",
        }
        return claims | extra

    def _exchanged_claims(
        self, form: Mapping[str, list[str]], client_id: str | None
    ) -> dict[str, Any]:
        subject_token = single(form, "subject_token")
        token_type = single(form, "subject_token_type")
        if not subject_token or token_type is None:
            raise OAuthError(400, "invalid_request", "subject_token and its type are required")
        if token_type not in (ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE):
            raise OAuthError(400, "invalid_request", "unsupported subject_token_type")
        original = self._verify_own(subject_token)
        # Identity claims carry over; lifetime, audience and ids are the new token's own.
        dropped = {"iss", "aud", "iat", "exp", "nbf", "jti", "azp", "scope"}
        claims = {k: v for k, v in original.items() if k not in dropped}
        audiences = form.get("audience") or []
        claims["aud"] = (audiences[0] if len(audiences) == 1 else audiences) or original.get("aud")
        if client_id is not None:
            claims["azp"] = client_id
        return claims

    def _verify_own(self, token: str) -> dict[str, Any]:
        """The claims of a token this provider issued that is still valid."""
        try:
            header = jwt.get_unverified_header(token)
            public = self._key(header.get("kid")).private.public_key()
            return jwt.decode(
                token,
                public,
                algorithms=["RS256"],
                issuer=self.issuer,
                options={"verify_aud": False, "require": ["exp", "sub"]},
            )
        except (KeyError, jwt.PyJWTError):
            raise OAuthError(400, "invalid_request", "subject_token is not valid") from None


def same_text(held: str, given: str) -> bool:
    """Constant-time equality of two strings of any characters (compare_digest refuses
    non-ASCII str with a TypeError, which would end the request without an answer)."""
    return secrets.compare_digest(held.encode(), given.encode())


def single(form: Mapping[str, list[str]], name: str) -> str | None:
    """A field given at most once (a repeated one is `invalid_request`)."""
    values = form.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise OAuthError(400, "invalid_request", f"{name} given more than once")
    return values[0]

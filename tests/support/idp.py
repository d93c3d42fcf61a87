"""A real, local OpenID provider for tests: `icelog dev-idp`'s provider (api/dev_idp/) on a
free port, with what tests need besides.

    with TestIdentityProvider() as idp:
        token = idp.issue("alice")                       # signed with the current key
        idp.add_client("spark", "s3cret", {"name": "Spark"})
        idp.rotate_keys()                                # new signing key, old one still published

It serves, on 127.0.0.1 from a daemon thread, what the development provider serves
(discovery, JWKS, `client_credentials` and token exchange at `/token`, answering like
Keycloak) and, for the tests:

- `/authorize` signs `login_subject` in at once, without a login page (with `login_claims`,
  a token living `login_expires_in` s), checking the PKCE verifier at `/token`;
- `documents` (path → body) served as-is, to see what the verifier makes of odd answers;
- `publish_alg=False` leaves `alg` out of the JWKS, as Entra ID does;
- counters of discovery, JWKS and token requests, and the last token form;
- `sign` with a key it does not publish, any algorithm and headers (attacks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from icelog.api.dev_idp.provider import (
    ACCESS_TOKEN_TYPE,
    AUTHORIZATION_CODE,
    CLIENT_CREDENTIALS,
    JWT_TOKEN_TYPE,
    TOKEN_EXCHANGE,
    OAuthError,
    new_rsa_key,
)
from icelog.api.dev_idp.server import DevIdentityProvider, Reply, Request

__all__ = [
    "ACCESS_TOKEN_TYPE",
    "AUTHORIZATION_CODE",
    "CLIENT_CREDENTIALS",
    "JWT_TOKEN_TYPE",
    "TOKEN_EXCHANGE",
    "OAuthError",
    "TestIdentityProvider",
    "new_rsa_key",
]


class TestIdentityProvider(DevIdentityProvider):
    __test__ = False  # a helper, not a pytest test class

    def __init__(self, *, path: str = "", publish_alg: bool = True) -> None:
        """`path` puts the IdP under a prefix (like Keycloak's `/realms/<realm>`);
        `publish_alg=False` leaves `alg` out of the JWKS, as Entra ID does."""
        super().__init__("127.0.0.1", 0, path=path, token_seconds=300)
        self._publish_alg = publish_alg
        self.jwks_requests = 0
        self.discovery_requests = 0
        self.token_requests = 0
        self.last_token_form: dict[str, list[str]] = {}  # what the last POST /token carried
        # Browser logins (the web console's): `/authorize` signs this user in at once.
        self.login_subject = "alice"
        self.login_claims: dict[str, Any] = {"name": "Alice Example", "email": "alice@example.com"}
        self.documents: dict[str, bytes] = {}

    @property
    def login_expires_in(self) -> int:
        return self.login_seconds

    @login_expires_in.setter
    def login_expires_in(self, seconds: int) -> None:
        self.login_seconds = seconds

    def answer(self, request: Request) -> Reply:
        if request.method == "GET" and request.raw_path in self.documents:
            return Reply(200, self.documents[request.raw_path])
        with self._lock:
            if request.path == "/.well-known/openid-configuration":
                self.discovery_requests += 1
            elif request.path == "/jwks":
                self.jwks_requests += 1
            elif request.method == "POST" and request.path == "/token":
                self.token_requests += 1
                self.last_token_form = request.form
        return super().answer(request)

    def authorize(self, query: Mapping[str, list[str]]) -> Reply:
        """No login page: `login_subject` signs in at once."""
        return Reply(302, headers={"Location": self.sign_in(query, self.login_subject,
                                                             self.login_claims)})  # fmt: skip

    def jwks(self) -> dict[str, Any]:
        published = super().jwks()
        if not self._publish_alg:
            for key in published["keys"]:
                key.pop("alg", None)
        return published

    def sign(
        self,
        claims: Mapping[str, Any],
        *,
        kid: str | None = None,
        private_key: rsa.RSAPrivateKey | None = None,
        algorithm: str = "RS256",
        headers: Mapping[str, Any] | None = None,
    ) -> str:
        """Sign any claims: with a published key (by `kid`, default the signing key) or with
        `private_key` (a key this IdP does not publish) under whatever `kid` is given."""
        if private_key is None:
            key = self._key(kid)
            private_key, kid = key.private, key.kid
        header = {"kid": kid, **(headers or {})} if kid is not None else dict(headers or {})
        return jwt.encode(dict(claims), private_key, algorithm=algorithm, headers=header)

    def public_pem(self, kid: str | None = None) -> bytes:
        """A published public key as PEM (what an HS256-confusion attacker would use)."""
        public = self.private_key(kid).public_key()
        return public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

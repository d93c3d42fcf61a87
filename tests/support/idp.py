"""A real, local OpenID provider for tests: discovery, JWKS and a token endpoint over HTTP.

    with TestIdentityProvider() as idp:
        token = idp.issue("alice")                       # signed with the current key
        idp.add_client("spark", "s3cret", {"name": "Spark"})
        idp.rotate_keys()                                # new signing key, old one still published

It serves, on 127.0.0.1 (a free port) from a daemon thread:

- `/.well-known/openid-configuration`: `issuer` (its base URL), `jwks_uri`, `token_endpoint`;
- `/jwks`: the public RSA-2048 keys (each with a `kid`), counted in `jwks_requests`;
- `/token`: `client_credentials` (client id and secret by HTTP Basic or form fields) and RFC
  8693 token exchange (a still-valid token of this IdP → a token for the same subject with
  the requested `audience`), answering like Keycloak: `access_token`, `token_type`,
  `expires_in`, `issued_token_type`; errors as OAuth2 `{"error": ...}` with 400 or 401.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

CLIENT_CREDENTIALS = "client_credentials"
AUTHORIZATION_CODE = "authorization_code"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"


def new_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass(frozen=True)
class _Key:
    kid: str
    private: rsa.RSAPrivateKey


@dataclass
class _Client:
    secret: str
    claims: dict[str, Any] = field(default_factory=dict)


class OAuthError(Exception):
    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status, self.error, self.description = status, error, description


class TestIdentityProvider:
    __test__ = False  # a helper, not a pytest test class

    def __init__(self, *, path: str = "", publish_alg: bool = True) -> None:
        """`path` puts the IdP under a prefix (like Keycloak's `/realms/<realm>`);
        `publish_alg=False` leaves `alg` out of the JWKS, as Entra ID does."""
        self.path_prefix = path.rstrip("/")
        self._publish_alg = publish_alg
        self._lock = threading.Lock()
        self._keys: list[_Key] = [_Key(_new_kid(), new_rsa_key())]
        self._clients: dict[str, _Client] = {}
        self.jwks_requests = 0
        self.discovery_requests = 0
        self.token_requests = 0
        self.last_token_form: dict[str, list[str]] = {}  # what the last POST /token carried
        self.default_audience = "icelog"
        # Browser logins (authorization code + PKCE, the web console's): `/authorize` signs
        # this user in at once, without a form, with a token living `login_expires_in` s.
        self.login_subject = "alice"
        self.login_claims: dict[str, Any] = {"name": "Alice Example", "email": "alice@example.com"}
        self.login_expires_in = 3600
        self._codes: dict[str, dict[str, str]] = {}
        # Served as-is (path → JSON body) to test what the verifier makes of odd answers.
        self.documents: dict[str, bytes] = {}
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.idp = self
        # A short poll interval: shutdown() waits up to one interval, in every test's teardown.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> TestIdentityProvider:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- addresses -------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The provider URI a verifier is configured with (also the issuer)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.path_prefix}"

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
        key = _Key(_new_kid(), new_rsa_key())
        with self._lock:
            self._keys = [key] if drop_old else [*self._keys, key]
        return key.kid

    def private_key(self, kid: str | None = None) -> rsa.RSAPrivateKey:
        """A published key's private half (default: the signing key)."""
        return self._key(kid).private

    def public_pem(self, kid: str | None = None) -> bytes:
        """A published public key as PEM (what an HS256-confusion attacker would use)."""
        public = self._key(kid).private.public_key()
        return public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            keys = list(self._keys)
        published = []
        for key in keys:
            jwk = RSAAlgorithm.to_jwk(key.private.public_key(), as_dict=True)
            jwk.update({"kid": key.kid, "use": "sig"})
            if self._publish_alg:
                jwk["alg"] = "RS256"
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
        """A token of this IdP. `not_before` is a Unix time; `audience=None` leaves `aud`
        out; in `extra_claims` a value None removes that claim (e.g. `{"exp": None}`)."""
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

    def _key(self, kid: str | None) -> _Key:
        with self._lock:
            if kid is None:
                return self._keys[-1]
            for key in self._keys:
                if key.kid == kid:
                    return key
        raise KeyError(kid)

    def add_client(
        self, client_id: str, secret: str, claims: Mapping[str, Any] | None = None
    ) -> None:
        """A confidential client for `client_credentials`; its tokens carry `claims` over
        the Keycloak-like defaults (`sub` = `service-account-<client_id>`, `azp`, `aud`)."""
        with self._lock:
            self._clients[client_id] = _Client(secret, dict(claims or {}))

    # -- the token endpoint ----------------------------------------------------------------

    def token_response(
        self, form: Mapping[str, list[str]], basic: tuple[str, str] | None
    ) -> dict[str, Any]:
        """The answer to a POST /token (raises OAuthError)."""
        grant = _single(form, "grant_type")
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
        scope = _single(form, "scope")
        if scope:
            claims["scope"] = scope
        expires_in = 300
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

    def authorize(self, query: Mapping[str, list[str]]) -> str:
        """`GET /authorize`: the URL to send the browser back to, with a one-time code."""
        redirect = _single(query, "redirect_uri")
        if _single(query, "response_type") != "code" or not redirect:
            raise OAuthError(400, "invalid_request", "response_type=code and redirect_uri")
        if _single(query, "code_challenge_method") != "S256":
            raise OAuthError(400, "invalid_request", "PKCE with S256 is required")
        code = secrets.token_urlsafe(16)
        with self._lock:
            self._codes[code] = {
                "client_id": _single(query, "client_id") or "",
                "redirect_uri": redirect,
                "challenge": _single(query, "code_challenge") or "",
            }
        back = {"code": code, "state": _single(query, "state") or ""}
        return f"{redirect}?{urllib.parse.urlencode(back)}"

    def _code_answer(self, form: Mapping[str, list[str]]) -> dict[str, Any]:
        with self._lock:
            held = self._codes.pop(_single(form, "code") or "", None)
        if held is None:
            raise OAuthError(400, "invalid_grant", "unknown or used code")
        if (
            _single(form, "redirect_uri") != held["redirect_uri"]
            or _single(form, "client_id") != held["client_id"]
        ):
            raise OAuthError(400, "invalid_grant", "redirect_uri or client_id differs")
        verifier = (_single(form, "code_verifier") or "").encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
        if digest.decode() != held["challenge"]:
            raise OAuthError(400, "invalid_grant", "PKCE code_verifier does not match")
        token = self.issue(
            self.login_subject,
            audience=self.default_audience,
            expires_in=self.login_expires_in,
            extra_claims=self.login_claims,
        )
        return {"access_token": token, "token_type": "Bearer",
                "expires_in": self.login_expires_in}  # fmt: skip

    def _authenticate(
        self, form: Mapping[str, list[str]], basic: tuple[str, str] | None
    ) -> str | None:
        """The client id, when the request authenticates one; None when it names none (a
        public token exchange). Wrong credentials are `invalid_client`."""
        form_id, form_secret = _single(form, "client_id"), _single(form, "client_secret")
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
        if client is None or not secrets.compare_digest(client.secret, secret):
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
        subject_token = _single(form, "subject_token")
        token_type = _single(form, "subject_token_type")
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
        """The claims of a token this IdP issued that is still valid."""
        header = _unverified_header(token)
        try:
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


def _new_kid() -> str:
    return secrets.token_urlsafe(12)


def _single(form: Mapping[str, list[str]], name: str) -> str | None:
    values = form.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise OAuthError(400, "invalid_request", f"{name} given more than once")
    return values[0]


def _unverified_header(token: str) -> dict[str, Any]:
    try:
        return jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise OAuthError(400, "invalid_request", "subject_token is not valid") from None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    idp: TestIdentityProvider


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def idp(self) -> TestIdentityProvider:
        return cast(_Server, self.server).idp

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read the counters, not a request log."""

    def do_GET(self) -> None:
        idp = self.idp
        path = urllib.parse.urlsplit(self.path).path
        prefix = idp.path_prefix
        local = path.removeprefix(prefix) if path.startswith(prefix) else None
        if path in idp.documents:
            self._send(200, idp.documents[path])
        elif local == "/.well-known/openid-configuration":
            with idp._lock:
                idp.discovery_requests += 1
            self._json(200, _discovery(idp))
        elif local == "/authorize":
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            try:
                target = idp.authorize(query)
            except OAuthError as error:
                self._json(error.status, {"error": error.error})
                return
            self._send(302, b"", {"Location": target})
        elif local == "/jwks":
            with idp._lock:
                idp.jwks_requests += 1
            self._json(200, idp.jwks())
        else:
            self._json(404, {"error": "not_found"})

    def do_POST(self) -> None:
        idp = self.idp
        if urllib.parse.urlsplit(self.path).path != f"{idp.path_prefix}/token":
            self._json(404, {"error": "not_found"})
            return
        with idp._lock:
            idp.token_requests += 1
        length = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
        with idp._lock:
            idp.last_token_form = form
        try:
            self._json(200, idp.token_response(form, self._basic_credentials()))
        except OAuthError as error:
            body = {"error": error.error, "error_description": error.description}
            extra = {"WWW-Authenticate": 'Basic realm="idp"'} if error.status == 401 else {}
            self._json(error.status, body, extra)

    def _basic_credentials(self) -> tuple[str, str] | None:
        scheme, _, value = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            decoded = base64.b64decode(value, validate=True).decode()
        except ValueError:
            raise OAuthError(401, "invalid_client", "malformed Basic credentials") from None
        # RFC 6749 §2.3.1: id and secret are form-urlencoded inside the Basic value.
        client_id, _, secret = decoded.partition(":")
        return urllib.parse.unquote_plus(client_id), urllib.parse.unquote_plus(secret)

    def _json(self, status: int, body: object, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(body).encode(), headers)

    def _send(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def _discovery(idp: TestIdentityProvider) -> dict[str, Any]:
    return {
        "issuer": idp.issuer,
        "jwks_uri": f"{idp.uri}/jwks",
        "token_endpoint": idp.token_endpoint,
        "authorization_endpoint": f"{idp.uri}/authorize",
        "grant_types_supported": [CLIENT_CREDENTIALS, TOKEN_EXCHANGE, AUTHORIZATION_CODE],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "response_types_supported": ["token"],
        "subject_types_supported": ["public"],
    }

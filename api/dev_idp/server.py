"""The development provider over HTTP (standard library server, one thread per request).

Under its URI (`http://<host>:<port><path>`, also the issuer) it serves:

- `GET /.well-known/openid-configuration`: `issuer`, `jwks_uri`, `token_endpoint`,
  `authorization_endpoint`;
- `GET /jwks`: the public keys;
- `POST /token`: the grants of provider.py;
- `GET /authorize`: the login page of an authorization request (the web console's: code +
  PKCE) — a name to sign in as, no password; `POST /authorize` signs that name in and sends
  the browser back with a code.

The socket is bound when the object is made (an address in use raises OSError there, before
anything is printed); `serve_forever()` or `with provider:` (a daemon thread) serve it.
"""

from __future__ import annotations

import base64
import html
import json
import socket
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self, cast

from cryptography.hazmat.primitives.asymmetric import rsa

from icelog.api.dev_idp.provider import (
    AUTHORIZATION_CODE,
    CLIENT_CREDENTIALS,
    TOKEN_EXCHANGE,
    USER_NAME,
    OAuthError,
    OpenIdProvider,
    single,
    user_claims,
)

MAX_FORM_BYTES = 64 * 1024
# The authorization request's fields a login form carries back to `POST /authorize`.
_AUTHORIZE_FIELDS = (
    "response_type", "client_id", "redirect_uri", "scope", "state",
    "code_challenge", "code_challenge_method",
)  # fmt: skip


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, body: object, headers: Mapping[str, str] | None = None) -> Reply:
        return cls(status, json.dumps(body).encode(), headers=dict(headers or {}))


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # below the provider's path prefix, e.g. `/token`; the full path in `raw_path`
    raw_path: str
    query: dict[str, list[str]]
    form: dict[str, list[str]]
    basic: tuple[str, str] | None  # client id and secret of an HTTP Basic header


class DevIdentityProvider(OpenIdProvider):
    """An OpenID provider listening on `host:port` (port 0: a free one)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        path: str = "",
        issuer: str | None = None,
        users: Sequence[str] = (),
        audience: str = "icelog",
        token_seconds: int = 300,
        login_seconds: int = 3600,
        keys: Sequence[rsa.RSAPrivateKey] = (),
    ) -> None:
        """`path` puts the provider under a prefix (like Keycloak's `/realms/<realm>`);
        `issuer` is its URI as others reach it (default `http://<host>:<port><path>`);
        `users` are the names the login page offers."""
        super().__init__(
            audience=audience, token_seconds=token_seconds, login_seconds=login_seconds, keys=keys
        )
        self.path_prefix = path.rstrip("/")
        self.users = list(users)
        bind_host = host.strip("[]")
        server_class = _Server6 if ":" in bind_host else _Server
        self._server = server_class((bind_host, port), _Handler)
        self._server.provider = self
        bound_host, bound_port = self._server.server_address[:2]
        shown = f"[{bound_host!s}]" if ":" in str(bound_host) else str(bound_host)
        self.uri = (issuer or f"http://{shown}:{bound_port}").rstrip("/") + self.path_prefix
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    # -- lifecycle -------------------------------------------------------------------------

    def serve_forever(self) -> None:
        # A short poll interval: shutdown() waits up to one interval (every test teardown).
        self._server.serve_forever(poll_interval=0.02)

    def shutdown(self) -> None:
        """Stop serving (from another thread than serve_forever's) and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- routing ---------------------------------------------------------------------------

    def answer(self, request: Request) -> Reply:
        """The reply to one request (OAuthError becomes an OAuth2 error reply)."""
        route = (request.method, request.path)
        try:
            if route == ("GET", "/.well-known/openid-configuration"):
                return Reply.json(200, self.discovery())
            if route == ("GET", "/jwks"):
                return Reply.json(200, self.jwks())
            if route == ("POST", "/token"):
                return Reply.json(200, self.token_response(request.form, request.basic))
            if route == ("GET", "/authorize"):
                return self.authorize(request.query)
            if route == ("POST", "/authorize"):
                return self.signed_in(request.form)
        except OAuthError as error:
            return oauth_error(error)
        return Reply.json(404, {"error": "not_found"})

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "jwks_uri": f"{self.uri}/jwks",
            "token_endpoint": self.token_endpoint,
            "authorization_endpoint": f"{self.uri}/authorize",
            "grant_types_supported": [CLIENT_CREDENTIALS, TOKEN_EXCHANGE, AUTHORIZATION_CODE],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "response_types_supported": ["code", "token"],
            "subject_types_supported": ["public"],
            "code_challenge_methods_supported": ["S256"],
        }

    # -- the login page --------------------------------------------------------------------

    def authorize(self, query: Mapping[str, list[str]]) -> Reply:
        """`GET /authorize`: the login page, asking whom to sign in as."""
        self.check_authorize(query)
        return _page(login_page(self.users, query, self.path_prefix))

    def signed_in(self, form: Mapping[str, list[str]]) -> Reply:
        """`POST /authorize` from the login page: a named user (`user`, a button) or a
        typed name (`name`) signs in; back to the client with a code."""
        name = (single(form, "user") or single(form, "name") or "").strip()
        query = {k: v for k, v in form.items() if k in _AUTHORIZE_FIELDS}
        if not USER_NAME.fullmatch(name):
            self.check_authorize(query)
            problem = "Type a name: letters, digits, '.', '_' or '-' (at most 64)."
            return _page(login_page(self.users, query, self.path_prefix, problem), status=400)
        target = self.sign_in(query, name, user_claims(name))
        return Reply(303, headers={"Location": target})


def oauth_error(error: OAuthError) -> Reply:
    body = {"error": error.error, "error_description": error.description}
    extra = {"WWW-Authenticate": 'Basic realm="idp"'} if error.status == 401 else {}
    return Reply.json(error.status, body, extra)


def login_page(
    users: Sequence[str],
    query: Mapping[str, list[str]],
    prefix: str,
    problem: str | None = None,
) -> str:
    hidden = "".join(
        f'<input type="hidden" name="{name}" value="{html.escape(values[0])}">'
        for name, values in query.items()
        if name in _AUTHORIZE_FIELDS and values
    )
    buttons = "".join(
        f'<button name="user" value="{html.escape(u)}" data-user="{html.escape(u)}">'
        f"{html.escape(u)}</button>"
        for u in users
    )
    offered = f'<p>Sign in as</p><p class="users">{buttons}</p><p>or as</p>' if users else ""
    said = f'<p class="problem" role="alert">{html.escape(problem)}</p>' if problem else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in: icelog dev-idp</title>
<style>
body {{ font: 16px/1.5 system-ui, sans-serif; max-width: 32rem; margin: 3rem auto;
        padding: 0 1rem; color: #1d2430; }}
.warning {{ background: #fff4d6; border-left: 4px solid #d99a00; padding: .5rem .75rem; }}
.problem {{ color: #a11; }}
button {{ font: inherit; padding: .4rem 1rem; margin: 0 .5rem .5rem 0; cursor: pointer; }}
input[type=text] {{ font: inherit; padding: .35rem .5rem; }}
</style></head>
<body><main>
<h1>Sign in</h1>
<p class="warning">icelog's development identity provider: anyone can sign in as anyone,
no password. Never point a real deployment at it.</p>
{said}
<form method="post" action="{html.escape(prefix)}/authorize">{hidden}
{offered}
<p><label>Name <input type="text" name="name" autocomplete="username"
   pattern="[A-Za-z0-9][A-Za-z0-9._\\-]{{0,63}}"></label>
<button type="submit" data-sign-in>Sign in</button></p>
</form>
</main></body></html>
"""


def _page(text: str, status: int = 200) -> Reply:
    headers = {
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
        "frame-ancestors 'none'",
        "X-Frame-Options": "DENY",
    }
    return Reply(status, text.encode(), "text/html; charset=utf-8", headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    provider: DevIdentityProvider


class _Server6(_Server):
    """For an IPv6 address such as `::1` (the standard library's server is IPv4 only)."""

    address_family = socket.AF_INET6


# Lingering close after a refused body: how long and how much to read before closing.
LINGER_SECONDS = 2.0
LINGER_BYTES = 1 << 20


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a request log would show every token request's client (never needed)."""

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        provider = cast(_Server, self.server).provider
        split = urllib.parse.urlsplit(self.path)
        prefix = provider.path_prefix
        local = split.path.removeprefix(prefix) if split.path.startswith(prefix) else ""
        try:
            form = self._form() if method == "POST" else {}
            request = Request(
                method=method,
                path=local,
                raw_path=split.path,
                query=urllib.parse.parse_qs(split.query),
                form=form,
                basic=self._basic_credentials() if method == "POST" else None,
            )
        except OAuthError as error:
            self._send(oauth_error(error))
            if self.close_connection:
                self._linger()
            return
        self._send(provider.answer(request))

    def _linger(self) -> None:
        """Read what the client still sends, a little, before the socket closes: closed
        with unread data, the connection is reset, and a client still sending may lose the
        answer already on its way to it."""
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_WR)
        self.connection.settimeout(LINGER_SECONDS)
        try:
            for _ in range(LINGER_BYTES // 65536):
                if not self.connection.recv(65536):
                    break
        except OSError:
            pass

    def _form(self) -> dict[str, list[str]]:
        declared = (self.headers.get("Content-Length") or "0").strip()
        # Digits only: int() takes "-1", and read(-1) reads until the client closes, past
        # the limit below.
        length = int(declared) if declared.isascii() and declared.isdigit() else -1
        if not 0 <= length <= MAX_FORM_BYTES:
            self.close_connection = True
            raise OAuthError(400, "invalid_request", "the form is too large or its length bad")
        body = self.rfile.read(length).decode(errors="replace")
        return urllib.parse.parse_qs(body, keep_blank_values=True)

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

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(reply.body)

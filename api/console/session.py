"""Logging in to the console: OpenID Connect authorization code with PKCE (RFC 7636).

With an identity provider configured, a console page needs a session: the provider's access
token, kept in an HttpOnly, SameSite=Lax cookie scoped to `/ui`, and verified on every page
by the API's own verifier (api/auth/oidc.py) — the same checks a bearer token gets (issuer,
audience, expiry, keys). A missing, expired or otherwise refused token sends the browser to
the login page, which says why ("your session expired") and offers to log in again; the
caller is provisioned as a user exactly as on their first API call. Without a provider
there is no login: everyone is anonymous, as in the API.

The console is a public client: no secret, the code bound to the browser by PKCE's
S256 challenge; `state` is checked against the login cookie set when the login started.
That cookie is signed (HMAC-SHA256 with a key derived from the secrets key, so any replica
can check it) and dated: a cookie the browser did not get from `/ui/login/start` within the
last ten minutes is refused before the provider is asked, so the callback is no way to send
the provider code exchanges beyond the per-address rate limit that start and callback share
with the token endpoint.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from icelog.api.auth.authenticate import provision
from icelog.api.auth.oidc import IdentityProviderUnavailable, TokenVerifier, fetch_url
from icelog.api.auth.principal import InvalidToken
from icelog.api.auth.provider_calls import ProviderBusy
from icelog.api.auth.token_endpoint import forward, provider_calls
from icelog.api.services import derived_key

SESSION = "icelog_console"
LOGIN = "icelog_console_login"
_LOGIN_SECONDS = 600  # how long a started login may take
_DISCOVERY_SECONDS = 3600.0
_discovered: dict[str, tuple[float, dict[str, Any]]] = {}


# Why the login page is shown, by the code in its URL (never free text from a URL).
REASONS = {
    "required": "Log in to use the console.",
    "expired": "Your session expired. Log in again.",
    "rejected": "Your session is no longer accepted. Log in again.",
    "out": "You logged out.",
}


class LoginNeeded(Exception):
    """No session, or its token is no longer accepted: why, for the login page."""

    def __init__(self, reason: str, code: str = "rejected") -> None:
        super().__init__(reason)
        self.reason, self.code = reason, code


def enabled(request: Request) -> bool:
    return bool(request.app.state.authorizer.enabled)


async def authenticate(request: Request) -> None:
    """Put the session's principal on the request (as the API's middleware does for a
    bearer token), provisioning the user; raises LoginNeeded."""
    token = request.cookies.get(SESSION)
    if not token:
        raise LoginNeeded(REASONS["required"], "required")
    verifier: TokenVerifier = request.app.state.token_verifier
    try:
        principal = await verifier.verify(token)
    except IdentityProviderUnavailable as exc:
        raise LoginNeeded(f"The identity provider cannot be reached: {exc}") from None
    except InvalidToken as exc:
        reason = str(exc)
        if "expired" in reason.lower():
            raise LoginNeeded(REASONS["expired"], "expired") from None
        raise LoginNeeded(f"Your session is no longer accepted ({reason}).") from None
    request.scope.setdefault("state", {})["principal"] = principal
    await provision(request.scope, principal, request.app.state.known_users)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


async def _discovery(request: Request) -> dict[str, Any]:
    uri = request.app.state.services.settings.auth.provider_uris[0]
    cached = _discovered.get(uri)
    if cached is not None and time.monotonic() - cached[0] < _DISCOVERY_SECONDS:
        return cached[1]
    url = uri.rstrip("/") + "/.well-known/openid-configuration"
    # In the provider pool (api/auth/provider_calls.py): ProviderBusy when it is full.
    document = orjson.loads(await provider_calls(request).run(fetch_url, url))
    if not isinstance(document, dict) or not document.get("authorization_endpoint"):
        raise ValueError("the provider's discovery document names no authorization_endpoint")
    _discovered[uri] = (time.monotonic(), document)
    return document


def _client_id(request: Request) -> str:
    auth = request.app.state.services.settings.auth
    return str(auth.console_client_id)


def _callback(request: Request) -> str:
    return str(request.url_for("console-callback"))


def safe_next(value: str | None) -> str:
    """Only a console path: never an open redirect."""
    if not value or not value.startswith("/ui") or urlsplit(value).netloc:
        return "/ui/projects"
    return value


async def start(request: Request) -> Response:
    """Send the browser to the provider with a fresh state and PKCE challenge."""
    document = await _discovery(request)
    verifier = _b64(secrets.token_bytes(48))
    state = _b64(secrets.token_bytes(24))
    challenge = _b64(hashlib.sha256(verifier.encode()).digest())
    query = {
        "response_type": "code",
        "client_id": _client_id(request),
        "redirect_uri": _callback(request),
        "scope": "openid profile email",
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    response = RedirectResponse(
        f"{document['authorization_endpoint']}?{urlencode(query)}", status_code=303
    )
    held = {
        "state": state,
        "verifier": verifier,
        "next": safe_next(request.query_params.get("next")),
        "at": int(time.time()),
    }
    response.set_cookie(
        LOGIN,
        _sealed(request, held),
        max_age=_LOGIN_SECONDS,
        path="/ui",
        httponly=True,
        samesite="lax",
        secure=secure_cookies(request),
    )
    return response


async def finish(request: Request) -> tuple[str, int, str]:
    """The callback: (access token, its lifetime in seconds, where to go next); raises
    LoginNeeded when the provider refused or the state does not match."""
    error = request.query_params.get("error")
    if error:
        described = request.query_params.get("error_description", "")
        raise LoginNeeded(f"The identity provider refused the login: {error} {described}".strip())
    held = _opened(request, request.cookies.get(LOGIN, ""))
    if held is None:
        raise LoginNeeded("The login took too long or was started elsewhere; try again.")
    state = request.query_params.get("state", "")
    code = request.query_params.get("code", "")
    if not code or not secrets.compare_digest(str(held.get("state", "")), state):
        raise LoginNeeded("The login's state does not match; try again.")
    try:
        document = await _discovery(request)
    except (OSError, ValueError, ProviderBusy) as exc:
        raise LoginNeeded(f"The identity provider cannot be reached: {exc}") from None
    form = urlencode(
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": _callback(request),
            "client_id": _client_id(request),
            "code_verifier": held.get("verifier", ""),
        }
    ).encode()
    try:
        status, answer = await provider_calls(request).run(
            forward, document["token_endpoint"], form, None
        )
    except ProviderBusy as exc:
        raise LoginNeeded(f"The identity provider cannot be reached: {exc}") from None
    if status != 200:
        reason = answer.get("error_description") or answer.get("error") or status
        raise LoginNeeded(f"The identity provider did not issue a token: {reason}")
    token = str(answer["access_token"])
    verifier: TokenVerifier = request.app.state.token_verifier
    try:
        await verifier.verify(token)
    except InvalidToken as exc:
        raise LoginNeeded(f"The provider's token is not accepted here: {exc}") from None
    lifetime = int(answer.get("expires_in") or 300)
    return token, lifetime, safe_next(held.get("next"))


def _login_key(request: Request) -> bytes:
    state = request.app.state
    key = getattr(state, "console_login_key", None)
    if not isinstance(key, bytes):
        key = derived_key(state.services.settings, "console-login-cookie")
        state.console_login_key = key
    return key


def _mac(request: Request, payload: str) -> str:
    return _b64(hmac.digest(_login_key(request), payload.encode(), "sha256"))


def _sealed(request: Request, held: dict[str, Any]) -> str:
    """The login cookie's value: the login's state, signed."""
    payload = _b64(orjson.dumps(held))
    return f"{payload}.{_mac(request, payload)}"


def _opened(request: Request, raw: str) -> dict[str, Any] | None:
    """What `_sealed` kept, if this server signed it in the last `_LOGIN_SECONDS`."""
    payload, _, mac = raw.partition(".")
    if not mac or not hmac.compare_digest(_mac(request, payload), mac):
        return None
    try:
        held = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except ValueError:  # orjson.JSONDecodeError and binascii.Error are ValueErrors
        return None
    if not isinstance(held, dict):
        return None
    at = held.get("at")
    if type(at) is not int or not 0 <= time.time() - at <= _LOGIN_SECONDS:
        return None
    return held


def signed_in(request: Request, token: str, lifetime: int, to: str) -> Response:
    """The session cookie outlives its token by a day, so that a page after the token ran
    out can say the session expired (rather than act as if nobody had logged in)."""
    response = RedirectResponse(to, status_code=303)
    response.set_cookie(
        SESSION,
        token,
        max_age=lifetime + 86_400,
        path="/ui",
        httponly=True,
        samesite="lax",
        secure=secure_cookies(request),
    )
    response.delete_cookie(LOGIN, path="/ui")
    return response


def signed_out(request: Request, to: str) -> Response:
    response = RedirectResponse(to, status_code=303)
    response.delete_cookie(
        SESSION, path="/ui", httponly=True, samesite="lax", secure=secure_cookies(request)
    )
    return response


def secure_cookies(request: Request) -> bool:
    """Cookies are `Secure` unless `ICELOG_CONSOLE_INSECURE_COOKIES=true` (plain-http
    development) — never guessed from the scheme icelog sees, which a TLS-terminating proxy
    hides."""
    insecure = request.app.state.services.settings.auth.console_insecure_cookies
    return not insecure or request.url.scheme == "https"

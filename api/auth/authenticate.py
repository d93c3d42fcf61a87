"""Bearer-token authentication for every route but the open ones (ASGI middleware).

A request with a valid token carries its `Principal` in `scope["state"]["principal"]`; the
user is provisioned (a `user.provisioned` event) on their first call and updated when a
later token names them differently. No token or a bad one is a 401 in the Iceberg error
shape; the token itself never reaches a log line, an event or an error body.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from icelog.api.auth.oidc import IdentityProviderUnavailable, OidcProvider, TokenVerifier
from icelog.api.auth.principal import InvalidToken, Principal
from icelog.api.settings import AuthSettings
from icelog.api.threads import run_in_thread
from icelog.commands.users import BY_CALL, UserFacts
from icelog.domain.context import RequestContext

# Reachable without a token: probes, the documents, and the token endpoint itself; and the
# web console, which authenticates its pages itself from its session (api/console/session.py).
_OPEN_PREFIXES = ("/api-docs/", "/swagger-ui", "/catalog/v1/oauth/tokens", "/ui/")
_OPEN_PATHS = frozenset({"/health", "/ready", "/ui"})
# How many users' last-seen facts a process keeps, and for how long, so that a known user's
# call costs no read-model lookup; a user deleted on another replica is provisioned again
# within the minute.
_KNOWN_USERS = 10_000
_KNOWN_FOR_S = 60.0


def token_verifier(settings: AuthSettings) -> TokenVerifier:
    """One verifier for every configured provider, sharing the other settings."""
    keys = settings.provider_keys or (None,) * len(settings.provider_uris)
    return TokenVerifier(
        [
            OidcProvider(
                provider_uri=uri,
                key=key,
                audiences=settings.audiences,
                additional_issuers=settings.additional_issuers,
                subject_claims=settings.subject_claims,
                leeway_seconds=settings.leeway_seconds,
            )
            for key, uri in zip(keys, settings.provider_uris, strict=True)
        ]
    )


def is_open(path: str, settings: AuthSettings) -> bool:
    if path in _OPEN_PATHS or path.startswith(_OPEN_PREFIXES):
        return True
    return path == "/metrics" and not settings.metrics_require_token


def unauthorized(message: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    status, headers, body = _error(401, "NotAuthorizedException", message)
    return status, [*headers, (b"www-authenticate", b'Bearer realm="icelog"')], body


def _error(status: int, kind: str, message: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = orjson.dumps({"error": {"message": message, "type": kind, "code": status}})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return status, headers, body


def bearer_token(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = bytes(value).decode("latin-1").partition(" ")
            found = token.strip()
            return found if scheme.lower() == "bearer" and found else None
    return None


class KnownUsers:
    """The users this process provisioned or found lately, with the facts their token
    gave, so that a known user's call costs no read-model lookup."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[str, str | None, str], float]] = {}

    def fresh(self, principal: Principal, now: float) -> bool:
        seen = self._seen.get(principal.user_id)
        return seen is not None and seen[0] == _facts(principal) and now - seen[1] < _KNOWN_FOR_S

    def remember(self, principal: Principal, now: float) -> None:
        if len(self._seen) >= _KNOWN_USERS:
            self._seen.clear()
        self._seen[principal.user_id] = (_facts(principal), now)

    def forget(self, user_id: str) -> None:
        """A deleted user: their next call provisions them again."""
        self._seen.pop(user_id, None)


def _facts(principal: Principal) -> tuple[str, str | None, str]:
    return (principal.name, principal.email, principal.user_type)


class AuthenticationMiddleware:
    def __init__(
        self, app: ASGIApp, *, verifier: TokenVerifier, settings: AuthSettings, known: KnownUsers
    ) -> None:
        self.app = app
        self.verifier = verifier
        self.settings = settings
        self.known = known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_open(scope["path"], self.settings):
            await self.app(scope, receive, send)
            return
        token = bearer_token(scope)
        if token is None:
            await _reply(send, *unauthorized("Authentication required: send a bearer token"))
            return
        try:
            principal = await self.verifier.verify(token)
        except IdentityProviderUnavailable as exc:
            # The provider's keys could not be had: nothing the client can fix.
            await _reply(send, *_error(503, "ServiceUnavailableException", str(exc)))
            return
        except InvalidToken as exc:
            await _reply(send, *unauthorized(f"Invalid token: {exc}"))
            return
        scope.setdefault("state", {})["principal"] = principal
        await provision(scope, principal, self.known)
        await self.app(scope, receive, send)


async def provision(scope: Scope, principal: Principal, known: KnownUsers) -> None:
    """Provision the caller as a user (a `user.provisioned` event) on their first call, or
    update them when their token names them differently; a known user costs no lookup."""
    now = time.monotonic()
    if known.fresh(principal, now):
        return
    services: Any = scope["app"].state.services
    # The primary's read model: what the provisioning command decides on.
    row = await run_in_thread(services.primary.user, principal.user_id)
    facts = _facts(principal)
    if row is None or (row["name"], row["email"], row["user-type"]) != facts:
        ctx = RequestContext(actor=principal.user_id, request_id="")
        user = UserFacts(principal.user_id, *facts)
        await run_in_thread(services.catalog.access.provision_user, ctx, user, how=BY_CALL)
    known.remember(principal, now)


async def _reply(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

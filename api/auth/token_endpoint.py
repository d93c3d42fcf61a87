"""`POST /catalog/v1/oauth/tokens`: the Iceberg clients' token endpoint, passed through to the
identity provider's (`token_endpoint` of its discovery document).

Spark's and PyIceberg's `credential=<id>:<secret>` then work with nothing but the catalog
URI (`client_credentials`), and an engine can exchange an end user's provider-issued token
for one of its own (RFC 8693 token exchange; also how Iceberg Java refreshes tokens). icelog
issues no tokens itself: the provider authenticates the client and decides. Nothing of a
body is logged.

What is passed on is rebuilt from the fields the two grants define (`FORWARDED`), each at
most once (`audience` and `resource` may repeat, RFC 8693): a repeated field is refused, so
icelog never checks one `grant_type` while the provider reads another, and nothing else in
the body reaches the provider. Each client address may ask `ICELOG_TOKEN_RATE_PER_MINUTE`
times a minute (429 with `Retry-After` beyond), and the provider is called from its own
bounded pool (api/auth/provider_calls.py: 503 at once when it is full).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any
from urllib.parse import parse_qs, urlencode

import orjson
from starlette.requests import Request
from starlette.responses import Response

from icelog.api.auth.oidc import IdentityProviderUnavailable, TokenVerifier
from icelog.api.auth.provider_calls import PROVIDER_CALLS, ProviderBusy, ProviderCalls, RateLimiter

CLIENT_CREDENTIALS = "client_credentials"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"  # noqa: S105 - a URN
MAX_FORM_BYTES = 64 * 1024
MAX_ANSWER_BYTES = 64 * 1024
TIMEOUT_SECONDS = 10.0
# The fields of client_credentials (RFC 6749 §4.4, client auth §2.3.1) and token exchange
# (RFC 8693 §2.1); only these reach the provider.
FORWARDED = frozenset(
    {"grant_type", "scope", "client_id", "client_secret", "subject_token",
     "subject_token_type", "actor_token", "actor_token_type", "requested_token_type",
     "audience", "resource"}
)  # fmt: skip
REPEATABLE = frozenset({"audience", "resource"})
BURST_SHARE = 6  # a burst of up to a tenth of a minute's requests (at least 1)
# The Iceberg spec's OAuthError codes; anything else a provider says is reported as one of them.
_OAUTH_ERRORS = frozenset(
    {"invalid_request", "invalid_client", "invalid_grant", "unauthorized_client",
     "unsupported_grant_type", "invalid_scope"}
)  # fmt: skip


_UNREACHABLE = {
    "error": "invalid_request",
    "error_description": "the identity provider cannot be reached",
}


def oauth_error(
    status: int, error: str, description: str, headers: dict[str, str] | None = None
) -> Response:
    body = orjson.dumps({"error": error, "error_description": description})
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def provider_calls(request: Request) -> ProviderCalls:
    found = getattr(request.app.state, "provider_calls", None)
    return found if isinstance(found, ProviderCalls) else PROVIDER_CALLS


def _limiter(request: Request) -> RateLimiter:
    state = request.app.state
    found = getattr(state, "token_limiter", None)
    if not isinstance(found, RateLimiter):
        per_minute = state.services.settings.auth.token_rate_per_minute
        found = RateLimiter(per_minute, max(1, per_minute // BURST_SHARE))
        state.token_limiter = found
    return found


def _client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def rate_limited(request: Request) -> int | None:
    """None when this client address may make another request that reaches the provider
    (a token request, a console login's start or callback: one bucket); else the seconds
    to wait."""
    return _limiter(request).take(_client_address(request))


def busy() -> Response:
    return oauth_error(
        503, "invalid_request", "the identity provider is busy; try again shortly",
        {"Retry-After": "1"},
    )  # fmt: skip


def _fields(form: bytes) -> dict[str, list[str]] | Response:
    """The known fields of the form, or the 400 that refuses it."""
    try:
        fields = parse_qs(
            form.decode("ascii"), keep_blank_values=True, strict_parsing=bool(form),
            max_num_fields=32,
        )  # fmt: skip
    except (UnicodeDecodeError, ValueError):
        return oauth_error(400, "invalid_request", "the body must be a url-encoded form")
    if any(len(values) > 1 and name not in REPEATABLE for name, values in fields.items()):
        return oauth_error(400, "invalid_request", "a parameter is given more than once")
    return {name: values for name, values in fields.items() if name in FORWARDED}


async def tokens(request: Request) -> Response:
    verifier: TokenVerifier | None = getattr(request.app.state, "token_verifier", None)
    if verifier is None:
        return oauth_error(
            400, "invalid_request",
            "icelog has no identity provider (ICELOG_OPENID_PROVIDER_URI): send no credential",
        )  # fmt: skip
    wait = rate_limited(request)
    if wait is not None:
        return oauth_error(
            429, "invalid_request", "too many token requests from this address",
            {"Retry-After": str(wait)},
        )  # fmt: skip
    form = await request.body()
    if len(form) > MAX_FORM_BYTES:
        return oauth_error(400, "invalid_request", "the form is too large")
    fields = _fields(form)
    if isinstance(fields, Response):
        return fields
    grant = fields.get("grant_type", [None])[0]
    if grant not in (CLIENT_CREDENTIALS, TOKEN_EXCHANGE):
        return oauth_error(
            400, "unsupported_grant_type",
            "grant_type must be client_credentials or token exchange (RFC 8693)",
        )  # fmt: skip
    try:
        endpoint = await verifier.token_endpoint()
    except IdentityProviderUnavailable:
        endpoint = None
    if endpoint is None:
        return oauth_error(503, "invalid_request", "the identity provider cannot be reached")
    authorization = request.headers.get("authorization")
    passed = urlencode(fields, doseq=True).encode("ascii")
    try:
        status, answer = await provider_calls(request).run(forward, endpoint, passed, authorization)
    except ProviderBusy:
        return busy()
    return Response(orjson.dumps(answer), status_code=status, media_type="application/json")


def forward(endpoint: str, form: bytes, authorization: str | None) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    if authorization:
        headers["Authorization"] = authorization
    upstream = urllib.request.Request(endpoint, data=form, headers=headers, method="POST")  # noqa: S310 - the provider's https(s) endpoint
    try:
        with urllib.request.urlopen(upstream, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            return _token_answer(response.read(MAX_ANSWER_BYTES + 1))
    except urllib.error.HTTPError as exc:
        return _error_answer(exc.code, exc.read(MAX_ANSWER_BYTES + 1))
    except (urllib.error.URLError, TimeoutError, OSError):
        return 503, _UNREACHABLE


def _json_object(body: bytes) -> dict[str, Any] | None:
    if len(body) > MAX_ANSWER_BYTES:
        return None
    try:
        found = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return found if isinstance(found, dict) else None


def _token_answer(body: bytes) -> tuple[int, dict[str, Any]]:
    found = _json_object(body)
    if found is None or not isinstance(found.get("access_token"), str):
        return 503, {"error": "invalid_request", "error_description": "the provider sent no token"}
    # RFC 6749: the type is case-insensitive; the Iceberg spec lists it in lower case.
    if isinstance(found.get("token_type"), str):
        found["token_type"] = found["token_type"].lower()
    return 200, found


def _error_answer(status: int, body: bytes) -> tuple[int, dict[str, Any]]:
    found = _json_object(body) or {}
    error = found.get("error")
    description = found.get("error_description")
    answer: dict[str, Any] = {
        "error": error if error in _OAUTH_ERRORS else "invalid_request",
    }
    if isinstance(description, str):
        answer["error_description"] = description[:500]
    return (401 if status == 401 else 400 if status < 500 else 503), answer

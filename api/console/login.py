"""The console's login pages (with an identity provider): the login page, the start of a
login and the provider's callback (both rate limited per address, as the token endpoint),
and logging out."""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from icelog.api.auth.provider_calls import ProviderBusy
from icelog.api.auth.token_endpoint import rate_limited
from icelog.api.console import session
from icelog.api.console.calls import ApiError
from icelog.api.console.frame import Moment, error_page, render, same_origin


def _plain(request: Request) -> None:
    """A page outside the session: no as-of, nobody logged in."""
    request.state.moment = Moment(None, None, None)


async def login(request: Request) -> Response:
    _plain(request)
    if not session.enabled(request):
        return RedirectResponse("/ui/projects", status_code=303)
    code = request.query_params.get("reason", "required")
    context = {
        "reason": session.REASONS.get(code, session.REASONS["required"]),
        "next": session.safe_next(request.query_params.get("next")),
        "provider": urlsplit(request.app.state.services.settings.auth.provider_uris[0]).netloc,
    }
    return render(request, "login.html", context)


def _too_many(request: Request) -> Response | None:
    """The 429 page when this address is over its rate (shared with the token endpoint):
    a login's start and callback reach the provider."""
    wait = rate_limited(request)
    if wait is None:
        return None
    error = ApiError(429, "TooManyRequestsException", "Too many logins from this address")
    response = error_page(request, error)
    response.headers["Retry-After"] = str(wait)
    return response


def _instead_of_provider(request: Request) -> Response | None:
    """What a login's start or callback answers instead of reaching the provider: the
    projects without auth, the 429 page over the rate; None when it may go on."""
    _plain(request)
    if not session.enabled(request):
        return RedirectResponse("/ui/projects", status_code=303)
    return _too_many(request)


async def login_start(request: Request) -> Response:
    instead = _instead_of_provider(request)
    if instead is not None:
        return instead
    try:
        return await session.start(request)
    except (OSError, ValueError, ProviderBusy) as exc:
        error = ApiError(503, "ServiceUnavailableException", f"The identity provider: {exc}")
        return error_page(request, error)


async def callback(request: Request) -> Response:
    instead = _instead_of_provider(request)
    if instead is not None:
        return instead
    try:
        token, lifetime, to = await session.finish(request)
    except session.LoginNeeded as refused:
        context = {"reason": refused.reason, "next": "/ui/projects", "failed": True, "provider": ""}
        return render(request, "login.html", context, status=401)
    return session.signed_in(request, token, lifetime, to)


async def logout(request: Request) -> Response:
    """POST only, and only from the console's own pages: a cross-site form must not log the
    user out (the session cookie's SameSite=Lax does not stop a Set-Cookie that deletes it)."""
    if not same_origin(request) or request.headers.get("sec-fetch-site") == "cross-site":
        _plain(request)
        return error_page(request, ApiError(403, "ForbiddenException", "A form from another site"))
    return session.signed_out(request, "/ui/login?reason=out")

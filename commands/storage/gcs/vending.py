"""Downscoped GCS tokens for one table location (credential vending).

The catalog's own token (from the service-account key) is exchanged at Google's STS for a
token bound by a Credential Access Boundary (`boundary.table_boundary`): the table's
prefix, read-only or read-write. `google.auth.downscoped.Credentials` does the same
exchange but always at `https://sts.<universe>/v1/token`; icelog needs the profile's
`sts-endpoint` (tests, private endpoints), so it calls google-auth's STS client itself with
the boundary google-auth builds.

Answers are cached per (key, endpoints, location, read/write) and reused only during the
first half of their lifetime, as the S3 vendor does: a client always gets a token that
stays valid for at least half of its lifetime, and `/credentials` called again after that
gets a new one. A downscoped token never outlives the catalog's token it was made from.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import google.auth.exceptions
from google.oauth2 import sts

from icelog.commands.storage.gcs.auth import (
    HttpxRequest,
    ServiceAccountTokens,
    key_fingerprint,
    shared_client,
    tokens_for,
)
from icelog.commands.storage.gcs.boundary import table_boundary
from icelog.commands.storage.gcs.failures import NOT_STS, GoogleAuthFailure, oauth_code
from icelog.commands.storage.kind import VendedCredentials, table_location_inside
from icelog.commands.storage.vend_cache import VendCache
from icelog.domain.errors import (
    BadRequestError,
    ServiceUnavailableError,
    UnsupportedOperationError,
)

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"  # noqa: S105

Exchange = Callable[[str, str, dict[str, Any]], Mapping[str, Any]]
"""(STS URL, the catalog's access token, the access boundary) → STS's JSON answer
(`access_token`, and `expires_in` when STS says it)."""


def sts_exchange(url: str, subject_token: str, boundary: dict[str, Any]) -> Mapping[str, Any]:
    """The real token exchange (RFC 8693, as google-auth's downscoped credentials send it)."""
    try:
        answer: Mapping[str, Any] = sts.Client(url).exchange_token(
            request=HttpxRequest(shared_client()),
            grant_type=GRANT_TYPE,
            subject_token=subject_token,
            subject_token_type=ACCESS_TOKEN_TYPE,
            requested_token_type=ACCESS_TOKEN_TYPE,
            additional_options=boundary,
        )
    except google.auth.exceptions.OAuthError as exc:
        code = oauth_code(exc.args[1] if len(exc.args) > 1 else None)
        if code is None:
            raise GoogleAuthFailure(NOT_STS) from None
        raise GoogleAuthFailure(f"the token exchange (STS) refused the request ({code})") from None
    except (google.auth.exceptions.GoogleAuthError, ValueError, TypeError):
        raise GoogleAuthFailure(NOT_STS) from None
    return answer


class GcsVendor:
    """Vends and caches downscoped tokens (`VendCache` says for how long); safe to share
    between threads."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        max_entries: int = 10_000,
        exchange: Exchange = sts_exchange,
        tokens: Callable[[Mapping[str, Any]], ServiceAccountTokens] = tokens_for,
    ) -> None:
        self._clock = clock
        self._exchange = exchange
        self._tokens = tokens
        self._cache = VendCache(max_entries)

    def vend(
        self,
        profile: Mapping[str, Any],
        credential: Mapping[str, Any],
        location: str,
        *,
        write: bool,
        client_config: Mapping[str, str],
    ) -> VendedCredentials:
        if profile.get("type") != "gcs" or not profile.get("sts-enabled"):
            raise UnsupportedOperationError(
                "Credential vending is not enabled for this warehouse's storage profile"
            )
        table = table_location_inside(profile, location)
        bucket, prefix = table.authority, table.key
        try:
            boundary = table_boundary(bucket, prefix, write=write)
        except ValueError:
            raise BadRequestError(
                f"Cannot vend credentials for {location}: a quote, backslash or control "
                "character cannot be scoped by an access boundary"
            ) from None
        # Everything that shapes the answer is in the key, so that a profile or key change
        # is never answered from a stale entry.
        cache_key = (
            key_fingerprint(credential),
            profile["endpoint"],
            profile["sts-endpoint"],
            location,
            write,
        )
        now = self._clock()
        cached = self._cache.get(cache_key, now)
        if cached is not None:
            return cached

        try:
            source = self._tokens(credential).get()
            answer = self._exchange(str(profile["sts-endpoint"]), source.value, boundary)
        except GoogleAuthFailure as exc:
            raise ServiceUnavailableError(
                f"Could not vend storage credentials: {exc.reason}"
            ) from None
        token = answer.get("access_token")
        if not isinstance(token, str) or not token:
            raise ServiceUnavailableError(f"Could not vend storage credentials: {NOT_STS}")
        expires_in = answer.get("expires_in")
        expires_at = source.expires_at
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
            expires_at = min(expires_at, now + float(expires_in))
        lifetime = max(0.0, expires_at - now)
        expires_at_ms = int(expires_at * 1000)
        config = {
            "gcs.oauth2.token": token,
            # Epoch milliseconds; PyArrow's GCS file system refuses a token without it.
            "gcs.oauth2.token-expires-at": str(expires_at_ms),
            "gcs.project-id": str(credential["key"]["project_id"]),
            **client_config,
        }
        vended = VendedCredentials(prefix=location, config=config, expires_at_ms=expires_at_ms)
        return self._cache.put(cache_key, vended, now=now, lifetime_s=lifetime)

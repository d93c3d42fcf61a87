"""The catalog's own Google access tokens, made from a warehouse's service-account key.

google-auth signs the JWT assertion and speaks the OAuth protocol (the `token_uri` of the
key, Google's STS); its HTTP calls go through `HttpxRequest`, which gives them icelog's
timeouts (google-auth's default is two minutes), follows no redirect (the signed assertion
and the catalog's token go only to the URL they were meant for) and reads at most 64 KiB
of an answer.

A token is renewed once half of its lifetime has passed, so that a downscoped token made
from it (which cannot outlive it) still has at least half a lifetime left. Tokens live in
memory only, per key: never in an event, a log line or a repr.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import google.auth.exceptions
import google.auth.transport
import httpx
from google.oauth2 import service_account

from icelog.commands.storage.build_once import BuildOnceCache
from icelog.commands.storage.gcs.failures import (
    NOT_TOKEN_ENDPOINT,
    GoogleAuthFailure,
    oauth_code,
)

# What the catalog's token may do; the service account's IAM roles are what really bound
# it. Google's own downscoping samples start from this scope.
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
# Token endpoints and STS answer in well under a second; these bound a stuck one.
AUTH_TIMEOUT = httpx.Timeout(connect=5.0, read=10.0, write=10.0, pool=5.0)
_MAX_ANSWER_BYTES = 64 << 10
# When a token endpoint does not say how long a token lives (Google's say 3599 s).
_ASSUMED_LIFETIME_S = 3600.0


class _Response(google.auth.transport.Response):
    def __init__(self, status: int, headers: Mapping[str, str], data: bytes) -> None:
        self._status = status
        self._headers = dict(headers)
        self._data = data

    @property
    def status(self) -> int:
        return self._status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._headers

    @property
    def data(self) -> bytes:
        return self._data


class HttpxRequest(google.auth.transport.Request):
    """google-auth's transport, over one shared httpx client (see the module docstring)."""

    def __init__(self, client: httpx.Client) -> None:
        self._client = client

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> _Response:
        try:
            with self._client.stream(
                method,
                url,
                content=body,
                headers=dict(headers or {}),
                timeout=AUTH_TIMEOUT,
                follow_redirects=False,
            ) as response:
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > _MAX_ANSWER_BYTES:
                        break  # no OAuth answer is this large: what was read is parsed as is
                return _Response(response.status_code, response.headers, bytes(data))
        except httpx.HTTPError:
            # httpx's message names the URL and the low-level cause: neither is kept.
            raise google.auth.exceptions.TransportError("the endpoint was not reached") from None


_CLIENT: httpx.Client | None = None
_CLIENT_LOCK = threading.Lock()


def shared_client() -> httpx.Client:
    """The process's one httpx client for Google endpoints (pooled, thread-safe)."""
    global _CLIENT  # noqa: PLW0603 - one pool per process, made on first use
    with _CLIENT_LOCK:
        if _CLIENT is None:
            _CLIENT = httpx.Client(
                follow_redirects=False,
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            )
        return _CLIENT


@dataclass(frozen=True)
class AccessToken:
    """An OAuth access token and when it stops working (epoch seconds)."""

    value: str = field(repr=False)
    issued_at: float
    expires_at: float

    def fresh(self, now: float) -> bool:
        """Still in the first half of its lifetime."""
        return now < self.issued_at + (self.expires_at - self.issued_at) / 2


def key_fingerprint(credential: Mapping[str, Any]) -> str:
    """One key's identity for in-memory caches: a hash of the whole sealed credential, so
    that a rotated key never reuses the tokens of the one it replaced."""
    canonical = json.dumps(credential, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class ServiceAccountTokens:
    """Access tokens of one service account; safe to share between threads (one refresh at
    a time, the others wait for its result)."""

    def __init__(
        self,
        key: Mapping[str, Any],
        request: google.auth.transport.Request,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = dict(key)
        self._request = request
        self._clock = clock
        self._lock = threading.Lock()
        self._token: AccessToken | None = None

    def __repr__(self) -> str:  # never the key, never a token
        return f"ServiceAccountTokens(client_email={self._key.get('client_email')!r})"

    def get(self) -> AccessToken:
        """A token in the first half of its lifetime; GoogleAuthFailure when none is had."""
        with self._lock:
            now = self._clock()
            if self._token is not None and self._token.fresh(now):
                return self._token
            self._token = self._refresh(now)
            return self._token

    def _refresh(self, now: float) -> AccessToken:
        try:
            credentials = service_account.Credentials.from_service_account_info(
                self._key, scopes=list(SCOPES)
            )
            credentials.refresh(self._request)
        except google.auth.exceptions.RefreshError as exc:
            code = oauth_code(exc.args[1] if len(exc.args) > 1 else None)
            if code is None:
                raise GoogleAuthFailure(NOT_TOKEN_ENDPOINT) from None
            raise GoogleAuthFailure(
                f"the token endpoint refused the service-account key ({code})"
            ) from None
        except (google.auth.exceptions.GoogleAuthError, ValueError, TypeError, KeyError):
            # A transport failure, or an answer that is not an OAuth token response.
            raise GoogleAuthFailure(NOT_TOKEN_ENDPOINT) from None
        token = credentials.token
        if not isinstance(token, str) or not token:
            raise GoogleAuthFailure(NOT_TOKEN_ENDPOINT)
        expiry = credentials.expiry
        # google-auth's expiry is a naive UTC datetime on the wall clock (None when the
        # endpoint gave no lifetime); what is kept is the lifetime, counted on `clock`.
        lifetime = (
            expiry.replace(tzinfo=UTC).timestamp() - time.time()
            if isinstance(expiry, datetime)
            else _ASSUMED_LIFETIME_S
        )
        return AccessToken(token, issued_at=now, expires_at=now + max(0.0, lifetime))


_ACCOUNTS: BuildOnceCache[str, ServiceAccountTokens] = BuildOnceCache(max_entries=1024)


def tokens_for(credential: Mapping[str, Any]) -> ServiceAccountTokens:
    """The token source of a sealed `service-account-key` credential, shared by every
    FileIO and vendor that uses the same key."""
    return _ACCOUNTS.get(
        key_fingerprint(credential),
        lambda: ServiceAccountTokens(credential["key"], HttpxRequest(shared_client())),
    )

"""Azure SDK clients for one ADLS profile and credential, and what their failures may say.

The catalog speaks the Blob API (azure-storage-blob), which addresses the same data as the
DFS API on an ADLS Gen2 account and is what emulators serve. A shared key signs requests
(it never travels); a service principal gets Entra ID tokens from `authority-host`
(azure-identity), which then travel to the endpoint. Clients are thread-safe and slow to
build, so one is kept per endpoint and credential.

Azure SDK exceptions carry URLs, and a URL may carry a SAS in its query: nothing here ever
puts an exception's text into a message. A failure is told by Azure's error code and HTTP
status when a storage service answered, else by one fixed phrase.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from azure.core.credentials import AzureNamedKeyCredential, TokenCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.identity import ClientSecretCredential
from azure.storage.blob import BlobServiceClient, ExponentialRetry

from icelog.commands.storage.adls.profile import DEFAULT_AUTHORITY_HOST, endpoint_of
from icelog.commands.storage.build_once import BuildOnceCache

NOT_AZURE = "no Azure Blob service answered at the endpoint"
NO_TOKEN = "no token for the service principal from the authority host"  # noqa: S105
# Azure error codes are words (AuthorizationFailure, ContainerNotFound, BlobAlreadyExists).
_CODE = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,63}$")
_CLIENTS: BuildOnceCache[tuple[Any, ...], BlobServiceClient] = BuildOnceCache(max_entries=256)


def credential_digest(credential: dict[str, Any] | None) -> str:
    """A stable, one-way name for a credential, for cache keys (never the secret itself)."""
    text = json.dumps(credential or {}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def token_credential(profile: dict[str, Any], credential: dict[str, Any]) -> TokenCredential:
    """A service principal's azure-identity credential, asking `authority-host` for tokens."""
    authority = profile.get("authority-host") or DEFAULT_AUTHORITY_HOST
    return ClientSecretCredential(
        credential["tenant-id"],
        credential["client-id"],
        credential["client-secret"],
        authority=authority,
        # Microsoft's instance discovery validates an authority against Microsoft's own list,
        # from login.microsoftonline.com: a configured authority (a sovereign cloud's, an
        # Azure Stack's) is the operator's choice and must not depend on it.
        disable_instance_discovery=authority != DEFAULT_AUTHORITY_HOST,
        connection_timeout=5,
        read_timeout=15,
        retry_total=2,
    )


def _storage_credential(profile: dict[str, Any], credential: dict[str, Any]) -> Any:
    if credential["credential-type"] == "shared-access-key":
        return AzureNamedKeyCredential(profile["account-name"], credential["key"])
    return token_credential(profile, credential)


def service_client(
    profile: dict[str, Any], credential: dict[str, Any], *, quick: bool = False
) -> BlobServiceClient:
    """A Blob service client for the profile's endpoint with the catalog's credential.
    `quick` is for interactive checks (warehouse validation): a bad endpoint must fail in
    seconds, not after minutes of retries."""
    endpoint = endpoint_of(profile)
    key = (
        endpoint,
        profile["account-name"],
        profile.get("authority-host"),
        credential_digest(credential),
        quick,
    )
    return _CLIENTS.get(
        key,
        lambda: BlobServiceClient(
            account_url=endpoint,
            credential=_storage_credential(profile, credential),
            connection_timeout=3 if quick else 10,
            read_timeout=10 if quick else 30,
            retry_policy=retry_policy(quick=quick),
            # Reads are bounded by the caller; smaller requests keep each one short.
            max_single_get_size=4 << 20,
            max_chunk_get_size=4 << 20,
            # Metadata files go up in one request, which `overwrite=False` makes conditional.
            max_single_put_size=64 << 20,
        ),
    )


def retry_policy(*, quick: bool) -> ExponentialRetry:
    """azure-storage-blob waits 15 s before its first retry: far too long on a request path
    (loadTable, the warehouse check). A second or two, then a few more."""
    if quick:
        return ExponentialRetry(
            initial_backoff=1, increment_base=2, retry_total=1, random_jitter_range=1
        )
    return ExponentialRetry(initial_backoff=1, increment_base=3, retry_total=3)


def status_of(exc: BaseException) -> int | None:
    return exc.status_code if isinstance(exc, HttpResponseError) else None


def code_of(exc: BaseException) -> str:
    """Azure's error code of a storage answer ('' for anything else)."""
    if not isinstance(exc, HttpResponseError):
        return ""
    # azure-storage sets `error_code` on the exceptions it raises (absent on azure-core's own).
    code = getattr(exc, "error_code", None)
    text = str(getattr(code, "value", code) or "")
    return text if _CODE.fullmatch(text) else ""


def failure_reason(exc: BaseException) -> str:
    """What went wrong, safe to show: `<ErrorCode> (HTTP <status>)` when a storage service
    answered, else one phrase for every other failure — a refused connection, a timeout, a
    web server that is not Azure — so that a storage check cannot map a network. A token
    the authority host would not give is its own phrase (azure-identity raises it as a
    ClientAuthenticationError without a storage answer)."""
    if isinstance(exc, HttpResponseError):
        code = code_of(exc)
        if code and exc.status_code:
            return f"{code} (HTTP {exc.status_code})"
        headers = getattr(exc.response, "headers", None) or {}
        if exc.status_code and headers.get("x-ms-request-id"):
            return f"HTTP {exc.status_code}"
        if isinstance(exc, ClientAuthenticationError):
            return NO_TOKEN
    return NOT_AZURE

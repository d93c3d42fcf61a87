"""SAS vending for ADLS tables: a directory SAS per table folder, under the config keys
Iceberg clients read, cached for half its life.

The keys (for a table in `abfss://<fs>@<account>.<host>/...`):

- `adls.sas-token.<account>.<host>`: Iceberg Java's `AzureProperties` looks the token up by
  the location's `<account>.<host>`; PyIceberg 0.12's fsspec FileIO (adlfs) takes the account
  name from the key's first label and the token as its SAS.
- `adls.sas-token-expires-at-ms.<account>.<host>`: Java's refreshing credential provider
  requires it next to the token.
- `adls.connection-string` = `BlobEndpoint=<endpoint>;SharedAccessSignature=<sas>` when the
  endpoint is not the public `https://<account>.blob.core.windows.net`: adlfs reaches any
  other endpoint, and an `http://` emulator in particular, only through a connection string.
- the facts of `client_config` (the endpoint for Java; the account host for adlfs).

Nothing here logs or raises with a key, secret, token or SAS.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

from azure.core.exceptions import AzureError

from icelog.commands.storage.adls.clients import credential_digest, failure_reason, service_client
from icelog.commands.storage.adls.profile import endpoint_of
from icelog.commands.storage.adls.sas import (
    SignedSas,
    delegation_key,
    directory_sas,
    filesystem_sas,
    validity_window,
)
from icelog.commands.storage.kind import (
    VendedCredentials,
    required_credential,
    table_location_inside,
)
from icelog.commands.storage.vend_cache import VendCache
from icelog.domain.errors import (
    BadRequestError,
    ServiceUnavailableError,
    UnsupportedOperationError,
)
from icelog.domain.locations import Location

SAS_TOKEN = "adls.sas-token."  # noqa: S105 - a config key's name
SAS_EXPIRES_AT = "adls.sas-token-expires-at-ms."
CONNECTION_STRING = "adls.connection-string"
# Java's endpoint override for one account (AzureProperties.ADLS_CONNECTION_STRING_PREFIX):
# despite the name its value is the endpoint URL, never a credential.
JAVA_ENDPOINT = "adls.connection-string."
ACCOUNT_HOST = "adls.account-host"

Signer = Callable[[dict[str, Any], dict[str, Any], str, bool, dt.datetime], SignedSas]
"""(profile, credential, directory, write, now) → the signed SAS."""


def public_endpoint(account: str) -> str:
    """Where adlfs and the SDKs go for an account when told nothing else."""
    return f"https://{account}.blob.core.windows.net"


def client_config(profile: dict[str, Any]) -> dict[str, str]:
    """What every client needs to reach the account, credentials aside: nothing for the
    public cloud; for any other endpoint, Java's per-account endpoint and, when it is https,
    adlfs's account host."""
    account, endpoint = profile["account-name"], endpoint_of(profile)
    if endpoint == public_endpoint(account):
        return {}
    config = {f"{JAVA_ENDPOINT}{account}.{profile['host']}": endpoint}
    if endpoint.startswith("https://"):
        config[ACCOUNT_HOST] = endpoint[len("https://") :]
    return config


def sas_config(profile: dict[str, Any], sas: SignedSas) -> dict[str, str]:
    """The vended config for one SAS."""
    account, endpoint = profile["account-name"], endpoint_of(profile)
    storage_account = f"{account}.{profile['host']}"
    config = {
        **client_config(profile),
        f"{SAS_TOKEN}{storage_account}": sas.token,
        f"{SAS_EXPIRES_AT}{storage_account}": str(expires_at_ms(sas)),
    }
    if endpoint != public_endpoint(account):
        config[CONNECTION_STRING] = f"BlobEndpoint={endpoint};SharedAccessSignature={sas.token}"
    return config


def expires_at_ms(sas: SignedSas) -> int:
    return int(sas.expires_at.timestamp() * 1000)


def table_directory(profile: dict[str, Any], location: str) -> tuple[Location, str]:
    """The parsed table location and its folder in the filesystem; 400 for anything that is
    not a folder strictly inside the warehouse."""
    parsed = table_location_inside(profile, location)
    if "%" in parsed.key:
        # The service decodes a request's path before it compares it with the signed one:
        # an escape would make the signed folder and the folder clients use two places.
        raise BadRequestError(
            f"Cannot vend credentials for {location}: a location holding '%' cannot be scoped"
        )
    return parsed, parsed.key


def sign_with_catalog_credential(
    profile: dict[str, Any],
    credential: dict[str, Any],
    directory: str,
    write: bool,
    now: dt.datetime,
) -> SignedSas:
    """A shared key signs a service SAS itself; a service principal first gets a user
    delegation key from the Blob service (its token comes from `authority-host`)."""
    start, expiry = validity_window(now, int(profile["sas-token-validity-seconds"]))
    common = {
        "account": profile["account-name"],
        "filesystem": profile["filesystem"],
        "write": write,
        "start": start,
        "expiry": expiry,
    }

    def sign(**signing_key: Any) -> SignedSas:
        if profile.get("sas-scope") == "filesystem":
            return filesystem_sas(**common, **signing_key)
        return directory_sas(**common, directory=directory, **signing_key)

    if credential["credential-type"] == "shared-access-key":
        return sign(account_key=credential["key"])
    try:
        key = delegation_key(service_client(profile, credential), start, expiry)
    except AzureError as exc:
        raise ServiceUnavailableError(
            "Could not vend storage credentials: no user delegation key from "
            f"{endpoint_of(profile)}: {failure_reason(exc)}"
        ) from None
    return sign(delegation_key=key)


class SasVendor:
    """Vends and caches table-scoped SAS tokens (`VendCache` says for how long); safe to
    share between threads. `clock` tells wall-clock seconds."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        max_entries: int = 10_000,
        signer: Signer = sign_with_catalog_credential,
    ) -> None:
        self._clock = clock
        self._signer = signer
        self._cache = VendCache(max_entries)

    def vend(
        self,
        profile: dict[str, Any],
        credential: dict[str, Any] | None,
        location: str,
        *,
        write: bool,
    ) -> VendedCredentials:
        if not profile.get("sas-enabled"):
            raise UnsupportedOperationError(
                "Credential vending is not enabled for this warehouse's storage profile"
            )
        credential = required_credential(credential)
        parsed, directory = table_directory(profile, location)
        # Everything that shapes the answer is in the key, so that a profile edit (endpoint,
        # validity) or a new credential is never answered from a stale entry.
        key = (
            credential_digest(credential),
            profile["account-name"],
            profile["filesystem"],
            profile["host"],
            endpoint_of(profile),
            profile.get("authority-host"),
            int(profile["sas-token-validity-seconds"]),
            profile.get("sas-scope"),
            directory,
            write,
        )
        now = self._clock()
        cached = self._cache.get(key, now)
        if cached is not None:
            return cached
        sas = self._signer(
            profile, credential, directory, write, dt.datetime.fromtimestamp(now, dt.UTC)
        )
        vended = VendedCredentials(
            prefix=str(parsed), config=sas_config(profile, sas), expires_at_ms=expires_at_ms(sas)
        )
        lifetime = max(0.0, sas.expires_at.timestamp() - now)
        return self._cache.put(key, vended, now=now, lifetime_s=lifetime)

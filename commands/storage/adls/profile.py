"""ADLS Gen2 storage profiles and credentials (Lakekeeper's `AdlsProfile` and `AzCredential`
shapes), normalised for storing.

A profile is stored in the event log, so it never holds a secret; the credential is checked
here and sealed by the caller. Every field Lakekeeper defines is acted on, and one field is
icelog's own: `endpoint`, the Blob API URL the catalog and its clients call (the default is the
account's `blob` twin of `host`; an emulator such as Azurite serves `http://127.0.0.1:10000/
<account>`). Table locations keep their ADLS spelling, `abfss://<filesystem>@<account>.<host>/...`,
whatever the endpoint.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from icelog.commands.storage.profile_fields import (
    DERIVED_FIELDS,
    HTTP_SCHEMES,
    flag,
    int_in_range,
    key_prefix,
    optional_str,
    optional_url,
    refuse_unknown_fields,
)
from icelog.domain.errors import BadRequestError
from icelog.domain.locations import Location

TYPE = "adls"
CREDENTIAL_TYPE = "az"
DEFAULT_HOST = "dfs.core.windows.net"
DEFAULT_AUTHORITY_HOST = "https://login.microsoftonline.com"
DEFAULT_VALIDITY_S = 3600
# Azure caps a user delegation key (and so a user delegation SAS) at seven days. A SAS shorter
# than a minute would expire while a client still plans its first read.
MIN_VALIDITY_S, MAX_VALIDITY_S = 60, 7 * 24 * 3600
# Lakekeeper's limit: keys are at most 1,024 bytes, and tables need room below the prefix.
MAX_KEY_PREFIX_CHARS = 512

_FIELDS = {
    "type",
    "account-name",
    "filesystem",
    "key-prefix",
    "host",
    "authority-host",
    "sas-enabled",
    "sas-scope",
    "sas-token-validity-seconds",
    "allow-alternative-protocols",
    "storage-layout",
    "endpoint",
}
# Azure's naming rules: accounts 3-24 lowercase letters and digits; containers (filesystems)
# 3-63 lowercase letters, digits and single hyphens, starting and ending with a letter or digit.
ACCOUNT_NAME = re.compile(r"^[a-z0-9]{3,24}$")
FILESYSTEM_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}$")
_LABEL = r"[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?"
HOST_NAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})+$")
# Entra ID tenants are GUIDs or verified domain names; application (client) ids are GUIDs.
# Either becomes part of a URL path or form, so nothing else gets through.
_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-]{0,253}$")
_CLIENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9\-]{0,127}$")
_CREDENTIAL_FIELDS = {
    "shared-access-key": {"type", "credential-type", "key"},
    "client-credentials": {"type", "credential-type", "client-id", "tenant-id", "client-secret"},
}


def _url(profile: dict[str, Any], key: str, *, schemes: tuple[str, ...]) -> str | None:
    """An `http_url` that holds no white space, '\\' or '%' either: ADLS's rule is
    stricter than the other kinds' (and stays as it was when they came to share one)."""
    url = optional_url(profile, key, schemes=schemes)
    if url is not None and (any(ch.isspace() for ch in url) or "\\" in url or "%" in url):
        raise BadRequestError(f"storage-profile.{key} must not contain white space, '\\' or '%'")
    return url


def default_endpoint(account: str, host: str) -> str | None:
    """The Blob API endpoint of an account whose DFS host is `host`: `dfs.<suffix>` is served
    at `blob.<suffix>` (None for any other host: there is no rule to guess by)."""
    if not host.startswith("dfs."):
        return None
    return f"https://{account}.blob.{host[len('dfs.') :]}"


def endpoint_of(profile: dict[str, Any]) -> str:
    """The Blob API URL the catalog and its clients call for a normalised profile."""
    endpoint = profile.get("endpoint") or default_endpoint(profile["account-name"], profile["host"])
    if endpoint is None:  # normalize_profile refuses such a profile
        raise BadRequestError("The adls storage profile has no Blob API endpoint")
    return str(endpoint)


def _key_prefix(profile: dict[str, Any]) -> str:
    prefix = key_prefix(profile)
    if len(prefix) > MAX_KEY_PREFIX_CHARS:
        raise BadRequestError(
            f"storage-profile.key-prefix must be at most {MAX_KEY_PREFIX_CHARS} characters"
        )
    return prefix


def normalize_profile(profile: dict[str, Any]) -> dict[str, Any]:
    """Check an `adls` profile and return it with every field present and `base-location`
    (`abfss://<filesystem>@<account>.<host>[/<key-prefix>]`). 400 on anything unusable; an
    unknown field is refused, so that a setting never silently does nothing."""
    if profile.get("type") != TYPE:
        raise BadRequestError("storage-profile.type must be 'adls'")
    refuse_unknown_fields(profile, _FIELDS | DERIVED_FIELDS, "storage-profile")
    account = profile.get("account-name")
    if not isinstance(account, str) or not ACCOUNT_NAME.fullmatch(account):
        raise BadRequestError(
            "storage-profile.account-name must be an Azure storage account name "
            "(3-24 lowercase letters and digits)"
        )
    filesystem = profile.get("filesystem")
    if not isinstance(filesystem, str) or not FILESYSTEM_NAME.fullmatch(filesystem):
        raise BadRequestError(
            "storage-profile.filesystem must be an ADLS filesystem (container) name "
            "(3-63 lowercase letters, digits and single '-', starting and ending with a "
            "letter or digit)"
        )
    host = (optional_str(profile, "host") or DEFAULT_HOST).lower().rstrip(".")
    if not HOST_NAME.fullmatch(host) or len(host) > 253:
        raise BadRequestError(
            "storage-profile.host must be a DNS name such as dfs.core.windows.net"
        )
    endpoint = _url(profile, "endpoint", schemes=HTTP_SCHEMES)
    if endpoint is None and default_endpoint(account, host) is None:
        raise BadRequestError(
            "storage-profile.endpoint (the Blob API URL) is required when host does not "
            "start with 'dfs.'"
        )
    authority = _url(profile, "authority-host", schemes=("https",))
    layout = profile.get("storage-layout")
    if layout is not None and not isinstance(layout, dict):
        raise BadRequestError("storage-profile.storage-layout must be an object")
    prefix = _key_prefix(profile)
    root = f"abfss://{filesystem}@{account}.{host}"
    # The same rules as every other location (characters, encodings, lengths).
    base = str(Location.parse(f"{root}/{prefix}" if prefix else root, "storage-profile.key-prefix"))
    if "%" in base:
        # Roots are compared as written; a percent-escape would spell one folder two ways.
        raise BadRequestError("storage-profile.key-prefix must not contain '%'")
    return {
        "type": TYPE,
        "account-name": account,
        "filesystem": filesystem,
        "key-prefix": prefix,
        "host": host,
        "endpoint": endpoint,
        "authority-host": authority,
        "sas-enabled": flag(profile, "sas-enabled", True),
        "sas-scope": _sas_scope(profile, prefix),
        "sas-token-validity-seconds": int_in_range(
            profile,
            "sas-token-validity-seconds",
            default=DEFAULT_VALIDITY_S,
            low=MIN_VALIDITY_S,
            high=MAX_VALIDITY_S,
        ),
        "allow-alternative-protocols": flag(profile, "allow-alternative-protocols", False),
        "storage-layout": layout,
        "base-location": base,
    }


def _sas_scope(profile: dict[str, Any], prefix: str) -> str:
    """`directory` (the default): each SAS opens one table's folder. `filesystem`: each SAS
    opens the whole filesystem — for emulators and accounts that cannot sign a directory
    SAS (Azurite), and only for a warehouse that owns its whole filesystem, so that a token
    never reaches another warehouse's tables (it does reach the other tables of its own)."""
    scope = profile.get("sas-scope")
    if scope is None:
        return "directory"
    if scope not in ("directory", "filesystem"):
        raise BadRequestError("storage-profile.sas-scope must be 'directory' or 'filesystem'")
    if scope == "filesystem" and prefix:
        raise BadRequestError(
            "storage-profile.sas-scope 'filesystem' needs a warehouse that owns its whole "
            "filesystem (no key-prefix): its tokens open every folder of the filesystem"
        )
    return str(scope)


def normalize_credential(credential: object) -> dict[str, Any]:
    """`{"type": "az", "credential-type": "shared-access-key", "key": ...}` or
    `{"type": "az", "credential-type": "client-credentials", "client-id", "tenant-id",
    "client-secret"}`. Messages name fields, never values."""
    if not isinstance(credential, dict):
        raise BadRequestError("storage-credential is required for an adls storage profile")
    if credential.get("type") != CREDENTIAL_TYPE:
        raise BadRequestError("storage-credential.type must be 'az' for an adls storage profile")
    kind = credential.get("credential-type")
    if kind == "azure-system-identity":
        raise BadRequestError(
            "storage-credential.credential-type 'azure-system-identity' is not supported; "
            "use 'shared-access-key' or 'client-credentials'"
        )
    if kind not in _CREDENTIAL_FIELDS:
        raise BadRequestError(
            "storage-credential.credential-type must be 'shared-access-key' or 'client-credentials'"
        )
    refuse_unknown_fields(credential, _CREDENTIAL_FIELDS[kind], "storage-credential")
    if kind == "shared-access-key":
        key = credential.get("key")
        if not isinstance(key, str) or not _is_base64(key):
            raise BadRequestError(
                "storage-credential.key must be the storage account's access key (base64)"
            )
        return {"type": CREDENTIAL_TYPE, "credential-type": kind, "key": key}
    client_id = credential.get("client-id")
    tenant_id = credential.get("tenant-id")
    secret = credential.get("client-secret")
    if not isinstance(client_id, str) or not _CLIENT_ID.fullmatch(client_id):
        raise BadRequestError("storage-credential.client-id must be an application (client) id")
    if not isinstance(tenant_id, str) or not _TENANT.fullmatch(tenant_id):
        raise BadRequestError("storage-credential.tenant-id must be a tenant id or domain")
    if not isinstance(secret, str) or not secret or len(secret) > 1024:
        raise BadRequestError("storage-credential.client-secret is required")
    return {
        "type": CREDENTIAL_TYPE,
        "credential-type": kind,
        "client-id": client_id,
        "tenant-id": tenant_id,
        "client-secret": secret,
    }


def _is_base64(text: str) -> bool:
    if not text or len(text) > 1024:
        return False
    try:
        return bool(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        return False


def same_storage_and_trust(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a sealed credential may serve an updated profile: the same account,
    filesystem and host, the same endpoint (a bearer token or a SAS goes there) and the same
    authority host (a client secret goes there)."""
    keys = ("account-name", "filesystem", "host", "authority-host")
    try:
        return all(old.get(k) == new.get(k) for k in keys) and endpoint_of(old) == endpoint_of(new)
    except (KeyError, BadRequestError):
        return False

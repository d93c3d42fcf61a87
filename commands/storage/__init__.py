"""Storage adapters: one FileIO per storage-profile type."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from icelog.commands.storage.file.local import LocalFileIO, check_writable_directory
from icelog.commands.storage.kind import StorageLimits as StorageLimits
from icelog.commands.storage.s3.objects import S3Access, S3FileIO, client_for
from icelog.commands.storage.s3.profile import (
    normalize_s3_credential,
    normalize_s3_profile,
    probe_s3_access,
    s3_access,
)
from icelog.commands.storage.s3.vending import CredentialVendor
from icelog.domain.errors import BadRequestError, CatalogError, ServiceUnavailableError
from icelog.domain.locations import Location
from icelog.domain.ports import FileIO, SecretVault

# FileIOs by (profile settings, limits). boto3 clients are thread-safe and slow to build
# (tens of ms): one per credential and endpoint; local ones resolve their root once.
DEFAULT_LIMITS = StorageLimits()
_IOS: dict[tuple[Any, ...], FileIO] = {}
_S3_CLIENTS: dict[tuple[Any, ...], Any] = {}
_LOCK = threading.Lock()
_MAX_CACHED = 1024


def credential_for(profile: dict[str, Any], vault: SecretVault | None) -> dict[str, Any]:
    """The decrypted credential a profile refers to; 503 when it cannot be read."""
    credential_id = profile.get("credential-id")
    if credential_id is None:
        raise ServiceUnavailableError("The warehouse's storage has no credential configured")
    if vault is None:
        raise ServiceUnavailableError("Storage credentials are not available on this server")
    found = vault.get(UUID(str(credential_id)))
    if found is None:
        raise ServiceUnavailableError("The warehouse's storage credential is missing")
    return found


def access_for(profile: dict[str, Any], vault: SecretVault | None) -> S3Access:
    """How the catalog itself reaches an S3 warehouse."""
    return s3_access(profile, credential_for(profile, vault))


def file_io_for(
    storage_profile: dict[str, Any],
    vault: SecretVault | None = None,
    limits: StorageLimits = DEFAULT_LIMITS,
) -> FileIO:
    """The FileIO that serves a warehouse's storage profile, confined to its base location."""
    kind = storage_profile.get("type")
    if kind not in ("file", "s3"):
        raise BadRequestError(f"Unsupported storage profile type: {kind!r}")
    base = str(storage_profile.get("base-location"))
    connection = (
        storage_profile.get("credential-id"),
        storage_profile.get("region"),
        storage_profile.get("endpoint"),
        storage_profile.get("path-style-access"),
    )
    key = (kind, base, *connection, limits)
    with _LOCK:
        found = _IOS.get(key)
    if found is not None:
        return found
    root = Location.parse(base, "storage base-location")
    if kind == "file":
        found = LocalFileIO(root, limits.max_read_bytes)
    else:
        with _LOCK:
            client = _S3_CLIENTS.get(connection)
        if client is None:
            client = client_for(access_for(storage_profile, vault))
            with _LOCK:
                client = _S3_CLIENTS.setdefault(connection, client)
        found = S3FileIO(
            client,
            root,
            max_read_bytes=limits.max_read_bytes,
            read_timeout_s=limits.read_timeout_s,
        )
    with _LOCK:
        if len(_IOS) >= _MAX_CACHED:
            _IOS.clear()
        _IOS[key] = found
    return found


def _resolved(location: Location) -> Location:
    """A `file` location as the system resolves it (links followed); others as they are."""
    if location.scheme != "file":
        return location
    return Location.parse(
        os.path.realpath(location.path), "storage-profile.base-location", encoded_separators=True
    )


def storage_root(profile: dict[str, Any]) -> Location:
    """Where a warehouse's storage really is, for telling whether two warehouses overlap:
    a `file` root as the system resolves it (links followed), an S3 root as bucket + prefix."""
    return _resolved(Location.parse(profile.get("base-location"), "storage-profile.base-location"))


def probe_sts(profile: dict[str, Any], access: S3Access, external_id: str | None) -> None:
    """Vending must work before a warehouse promises it: assume the role once."""
    try:
        CredentialVendor().vend(
            profile,
            access,
            f"{profile['base-location']}/.icelog-probe",
            write=True,
            external_id=external_id,
        )
    except CatalogError as exc:
        raise BadRequestError(f"Storage validation failed: {exc.message}") from None


@dataclass(frozen=True)
class StoragePolicy:
    """Where warehouses may live, from settings: `file` warehouses only below one of
    `file_roots` (ICELOG_FILE_WAREHOUSE_ROOTS), S3 endpoints only on `s3_endpoint_hosts`
    (ICELOG_S3_ENDPOINT_HOSTS). Empty: no restriction."""

    file_roots: tuple[Location, ...] = ()
    s3_endpoint_hosts: tuple[str, ...] = ()

    def check_file_root(self, base: Location) -> None:
        """Both as written and as the system resolves it (a link planted in an allowed
        place must not lead out of it)."""
        if not self.file_roots:
            return
        real = _resolved(base)
        allowed = [(root, _resolved(root)) for root in self.file_roots]
        if not any(root.contains(base) and real_root.contains(real) for root, real_root in allowed):
            raise BadRequestError(
                f"storage-profile.base-location {base} is not below an allowed warehouse root "
                "(ICELOG_FILE_WAREHOUSE_ROOTS)"
            )

    def check_endpoint(self, key: str, url: str | None) -> None:
        if url is None or not self.s3_endpoint_hosts:
            return
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        with_port = f"{host}:{parts.port}" if parts.port is not None else host
        if host not in self.s3_endpoint_hosts and with_port not in self.s3_endpoint_hosts:
            raise BadRequestError(
                f"storage-profile.{key} is not an allowed S3 endpoint host "
                "(ICELOG_S3_ENDPOINT_HOSTS)"
            )


def validate_storage_profile(
    profile: object,
    credential: object = None,
    *,
    check_access: bool = True,
    policy: StoragePolicy = StoragePolicy(),
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Normalise a storage profile (and its credential) from the management API and, with
    `check_access`, check the storage works. Returns the profile to store and the
    credential to seal."""
    if not isinstance(profile, dict):
        raise BadRequestError("storage-profile must be an object")
    kind = profile.get("type")
    if kind == "s3":
        normalized = normalize_s3_profile(profile)
        policy.check_endpoint("endpoint", normalized["endpoint"])
        policy.check_endpoint("sts-endpoint", normalized["sts-endpoint"])
        sealed = normalize_s3_credential(credential)
    elif kind == "file":
        if credential is not None:
            raise BadRequestError("A file storage profile takes no storage-credential")
        unknown = sorted(set(profile) - {"type", "base-location"})
        if unknown:
            raise BadRequestError(f"storage-profile has unsupported field(s): {', '.join(unknown)}")
        base = Location.parse(profile.get("base-location"), "storage-profile.base-location")
        if base.scheme != "file" or not base.segments:
            raise BadRequestError(
                "storage-profile.base-location must be a file:///<absolute directory> URI"
            )
        policy.check_file_root(base)
        normalized, sealed = {"type": "file", "base-location": str(base)}, None
    else:
        raise BadRequestError(f"Unsupported storage-profile type {kind!r}; supported: file, s3")
    if "%" in normalized["base-location"]:
        # A root is compared with other roots as written; a percent-escape would let one
        # directory be spelled two ways (readers that decode see the same files).
        raise BadRequestError("A warehouse's storage location must not contain '%'")
    if check_access:
        check_storage_access(normalized, sealed)
    return normalized, sealed


def check_storage_access(profile: dict[str, Any], credential: dict[str, Any] | None) -> None:
    """Prove the storage works before a warehouse depends on it: a file root must be a
    writable directory (it is created); an S3 root must take a probe object, and an STS
    role must be assumable when vending is on."""
    if profile["type"] == "file":
        check_writable_directory(Location.parse(profile["base-location"]))
        return
    assert credential is not None
    access = s3_access(profile, credential)
    probe_s3_access(profile, access)
    if profile["sts-enabled"]:
        probe_sts(profile, access, credential.get("external-id"))

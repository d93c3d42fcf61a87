"""Storage adapters: one FileIO per storage-profile type."""

from __future__ import annotations

import threading
from typing import Any
from uuid import UUID

from commands.storage.local import LocalFileIO, check_writable_directory
from commands.storage.s3 import S3Access, S3FileIO
from commands.storage.s3_profile import (
    normalize_s3_credential,
    normalize_s3_profile,
    probe_s3_access,
    s3_access,
)
from commands.storage.vending import CredentialVendor
from domain.errors import BadRequestError, CatalogError, ServiceUnavailableError
from domain.locations import normalize_location
from domain.ports import FileIO, SecretVault

_LOCAL = LocalFileIO()
# boto3 clients are thread-safe and slow to build (tens of ms): one per credential.
_S3_IOS: dict[tuple[Any, ...], S3FileIO] = {}
_S3_LOCK = threading.Lock()


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


def file_io_for(storage_profile: dict[str, Any], vault: SecretVault | None = None) -> FileIO:
    """The FileIO that serves a warehouse's storage profile."""
    kind = storage_profile.get("type")
    if kind == "file":
        return _LOCAL
    if kind == "s3":
        key = (
            storage_profile.get("credential-id"),
            storage_profile.get("region"),
            storage_profile.get("endpoint"),
            storage_profile.get("path-style-access"),
        )
        with _S3_LOCK:
            found = _S3_IOS.get(key)
        if found is None:
            found = S3FileIO(access_for(storage_profile, vault))
            with _S3_LOCK:
                _S3_IOS[key] = found
        return found
    raise BadRequestError(f"Unsupported storage profile type: {kind!r}")


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


def validate_storage_profile(
    profile: object, credential: object = None, *, check_access: bool = True
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Normalise a storage profile (and its credential) from the management API and
    check the storage works. Returns the profile to store and the credential to seal."""
    if not isinstance(profile, dict):
        raise BadRequestError("storage-profile must be an object")
    kind = profile.get("type")
    if kind == "s3":
        normalized = normalize_s3_profile(profile)
        sealed = normalize_s3_credential(credential)
        if check_access:
            access = s3_access(normalized, sealed)
            probe_s3_access(normalized, access)
            if normalized["sts-enabled"]:
                probe_sts(normalized, access, sealed.get("external-id"))
        return normalized, sealed
    if kind != "file":
        raise BadRequestError(f"Unsupported storage-profile type {kind!r}; supported: file, s3")
    if credential is not None:
        raise BadRequestError("A file storage profile takes no storage-credential")
    base = profile.get("base-location")
    if not isinstance(base, str) or not base.startswith(("file:", "/")):
        raise BadRequestError(
            "storage-profile.base-location must be a file:///<absolute directory> URI"
        )
    normalized = {"type": "file", "base-location": normalize_location(base)}
    if check_access:
        check_writable_directory(normalized["base-location"])
    return normalized, None

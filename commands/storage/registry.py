"""The storage kinds by name: one folder each under `commands/storage/`, registered here with
one line. Nothing outside the storage package asks which kind a warehouse has: it calls
these functions, or asks the kind `kind_for` finds (`kind.py` says what a kind answers).

What every kind's profile shares is handled here, once: the `type` that finds the kind, the
`storage-layout` (`domain/storage_layout.py`) and the refusal of '%' in a base location.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

import orjson

from icelog.commands.storage.adls import KIND as ADLS
from icelog.commands.storage.build_once import BuildOnceCache
from icelog.commands.storage.file import KIND as FILE
from icelog.commands.storage.gcs import KIND as GCS
from icelog.commands.storage.kind import SHARED_PROFILE_FIELDS, StorageKind, StorageLimits
from icelog.commands.storage.policy import StoragePolicy
from icelog.commands.storage.s3 import KIND as S3
from icelog.domain.errors import BadRequestError, ServiceUnavailableError
from icelog.domain.locations import Location
from icelog.domain.ports import FileIO, SecretVault
from icelog.domain.storage_layout import FIELD as LAYOUT_FIELD
from icelog.domain.storage_layout import StorageLayout

# The registered kinds, in the order the console offers them. A kind registers with one
# line here, its folder's KIND (imported above as the others are).
KINDS: tuple[StorageKind, ...] = (
    FILE,
    S3,
    ADLS,
    GCS,
)
_BY_NAME: dict[str, StorageKind] = {kind.name: kind for kind in KINDS}

DEFAULT_LIMITS = StorageLimits()
NO_POLICY = StoragePolicy()  # nothing restricted
# FileIOs by (kind, profile, limits): building one may cost a client (tens of ms for boto3)
# or resolving a root; a profile that changes in any way gets a new one.
_IOS: BuildOnceCache[tuple[Any, ...], FileIO] = BuildOnceCache(max_entries=1024)


def kind_named(name: object) -> StorageKind:
    """The kind of that name; 400 for any other."""
    found = _BY_NAME.get(name) if isinstance(name, str) else None
    if found is None:
        shown = repr(name)[:80]
        raise BadRequestError(
            f"Unsupported storage profile type {shown}; supported: {', '.join(_BY_NAME)}"
        )
    return found


def kind_for(profile: Mapping[str, Any]) -> StorageKind:
    """The kind of a storage profile (its `type`); 400 for a type no kind has."""
    return kind_named(profile.get("type"))


def credential_for(profile: Mapping[str, Any], vault: SecretVault | None) -> dict[str, Any]:
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


def credential_of(profile: Mapping[str, Any], vault: SecretVault | None) -> dict[str, Any] | None:
    """The credential a kind is handed: None for a profile without one (a kind that needs
    one says so), else `credential_for`'s."""
    if profile.get("credential-id") is None:
        return None
    return credential_for(profile, vault)


def file_io_for(
    storage_profile: dict[str, Any],
    vault: SecretVault | None = None,
    limits: StorageLimits = DEFAULT_LIMITS,
) -> FileIO:
    """The FileIO that serves a warehouse's storage profile, confined to its base location."""
    kind = kind_for(storage_profile)
    key = (kind.name, orjson.dumps(storage_profile, option=orjson.OPT_SORT_KEYS), limits)
    return _IOS.get(
        key, lambda: kind.file_io(storage_profile, credential_of(storage_profile, vault), limits)
    )


def validate_storage_profile(
    profile: object,
    credential: object = None,
    *,
    check_access: bool = True,
    policy: StoragePolicy = NO_POLICY,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Normalise a storage profile (and its credential) from the management API and, with
    `check_access`, check the storage works. Returns the profile to store and the
    credential to seal."""
    if not isinstance(profile, dict):
        raise BadRequestError("storage-profile must be an object")
    kind = kind_for(profile)
    own = {key: value for key, value in profile.items() if key not in SHARED_PROFILE_FIELDS}
    normalized, sealed = kind.normalize(own, credential, policy)
    layout = profile.get(LAYOUT_FIELD)
    if layout is not None:
        normalized[LAYOUT_FIELD] = StorageLayout.parse(layout).as_json()
    if "%" in normalized["base-location"]:
        # A root is compared with other roots as written; a percent-escape would let one
        # directory be spelled two ways (readers that decode see the same files).
        raise BadRequestError("A warehouse's storage location must not contain '%'")
    if check_access:
        check_storage_access(normalized, sealed)
    return normalized, sealed


def check_storage_access(profile: dict[str, Any], credential: dict[str, Any] | None) -> None:
    """Prove the storage works before a warehouse depends on it (the kind's access check)."""
    kind_for(profile).check_access(profile, credential)


def storage_root(profile: Mapping[str, Any]) -> Location:
    """Where a warehouse's storage really is, for telling whether two warehouses overlap."""
    return kind_for(profile).storage_root(dict(profile))


def clients_need_access(profile: dict[str, Any]) -> bool:
    """Whether a table's answer says anything about its storage: False when clients reach
    the files directly (the kind has no client config, vends nothing and signs nothing),
    so that the answer needs neither a thread nor the table's location."""
    kind = kind_for(profile)
    return bool(kind.client_config(profile)) or kind.vends(profile) or kind.signs(profile)

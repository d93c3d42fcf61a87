"""What a storage kind is: the one protocol every folder under `commands/storage/` (file,
s3, adls, gcs) implements, so that nothing outside the storage package asks which kind a
warehouse has. The registry (`commands/storage/registry.py`) finds a kind by the profile's
`type`.

A profile is what the event log stores about a warehouse's storage: never a secret. Its
credential is sealed in the secret vault and handed back here decrypted, as `credential`
(None for kinds without one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from icelog.domain.locations import Location
from icelog.domain.ports import FileIO


@dataclass(frozen=True)
class StorageLimits:
    """What one read may cost: bytes (ICELOG_MAX_METADATA_FILE_MB) and seconds."""

    max_read_bytes: int = 64 << 20
    read_timeout_s: float = 30.0


@dataclass(frozen=True, repr=False)
class VendedCredentials:
    """Temporary credentials for one table location, as Iceberg clients read them: the
    `config` keys of the REST spec's `StorageCredential` (S3's `s3.access-key-id`, ADLS's
    `adls.sas-token.<account>.<host>`, GCS's `gcs.oauth2.token`, ...)."""

    prefix: str
    config: dict[str, str]
    expires_at_ms: int

    def __repr__(self) -> str:  # never print a key, secret or token
        return f"VendedCredentials(prefix={self.prefix!r}, expires_at_ms={self.expires_at_ms})"


class StorageKind(Protocol):
    """One kind of storage a warehouse can live on."""

    # The profile's `type` (and the credential's, where the management API names one).
    name: ClassVar[str]

    def normalize(
        self, profile: dict[str, Any], credential: object, policy: Any
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Check a profile (and its credential) from the management API: the profile to
        store, with every field present and its `base-location`, and the credential to
        seal. 400 on anything it cannot use; never echo a secret in the message."""

    def keeps_credential(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        """Whether a profile update that brings no credential may keep the sealed one."""

    def check_access(self, profile: dict[str, Any], credential: dict[str, Any] | None) -> None:
        """The warehouse access check: prove the storage works before a warehouse depends
        on it (a probe written, read, listed and deleted under the base location; vending
        tried once when the profile enables it). 400 `Storage validation failed: ...`."""

    def storage_root(self, profile: dict[str, Any]) -> Location:
        """Where the warehouse's storage really is, for telling whether two overlap."""

    def file_io(
        self, profile: dict[str, Any], credential: dict[str, Any] | None, limits: StorageLimits
    ) -> FileIO:
        """The catalog's own I/O, confined to the profile's base location."""

    def client_config(self, profile: dict[str, Any]) -> dict[str, str]:
        """What every client with any right on a table needs to reach the storage
        (endpoints, region), credentials aside."""

    def vends(self, profile: dict[str, Any]) -> bool:
        """Whether the profile turns credential vending on."""

    def vend(
        self,
        profile: dict[str, Any],
        credential: dict[str, Any] | None,
        location: str,
        *,
        write: bool,
    ) -> VendedCredentials:
        """Credentials for one table location inside the warehouse: read-only, or
        read-write when `write`. Refuses (400) a location outside the base location."""

"""The ADLS Gen2 storage kind: profiles of `type: adls`, credentials of `type: az`."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from icelog.commands.storage.adls import probe
from icelog.commands.storage.adls.clients import credential_digest, service_client
from icelog.commands.storage.adls.fileio import AdlsFileIO
from icelog.commands.storage.adls.form import FORM
from icelog.commands.storage.adls.models import AdlsProfile, AzStorageCredential
from icelog.commands.storage.adls.profile import (
    TYPE,
    normalize_credential,
    normalize_profile,
    same_storage_and_trust,
)
from icelog.commands.storage.adls.vending import SasVendor, client_config, table_directory
from icelog.commands.storage.build_once import BuildOnceCache
from icelog.commands.storage.kind import (
    ConsoleForm,
    NoRemoteSigning,
    StorageLimits,
    VendedCredentials,
    required_credential,
)
from icelog.commands.storage.policy import StoragePolicy
from icelog.domain.locations import Location
from icelog.domain.ports import FileIO


class AdlsKind(NoRemoteSigning):
    """Warehouses on Azure Data Lake Storage Gen2 (or any Blob API endpoint serving it)."""

    name: ClassVar[str] = TYPE
    profile_model: ClassVar[type[BaseModel]] = AdlsProfile
    credential_model: ClassVar[type[BaseModel] | None] = AzStorageCredential
    form: ClassVar[ConsoleForm] = FORM
    refresh_endpoint_keys: ClassVar[tuple[str, ...]] = (
        "client.refresh-credentials-endpoint",
        "adls.refresh-credentials-endpoint",
    )

    def __init__(self) -> None:
        self._vendor = SasVendor()
        self._ios: BuildOnceCache[tuple[Any, ...], AdlsFileIO] = BuildOnceCache(max_entries=1024)

    def normalize(
        self, profile: dict[str, Any], credential: object, policy: StoragePolicy
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        normalized = normalize_profile(profile)
        # The catalog connects to both URLs: where a warehouse may send it is the operator's
        # call (ICELOG_S3_ENDPOINT_HOSTS); Azure's own defaults are always allowed.
        for key in ("endpoint", "authority-host"):
            if profile.get(key):
                policy.check_endpoint(f"storage-profile.{key}", normalized[key])
        return normalized, normalize_credential(credential)

    def keeps_credential(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        return same_storage_and_trust(old, new)

    def check_access(self, profile: dict[str, Any], credential: dict[str, Any] | None) -> None:
        probe.check_access(profile, required_credential(credential))

    def storage_root(self, profile: dict[str, Any]) -> Location:
        return Location.parse(profile.get("base-location"), "storage-profile.base-location")

    def file_io(
        self, profile: dict[str, Any], credential: dict[str, Any] | None, limits: StorageLimits
    ) -> FileIO:
        credential = required_credential(credential)
        key = (
            profile["base-location"],
            profile.get("endpoint"),
            profile.get("authority-host"),
            credential_digest(credential),
            limits,
        )
        return self._ios.get(
            key,
            lambda: AdlsFileIO(
                service_client(profile, credential),
                Location.parse(profile["base-location"], "storage-profile.base-location"),
                max_read_bytes=limits.max_read_bytes,
                read_timeout_s=limits.read_timeout_s,
            ),
        )

    def client_config(self, profile: dict[str, Any]) -> dict[str, str]:
        return client_config(profile)

    def check_location(self, profile: dict[str, Any], location: str) -> None:
        if not self.vends(profile):
            return
        # The vendor's own rule, so that a location taken here is one it can sign for;
        # its 400 already says why a location cannot be scoped.
        table_directory(profile, location)

    def vends(self, profile: dict[str, Any]) -> bool:
        return bool(profile.get("sas-enabled"))

    def vend(
        self,
        profile: dict[str, Any],
        credential: dict[str, Any] | None,
        location: str,
        *,
        write: bool,
    ) -> VendedCredentials:
        return self._vendor.vend(profile, credential, location, write=write)

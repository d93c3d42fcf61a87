"""The `gcs` storage kind: Google Cloud Storage warehouses (`gs://bucket/prefix`), as the
storage registry sees them (`icelog.commands.storage.kind.StorageKind`)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from icelog.commands.storage.deadline import within_deadline
from icelog.commands.storage.gcs.auth import shared_client, tokens_for
from icelog.commands.storage.gcs.boundary import table_boundary
from icelog.commands.storage.gcs.failures import NOT_GCS
from icelog.commands.storage.gcs.fileio import GcsFileIO
from icelog.commands.storage.gcs.form import FORM
from icelog.commands.storage.gcs.models import GcsCredential, GcsProfile
from icelog.commands.storage.gcs.probe import probe
from icelog.commands.storage.gcs.profile import (
    DEFAULT_ENDPOINT,
    DEFAULT_STS_ENDPOINT,
    DEFAULT_TOKEN_URI,
    normalize_gcs_credential,
    normalize_gcs_profile,
)
from icelog.commands.storage.gcs.vending import GcsVendor
from icelog.commands.storage.kind import (
    ConsoleForm,
    NoRemoteSigning,
    StorageLimits,
    VendedCredentials,
    table_location_inside,
    unscopable,
)
from icelog.commands.storage.policy import StoragePolicy
from icelog.domain.errors import BadRequestError, ServiceUnavailableError
from icelog.domain.locations import Location
from icelog.domain.ports import FileIO

# What a profile update may change and still keep the sealed key: anything but where the
# key's tokens are sent (the store and the token exchange) and where tables live.
CREDENTIAL_BOUND = ("bucket", "endpoint", "sts-endpoint")


def _check_endpoint(policy: StoragePolicy, what: str, url: str, default: str) -> None:
    """A non-Google URL the catalog would send a token or a signed assertion to must be on
    the operator's endpoint host list (`StoragePolicy.check_endpoint`), when there is one."""
    if url == default:
        return
    try:
        policy.check_endpoint(what, url)
    except BadRequestError:
        raise BadRequestError(
            f"{what} names a host this server may not reach (the operator's endpoint host list)"
        ) from None


class GcsStorageKind(NoRemoteSigning):
    """Google Cloud Storage, with a service-account key and downscoped-token vending."""

    name: ClassVar[str] = "gcs"
    profile_model: ClassVar[type[BaseModel]] = GcsProfile
    credential_model: ClassVar[type[BaseModel] | None] = GcsCredential
    form: ClassVar[ConsoleForm] = FORM
    refresh_endpoint_keys: ClassVar[tuple[str, ...]] = (
        "client.refresh-credentials-endpoint",
        "gcs.oauth2.refresh-credentials-endpoint",
    )

    def __init__(self) -> None:
        self._vendor = GcsVendor()

    def __repr__(self) -> str:
        return "GcsStorageKind()"

    def normalize(
        self, profile: dict[str, Any], credential: object, policy: StoragePolicy
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        if not isinstance(profile, dict):
            raise BadRequestError("storage-profile must be an object")
        normalized = normalize_gcs_profile(profile)
        sealed = normalize_gcs_credential(credential)
        _check_endpoint(
            policy, "storage-profile.endpoint", normalized["endpoint"], DEFAULT_ENDPOINT
        )
        _check_endpoint(
            policy, "storage-profile.sts-endpoint", normalized["sts-endpoint"], DEFAULT_STS_ENDPOINT
        )
        _check_endpoint(
            policy,
            "storage-credential.key.token_uri",
            sealed["key"]["token_uri"],
            DEFAULT_TOKEN_URI,
        )
        return normalized, sealed

    def keeps_credential(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        """The key's tokens go to the store and the STS endpoint: only while both stay
        (and the bucket, whose objects the key was given for)."""
        return all(old.get(field) == new.get(field) for field in CREDENTIAL_BOUND)

    def check_access(self, profile: dict[str, Any], credential: dict[str, Any] | None) -> None:
        sealed = self._credential(credential)
        io = self._file_io(profile, sealed, StorageLimits(read_timeout_s=10.0))
        tokens = tokens_for(sealed)

        def check() -> None:
            # A vendor of its own: the check must reach STS, never a cached answer.
            probe(profile, sealed, io, tokens.get, GcsVendor(), self.client_config(profile))

        within_deadline(check, no_answer=NOT_GCS, thread_name="icelog-gcs-probe")

    def storage_root(self, profile: dict[str, Any]) -> Location:
        return Location.parse(profile.get("base-location"), "storage-profile.base-location")

    def file_io(
        self, profile: dict[str, Any], credential: dict[str, Any] | None, limits: StorageLimits
    ) -> FileIO:
        return self._file_io(profile, self._credential(credential), limits)

    def client_config(self, profile: dict[str, Any]) -> dict[str, str]:
        """PyIceberg (PyArrow) and Iceberg Java read a non-Google endpoint from
        `gcs.service.host` (a URL with its scheme); Google's own needs nothing."""
        endpoint = profile.get("endpoint") or DEFAULT_ENDPOINT
        return {} if endpoint == DEFAULT_ENDPOINT else {"gcs.service.host": str(endpoint)}

    def check_location(self, profile: dict[str, Any], location: str) -> None:
        if not self.vends(profile):
            return
        table = table_location_inside(profile, location)
        try:
            table_boundary(table.authority, table.key, write=True)
        except ValueError as exc:
            raise unscopable(location, str(exc)) from None

    def vends(self, profile: dict[str, Any]) -> bool:
        return bool(profile.get("sts-enabled"))

    def vend(
        self,
        profile: dict[str, Any],
        credential: dict[str, Any] | None,
        location: str,
        *,
        write: bool,
    ) -> VendedCredentials:
        return self._vendor.vend(
            profile,
            self._credential(credential),
            location,
            write=write,
            client_config=self.client_config(profile),
        )

    @staticmethod
    def _credential(credential: dict[str, Any] | None) -> dict[str, Any]:
        if credential is None or "key" not in credential:
            raise ServiceUnavailableError("The warehouse's storage has no credential configured")
        return credential

    @staticmethod
    def _file_io(
        profile: dict[str, Any], credential: dict[str, Any], limits: StorageLimits
    ) -> GcsFileIO:
        tokens = tokens_for(credential)
        return GcsFileIO(
            Location.parse(profile["base-location"], "storage-profile.base-location"),
            endpoint=str(profile.get("endpoint") or DEFAULT_ENDPOINT),
            token=lambda: tokens.get().value,
            http=shared_client(),
            max_read_bytes=limits.max_read_bytes,
            read_timeout_s=limits.read_timeout_s,
        )

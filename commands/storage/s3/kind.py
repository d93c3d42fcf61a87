"""The `s3` kind: a bucket (or a folder of it) on AWS or an S3-compatible store, reached
with the warehouse's access key; clients get STS credentials scoped to one table (vending)
or have their requests signed by the catalog (remote signing)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from icelog.commands.storage.build_once import BuildOnceCache
from icelog.commands.storage.kind import (
    ConsoleForm,
    RemoteSigner,
    StorageLimits,
    VendedCredentials,
    required_credential,
    unscopable,
)
from icelog.commands.storage.policy import StoragePolicy
from icelog.commands.storage.s3.form import FORM
from icelog.commands.storage.s3.models import S3StorageCredential, S3StorageProfile
from icelog.commands.storage.s3.objects import S3Access, S3FileIO, client_for, split_location
from icelog.commands.storage.s3.profile import (
    normalize_s3_credential,
    normalize_s3_profile,
    probe_s3_access,
    s3_access,
)
from icelog.commands.storage.s3.signing import S3Signer
from icelog.commands.storage.s3.vending import CredentialVendor, session_policy
from icelog.domain.errors import (
    BadRequestError,
    CatalogError,
    ForbiddenError,
)
from icelog.domain.locations import Location
from icelog.domain.ports import FileIO

# Changing any of these points the stored credential at another store: the request must
# carry the credential again (a caller could otherwise have the server sign with it
# towards a host of their choice).
CREDENTIAL_BOUND = ("endpoint", "bucket", "region", "sts-endpoint")


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


class S3Kind:
    name: ClassVar[str] = "s3"
    profile_model: ClassVar[type[BaseModel]] = S3StorageProfile
    credential_model: ClassVar[type[BaseModel] | None] = S3StorageCredential
    form: ClassVar[ConsoleForm] = FORM
    refresh_endpoint_keys: ClassVar[tuple[str, ...]] = ("client.refresh-credentials-endpoint",)

    def __init__(self) -> None:
        # Vended credentials, reused during the first half of their lifetime.
        self.vendor = CredentialVendor()
        # boto3 clients are thread-safe and slow to build (tens of ms): one per credential
        # and endpoint, shared by the warehouses that use the same.
        self._clients: BuildOnceCache[tuple[Any, ...], Any] = BuildOnceCache(max_entries=1024)

    def normalize(
        self, profile: dict[str, Any], credential: object, policy: StoragePolicy
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        normalized = normalize_s3_profile(profile)
        for key in ("endpoint", "sts-endpoint"):
            policy.check_endpoint(f"storage-profile.{key}", normalized[key])
        return normalized, normalize_s3_credential(credential)

    def keeps_credential(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        return all(new.get(key) == old.get(key) for key in CREDENTIAL_BOUND)

    def check_access(self, profile: dict[str, Any], credential: dict[str, Any] | None) -> None:
        """A probe object written, read, listed and deleted; the STS role assumed once when
        vending is on."""
        found = required_credential(credential)
        access = s3_access(profile, found)
        probe_s3_access(profile, access)
        if profile["sts-enabled"]:
            probe_sts(profile, access, found.get("external-id"))

    def storage_root(self, profile: dict[str, Any]) -> Location:
        """Bucket and key prefix, whatever the endpoint."""
        return Location.parse(profile.get("base-location"), "storage-profile.base-location")

    def file_io(
        self, profile: dict[str, Any], credential: dict[str, Any] | None, limits: StorageLimits
    ) -> FileIO:
        root = Location.parse(profile.get("base-location"), "storage base-location")
        connection = (
            profile.get("credential-id"),
            profile.get("region"),
            profile.get("endpoint"),
            profile.get("path-style-access"),
        )
        client = self._clients.get(
            connection, lambda: client_for(s3_access(profile, required_credential(credential)))
        )
        return S3FileIO(
            client,
            root,
            max_read_bytes=limits.max_read_bytes,
            read_timeout_s=limits.read_timeout_s,
        )

    def client_config(self, profile: dict[str, Any]) -> dict[str, str]:
        """Where the bucket is. DuckDB insists on a region and on the literal strings
        "true"/"false"."""
        config = {
            "client.region": str(profile["region"]),
            "s3.region": str(profile["region"]),
            "s3.path-style-access": "true" if profile.get("path-style-access") else "false",
        }
        if profile.get("endpoint"):
            config["s3.endpoint"] = str(profile["endpoint"])
        return config

    def check_location(self, profile: dict[str, Any], location: str) -> None:
        if not self.vends(profile):
            return
        bucket, key = split_location(location)
        try:
            session_policy(bucket, key, write=True)
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
        found = required_credential(credential)
        return self.vendor.vend(
            profile,
            s3_access(profile, found),
            location,
            write=write,
            external_id=found.get("external-id"),
        )

    def signs(self, profile: dict[str, Any]) -> bool:
        return bool(profile.get("remote-signing-enabled"))

    def signing_config(
        self, profile: dict[str, Any], *, signer_uri: str, signer_endpoint: str
    ) -> dict[str, str]:
        return {
            "s3.remote-signing-enabled": "true",  # Iceberg Java
            "s3.signer": "S3V4RestSigner",  # PyIceberg
            # PyIceberg signs only through its fsspec FileIO, not through PyArrow's.
            "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
            "s3.signer.uri": signer_uri,
            "s3.signer.endpoint": signer_endpoint,
        }

    def signer(self, profile: dict[str, Any], credential: dict[str, Any] | None) -> RemoteSigner:
        if not self.signs(profile):
            raise ForbiddenError("Remote signing is not enabled for this warehouse")
        return S3Signer(s3_access(profile, required_credential(credential)))

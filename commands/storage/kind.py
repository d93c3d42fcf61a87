"""What a storage kind is: the one protocol every folder under `commands/storage/` (file,
s3, adls, gcs) implements, so that nothing outside the storage package asks which kind a
warehouse has. The registry (`commands/storage/registry.py`) finds a kind by the profile's
`type`.

A profile is what the event log stores about a warehouse's storage: never a secret. Its
credential is sealed in the secret vault and handed back here decrypted, as `credential`
(None for kinds without one).

Besides the methods, a kind describes itself to the layers that must not know it: its
management-API models (`profile_model`, `credential_model`, from which the management
API builds its unions) and its console form (`form`, which the console renders as it is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel

from icelog.commands.storage.policy import StoragePolicy
from icelog.domain.errors import (
    BadRequestError,
    ForbiddenError,
    ServiceUnavailableError,
    UnsupportedOperationError,
)
from icelog.domain.locations import Location
from icelog.domain.ports import FileIO
from icelog.domain.storage_layout import FIELD as LAYOUT_FIELD

# Fields every kind's profile takes: the registry normalises them and hands a kind its
# profile without them (their models are in `shapes.ProfileBody`).
SHARED_PROFILE_FIELDS = frozenset({LAYOUT_FIELD})


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


def storage_credentials(v: VendedCredentials) -> list[dict[str, Any]]:
    """The REST spec's `storage-credentials` list (one StorageCredential)."""
    return [{"prefix": v.prefix, "config": dict(v.config)}]


def table_location_inside(profile: Mapping[str, Any], location: str) -> Location:
    """A location to vend credentials for, strictly inside the profile's base location; 400
    otherwise. Defence in depth: the catalog already keeps tables inside their warehouse,
    and a credential must never be stretched beyond what it is asked for."""
    parsed = Location.parse(location, "table location")
    base = Location.parse(profile["base-location"], "storage-profile.base-location")
    if not base.contains(parsed) or parsed == base:
        raise BadRequestError(f"Cannot vend credentials for {location}: outside the warehouse")
    return parsed


def required_credential(credential: dict[str, Any] | None) -> dict[str, Any]:
    """The credential handed to a kind that cannot work without one; 503 when there is
    none (not 400: the request is fine, the warehouse's configuration is not)."""
    if credential is None:
        raise ServiceUnavailableError("The warehouse's storage has no credential configured")
    return credential


# -- remote signing ---------------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class SignRequest:
    """A request a client is about to send to the storage, described for signing (the
    REST spec's `S3SignRequest`). Its headers may hold anything: never printed."""

    region: str
    method: str
    uri: str
    headers: Mapping[str, Sequence[str]]
    body: str | None = None

    def __repr__(self) -> str:
        return f"SignRequest(method={self.method!r})"


class RemoteSigner(Protocol):
    """Signs clients' requests with the warehouse's own credential (S3's remote signing),
    for requests that stay inside the locations they are allowed."""

    def addressed(self, request: SignRequest) -> str:
        """The location a request touches (its object, or the prefix a listing names), to
        find the table it belongs to. 400 / 403 for a request this signer never signs."""

    def sign(self, request: SignRequest, *, allowed: Sequence[str], write: bool) -> dict[str, Any]:
        """The signed request (the REST spec's `S3SignResponse`: `uri`, `headers`) when it
        stays inside one of `allowed` (and only reads unless `write`); 403 otherwise."""


class NoRemoteSigning:
    """For kinds whose clients never have requests signed (every kind but S3): base class
    of such a kind, so that it need not spell out the three signing members."""

    def signs(self, profile: dict[str, Any]) -> bool:
        return False

    def signing_config(
        self, profile: dict[str, Any], *, signer_uri: str, signer_endpoint: str
    ) -> dict[str, str]:
        return {}

    def signer(self, profile: dict[str, Any], credential: dict[str, Any] | None) -> RemoteSigner:
        raise ForbiddenError("Remote signing is not enabled for this warehouse")


class NoVending:
    """For kinds that never vend credentials: base class of such a kind."""

    refresh_endpoint_keys: ClassVar[tuple[str, ...]] = ()

    def check_location(self, profile: dict[str, Any], location: str) -> None:
        """Nothing to scope: any location inside the warehouse serves."""

    def vends(self, profile: dict[str, Any]) -> bool:
        return False

    def vend(
        self,
        profile: dict[str, Any],
        credential: dict[str, Any] | None,
        location: str,
        *,
        write: bool,
    ) -> VendedCredentials:
        raise UnsupportedOperationError(
            "Credential vending is not enabled for this warehouse's storage profile"
        )


# -- the console's form -----------------------------------------------------------------------
@dataclass(frozen=True)
class FormField:
    """One input of the console's new-warehouse form: `key` is the profile's (or, with
    `part="credential"`, the credential's) field and the input's name.

    `widget`: `text`; `checkbox` (sends `true` when ticked, else nothing); `select` among
    `choices` ((value, label) pairs; the value "" sends nothing); `json` (a text area whose
    JSON value is sent, e.g. a service-account key). A `secret` input is never shown again
    (text ones are password inputs). A `required` field is sent even when empty (the API
    then says what is missing); others only when given."""

    key: str
    label: str
    part: Literal["profile", "credential"] = "profile"
    widget: Literal["text", "checkbox", "select", "json"] = "text"
    placeholder: str = ""
    choices: tuple[tuple[str, str], ...] = ()
    secret: bool = False
    required: bool = False


@dataclass(frozen=True)
class ConsoleForm:
    """How the console offers a kind: a title, the inputs, and what a credential holds
    besides them (its `type`, a `credential-type`) when any credential input is filled."""

    title: str
    fields: tuple[FormField, ...]
    credential: Mapping[str, str] = field(default_factory=dict)
    note: str = ""


# -- the kind ---------------------------------------------------------------------------------
class StorageKind(Protocol):
    """One kind of storage a warehouse can live on."""

    # The profile's `type` (and the credential's, where the management API names one).
    name: ClassVar[str]
    # The management API's models of this kind's profile (a `ProfileBody` from
    # `commands/storage/shapes.py`, whose `type` is `Literal[name]`) and of its credential
    # (None: the kind takes none).
    profile_model: ClassVar[type[BaseModel]]
    credential_model: ClassVar[type[BaseModel] | None]
    # The console's new-warehouse form for this kind.
    form: ClassVar[ConsoleForm]
    # The config keys under which clients look for the catalog's credentials endpoint
    # (`GET .../credentials`) to refresh vended credentials: Iceberg Java reads one per
    # storage (`client.refresh-credentials-endpoint` for S3, `adls.refresh-credentials-endpoint`,
    # `gcs.oauth2.refresh-credentials-endpoint`). Empty for kinds that never vend.
    refresh_endpoint_keys: ClassVar[tuple[str, ...]]

    def normalize(
        self, profile: dict[str, Any], credential: object, policy: StoragePolicy
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Check a profile (and its credential) from the management API: the profile to
        store, with every field present and its `base-location`, and the credential to
        seal. 400 on anything it cannot use; never echo a secret in the message. The fields
        every kind takes (`storage-layout`) are the registry's: never seen here."""

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
        (endpoints, region), credentials aside. Empty when clients reach the files
        directly (and neither vending nor signing is on: then a table's answer carries
        nothing about storage)."""

    def check_location(self, profile: dict[str, Any], location: str) -> None:
        """Refuse (400) a table location inside the warehouse that the kind could not give
        clients access to — one a vended credential cannot be scoped to — before a table is
        created or moved there, not when a client first loads it."""

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

    def signs(self, profile: dict[str, Any]) -> bool:
        """Whether the profile offers remote signing (clients send their requests to the
        catalog to be signed). `NoRemoteSigning` for kinds that never do."""

    def signing_config(
        self, profile: dict[str, Any], *, signer_uri: str, signer_endpoint: str
    ) -> dict[str, str]:
        """The table config that makes clients sign through the catalog: the signer at
        `signer_uri` (the catalog's root URL) + `signer_endpoint` (the table's path)."""

    def signer(self, profile: dict[str, Any], credential: dict[str, Any] | None) -> RemoteSigner:
        """The warehouse's signer; 403 when the profile does not offer signing."""


def unscopable(location: str, why: str) -> BadRequestError:
    """The 400 for a table location a kind's vended credentials cannot be scoped to."""
    return BadRequestError(
        f"Location {location} cannot be given to clients with vended credentials: {why}"
    )

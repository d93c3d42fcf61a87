"""The management API's shapes for ADLS storage: Lakekeeper's `AdlsProfile` (plus icelog's
`endpoint`) and the `az` credentials `AzCredential` allows (the system identity aside).

They document and type-check the JSON; the rules with their own messages live in
`profile.py`, which the kind applies to every profile and credential whatever its source.
Secrets are write-only and kept out of every repr.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr, model_validator

from icelog.commands.storage.adls.profile import (
    ACCOUNT_NAME,
    DEFAULT_VALIDITY_S,
    FILESYSTEM_NAME,
    MAX_VALIDITY_S,
    MIN_VALIDITY_S,
)
from icelog.commands.storage.shapes import ProfileBody, StorageBody, optional

_HTTP_URL = "^https?://[^/?#@]+(/[^?#]*)?$"
_HTTPS_URL = "^https://[^/?#@]+(/[^?#]*)?$"


class AdlsProfile(ProfileBody):
    """An ADLS Gen2 filesystem (or a folder of it), Lakekeeper's shape. Stored (and returned)
    with every field present, defaults filled in. At creation and update the server writes,
    reads, lists and deletes a probe blob with the credential, and, when `sas-enabled`,
    vends a SAS token once and uses it; a failing step is a 400."""

    type: Literal["adls"]
    account_name: StrictStr = Field(
        description="The storage account: 3-24 lowercase letters and digits",
        json_schema_extra={"pattern": ACCOUNT_NAME.pattern},
    )
    filesystem: StrictStr = Field(
        description="The filesystem (Blob container): 3-63 lowercase letters, digits and "
        "single '-'",
        json_schema_extra={"pattern": FILESYSTEM_NAME.pattern},
    )
    key_prefix: StrictStr | None = optional(
        "Folder of the warehouse in the filesystem; outer '/' are dropped and no part may be "
        "empty, '.' or '..'. Default: the whole filesystem (stored as \"\")."
    )
    host: StrictStr | None = optional(
        "The account's DFS host suffix, as in table locations "
        "`abfss://<filesystem>@<account>.<host>/...`. Default dfs.core.windows.net"
    )
    endpoint: StrictStr | None = optional(
        "icelog: the Blob API URL the catalog and its clients call. Default "
        "`https://<account>.blob.<host without its 'dfs.'>`; an emulator such as Azurite: "
        "`http://127.0.0.1:10000/<account>`",
        pattern=_HTTP_URL,
    )
    authority_host: StrictStr | None = optional(
        "Entra ID authority for a service principal's tokens (an https URL). Default "
        "https://login.microsoftonline.com",
        pattern=_HTTPS_URL,
    )
    sas_enabled: StrictBool | None = optional(
        "Vend table-scoped SAS tokens to clients (default true); needs an account with a "
        "hierarchical namespace"
    )
    sas_scope: Literal["directory", "filesystem"] | None = optional(
        "icelog: what a vended SAS opens. `directory` (default): the table's folder (needs "
        "an account with a hierarchical namespace). `filesystem`: the whole filesystem, "
        "for emulators such as Azurite, which sign no directory SAS; only without a "
        "key-prefix, and every token then reaches every table of the warehouse"
    )
    sas_token_validity_seconds: StrictInt | None = optional(
        f"Default {DEFAULT_VALIDITY_S}", minimum=MIN_VALIDITY_S, maximum=MAX_VALIDITY_S
    )
    allow_alternative_protocols: StrictBool | None = optional(
        "Accept wasbs:// table locations (default false)"
    )
    base_location: StrictStr | None = optional(
        "`abfss://<filesystem>@<account>.<host>[/<key-prefix>]`, set by the server (ignored "
        "in requests)",
        readOnly=True,
    )
    credential_id: StrictStr | None = optional(
        "The sealed credential's id, set by the server (ignored in requests); the credential "
        "itself is never returned",
        readOnly=True,
    )


class AzSharedAccessKeyCredential(StorageBody):
    """The storage account's access key: the catalog signs requests and service SAS tokens
    with it (it never leaves the catalog)."""

    type: Literal["az"]
    credential_type: Literal["shared-access-key"]
    key: StrictStr = Field(json_schema_extra={"minLength": 1}, repr=False)


class AzClientCredentials(StorageBody):
    """A service principal (Entra ID application): tokens from `authority-host`, user
    delegation SAS tokens for clients."""

    type: Literal["az"]
    credential_type: Literal["client-credentials"]
    client_id: StrictStr
    tenant_id: StrictStr
    client_secret: StrictStr = Field(json_schema_extra={"minLength": 1}, repr=False)


AzCredential = Annotated[
    AzSharedAccessKeyCredential | AzClientCredentials, Field(discriminator="credential_type")
]


class AzStorageCredential(StorageBody):
    """An `az` credential as the management API's credential union takes it (one model per
    `type`): Lakekeeper's `AzCredential` variants, told apart by `credential-type` —
    `shared-access-key` (`key`) or `client-credentials` (`client-id`, `tenant-id`,
    `client-secret`)."""

    type: Literal["az"]
    credential_type: Literal["shared-access-key", "client-credentials"]
    key: StrictStr | None = Field(default=None, repr=False)
    client_id: StrictStr | None = None
    tenant_id: StrictStr | None = None
    client_secret: StrictStr | None = Field(default=None, repr=False)

    @model_validator(mode="after")
    def _fields_of_its_type(self) -> AzStorageCredential:
        shared = ("key",)
        principal = ("client_id", "tenant_id", "client_secret")
        needed, foreign = (
            (shared, principal)
            if self.credential_type == "shared-access-key"
            else (principal, shared)
        )
        missing = [name for name in needed if getattr(self, name) is None]
        stray = [name for name in foreign if getattr(self, name) is not None]
        if missing or stray:
            named = ", ".join(name.replace("_", "-") for name in missing or stray)
            what = "needs" if missing else "takes no"
            raise ValueError(f"credential-type {self.credential_type} {what} {named}")
        return self

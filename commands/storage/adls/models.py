"""The management API's shapes for ADLS storage: Lakekeeper's `AdlsProfile` (plus icelog's
`endpoint`) and the `az` credentials `AzCredential` allows (the system identity aside).

They document and type-check the JSON; the rules with their own messages live in
`profile.py`, which the kind applies to every profile and credential whatever its source.
Secrets are write-only and kept out of every repr.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from icelog.commands.storage.adls.profile import (
    ACCOUNT_NAME,
    DEFAULT_VALIDITY_S,
    FILESYSTEM_NAME,
    MAX_VALIDITY_S,
    MIN_VALIDITY_S,
)

_HTTP_URL = "^https?://[^/?#@]+(/[^?#]*)?$"
_HTTPS_URL = "^https://[^/?#@]+(/[^?#]*)?$"


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class _Body(BaseModel):
    """Kebab-case names, unknown fields refused (a setting must never silently do nothing)."""

    model_config = ConfigDict(
        alias_generator=_kebab, populate_by_name=True, extra="forbid", frozen=True
    )


def _optional(description: str, **schema: Any) -> Any:
    return Field(default=None, description=description, json_schema_extra=schema or None)


class AdlsProfile(_Body):
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
    key_prefix: StrictStr | None = _optional(
        "Folder of the warehouse in the filesystem; outer '/' are dropped and no part may be "
        "empty, '.' or '..'. Default: the whole filesystem (stored as \"\")."
    )
    host: StrictStr | None = _optional(
        "The account's DFS host suffix, as in table locations "
        "`abfss://<filesystem>@<account>.<host>/...`. Default dfs.core.windows.net"
    )
    endpoint: StrictStr | None = _optional(
        "icelog: the Blob API URL the catalog and its clients call. Default "
        "`https://<account>.blob.<host without its 'dfs.'>`; an emulator such as Azurite: "
        "`http://127.0.0.1:10000/<account>`",
        pattern=_HTTP_URL,
    )
    authority_host: StrictStr | None = _optional(
        "Entra ID authority for a service principal's tokens (an https URL). Default "
        "https://login.microsoftonline.com",
        pattern=_HTTPS_URL,
    )
    sas_enabled: StrictBool | None = _optional(
        "Vend table-scoped SAS tokens to clients (default true); needs an account with a "
        "hierarchical namespace"
    )
    sas_token_validity_seconds: StrictInt | None = _optional(
        f"Default {DEFAULT_VALIDITY_S}", minimum=MIN_VALIDITY_S, maximum=MAX_VALIDITY_S
    )
    allow_alternative_protocols: StrictBool | None = _optional(
        "Accept wasbs:// table locations (default false)"
    )
    storage_layout: dict[str, Any] | None = _optional(
        "How namespace and table folders are named below the base location"
    )
    base_location: StrictStr | None = _optional(
        "`abfss://<filesystem>@<account>.<host>[/<key-prefix>]`, set by the server (ignored "
        "in requests)",
        readOnly=True,
    )
    credential_id: StrictStr | None = _optional(
        "The sealed credential's id, set by the server (ignored in requests); the credential "
        "itself is never returned",
        readOnly=True,
    )


class AzSharedAccessKeyCredential(_Body):
    """The storage account's access key: the catalog signs requests and service SAS tokens
    with it (it never leaves the catalog)."""

    type: Literal["az"]
    credential_type: Literal["shared-access-key"]
    key: StrictStr = Field(json_schema_extra={"minLength": 1}, repr=False)


class AzClientCredentials(_Body):
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

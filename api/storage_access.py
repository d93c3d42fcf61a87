"""Data access for clients of a table: vended credentials or remote signing, as the
warehouse's storage kind offers them (`commands/storage`, `StorageKind`).

A client names what it wants in `X-Iceberg-Access-Delegation` (`vended-credentials`,
`remote-signing`, or both, comma-separated). Java sends nothing by default, so an absent
header means "whatever the warehouse offers": credentials when the kind vends, else remote
signing when it signs — as Lakekeeper does. Kinds whose clients reach the files directly
(file) offer neither and give an empty config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote
from uuid import UUID

from icelog.commands.application import CatalogApplication
from icelog.commands.storage import credential_of, kind_for, storage_credentials
from icelog.domain.identifiers import TabularName
from icelog.domain.permissions import DataRights

VENDED = "vended-credentials"
SIGNING = "remote-signing"


def delegation_modes(header: str | None) -> set[str]:
    if header is None:
        return {VENDED, SIGNING}
    return {part.strip().lower() for part in header.split(",") if part.strip()}


def table_path(prefix: str, name: TabularName) -> str:
    """`v1/{prefix}/namespaces/{ns}/tables/{table}`, relative to the catalog's `/catalog`
    root, with the namespace levels joined by the unit separator as the REST spec says."""
    ns = quote("\x1f".join(name.namespace.levels), safe="")
    return f"v1/{prefix}/namespaces/{ns}/tables/{quote(name.name, safe='')}"


@dataclass
class TableAccess:
    config: dict[str, str] = field(default_factory=dict)
    storage_credentials: list[dict[str, Any]] = field(default_factory=list)
    # The 1.11+ spec's description of the signer (`RemoteSigningConfig`): present when the
    # client is to sign through the catalog. icelog's signer needs nothing echoed back (the
    # signing path names the table), so both maps are empty; its presence is the signal.
    remote_signing_config: dict[str, Any] | None = None

    @property
    def vended(self) -> bool:
        return bool(self.storage_credentials)

    def response_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"config": self.config}
        if self.storage_credentials:
            fields["storage-credentials"] = self.storage_credentials
        if self.remote_signing_config is not None:
            fields["remote-signing-config"] = self.remote_signing_config
        return fields


class StorageAccess:
    """Builds the `config` / `storage-credentials` of table responses."""

    def __init__(self, app: CatalogApplication) -> None:
        self._app = app

    def profile(self, warehouse_id: UUID) -> dict[str, Any]:
        return self._app.storage_profile(warehouse_id)

    def vends(self, profile: dict[str, Any]) -> bool:
        """Whether the warehouse's storage vends credentials."""
        return kind_for(profile).vends(profile)

    def vend(
        self, profile: dict[str, Any], location: str, *, write: bool = True
    ) -> list[dict[str, Any]]:
        """`write`: read-write credentials (the caller may modify the table), else read-only."""
        credential = credential_of(profile, self._app.secrets)
        vended = kind_for(profile).vend(profile, credential, location, write=write)
        return storage_credentials(vended)

    def for_table(
        self,
        *,
        warehouse_id: UUID,
        name: TabularName,
        location: str,
        delegation: str | None,
        catalog_root: str,
        rights: DataRights,
    ) -> TableAccess:
        """`catalog_root` is the URL clients reach `/catalog` at (signer requests go there).
        `rights`: the caller's data rights on the table (api/auth/guards.py `data_rights`):
        without any, neither credentials nor a signer — only where the storage is; read-only
        credentials without `write`."""
        profile = self.profile(warehouse_id)
        kind = kind_for(profile)
        access = TableAccess(kind.client_config(profile))
        if not rights.any:
            return access
        modes = delegation_modes(delegation)
        path = table_path(str(warehouse_id), name)
        if VENDED in modes and kind.vends(profile):
            access.storage_credentials = self.vend(profile, location, write=rights.write)
            access.config |= access.storage_credentials[0]["config"]
            # Java refreshes expiring credentials through this endpoint.
            for key in kind.refresh_endpoint_keys:
                access.config[key] = f"{path}/credentials"
        elif modes & {VENDED, SIGNING} and kind.signs(profile):
            access.config |= kind.signing_config(
                profile, signer_uri=catalog_root.rstrip("/"), signer_endpoint=f"{path}/sign"
            )
            access.remote_signing_config = {"properties": {}, "headers": {}}
        return access

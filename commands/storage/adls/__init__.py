"""ADLS Gen2 storage (`abfss://<filesystem>@<account>.<host>/...` warehouses) over the Blob
API: what the storage registry wires in.

- `KIND`: the StorageKind (profiles `type: adls`, credentials `type: az`);
- `AdlsProfile`, `AzSharedAccessKeyCredential`, `AzClientCredentials`, `AzCredential`: the
  management API's pydantic shapes;
- `FORM` (and `PROFILE_FORM`, `CREDENTIAL_FORMS`): the console's fields.
"""

from __future__ import annotations

from icelog.commands.storage.adls.form import CREDENTIAL_FORMS, FORM, PROFILE_FORM
from icelog.commands.storage.adls.kind import KIND, AdlsKind
from icelog.commands.storage.adls.models import (
    AdlsProfile,
    AzClientCredentials,
    AzCredential,
    AzSharedAccessKeyCredential,
)

__all__ = [
    "CREDENTIAL_FORMS",
    "FORM",
    "KIND",
    "PROFILE_FORM",
    "AdlsKind",
    "AdlsProfile",
    "AzClientCredentials",
    "AzCredential",
    "AzSharedAccessKeyCredential",
]

"""Google Cloud Storage warehouses (`gs://bucket/prefix`): issue 34.

What the storage registry wires: `KIND` (the StorageKind), the management API's models
`GcsProfile` and `GcsCredential`, and the console's `FORM` (`PROFILE_FORM` +
`CREDENTIAL_FORM`). The modules: `profile` (checks and normalisation), `auth` (the
catalog's tokens from the service-account key), `fileio` (the catalog's own I/O),
`boundary` and `vending` (downscoped tokens for clients), `probe` (the access check).
"""

from __future__ import annotations

from icelog.commands.storage.gcs.form import CREDENTIAL_FORM, FORM, PROFILE_FORM
from icelog.commands.storage.gcs.kind import KIND, GcsStorageKind
from icelog.commands.storage.gcs.models import GcsCredential, GcsProfile, GcsServiceKey

__all__ = [
    "CREDENTIAL_FORM",
    "FORM",
    "KIND",
    "PROFILE_FORM",
    "GcsCredential",
    "GcsProfile",
    "GcsServiceKey",
    "GcsStorageKind",
]

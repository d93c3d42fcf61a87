"""Google Cloud Storage warehouses (`gs://bucket/prefix`): `KIND` (profiles and credentials
`type: gcs`), registered in `commands/storage/registry.py`. The modules: `profile` (checks
and normalisation), `auth` (the catalog's tokens from the service-account key), `fileio`
(the catalog's own I/O), `boundary` and `vending` (downscoped tokens for clients), `probe`
(the access check), `models` and `form` (the management API's shapes, the console's form)."""

from __future__ import annotations

from icelog.commands.storage.gcs.kind import GcsStorageKind

KIND = GcsStorageKind()

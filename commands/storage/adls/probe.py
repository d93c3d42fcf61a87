"""The warehouse access check for ADLS: prove the storage works before a warehouse depends
on it.

With the catalog's credential a probe blob is written (never over an existing one), read,
listed and deleted under the base location. When the profile vends SAS tokens, one is vended
for a probe folder and used once, to write and delete a blob in it: that proves what a client
will meet — a service principal allowed to get user delegation keys, and an account that
honours directory SAS (it must have a hierarchical namespace, which Azurite and plain Blob
storage accounts lack).

Errors are 400 `Storage validation failed: ...` naming the step and Azure's error code when
a storage service answered, else one fixed phrase (docs/security.md: a check must not map a
network). The whole check runs in a thread the request stops waiting for at a deadline.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from typing import Any

from azure.core.exceptions import AzureError
from azure.storage.blob import BlobClient

from icelog.commands.storage.adls.clients import (
    NOT_AZURE,
    failure_reason,
    retry_policy,
    service_client,
)
from icelog.commands.storage.adls.profile import endpoint_of
from icelog.commands.storage.adls.vending import sign_with_catalog_credential, table_directory
from icelog.commands.storage.deadline import within_deadline
from icelog.domain.errors import BadRequestError, CatalogError
from icelog.domain.locations import Location

_PAYLOAD = b"icelog storage probe"
HNS_HINT = (
    "directory SAS tokens need an account with a hierarchical namespace (ADLS Gen2); "
    "set sas-enabled to false to use this storage without vending, or (an emulator, a "
    "warehouse owning its whole filesystem) sas-scope to 'filesystem'"
)


def check_access(profile: dict[str, Any], credential: dict[str, Any]) -> None:
    """The access check within the access-check deadline (see the module docstring)."""

    def check() -> None:
        _probe(profile, credential)
        if profile["sas-enabled"]:
            _probe_sas(profile, credential)

    within_deadline(check, no_answer=NOT_AZURE, thread_name="icelog-adls-probe")


def _failed(step: str, location: str, exc: BaseException) -> BadRequestError:
    reason = failure_reason(exc)
    if reason == NOT_AZURE:
        return BadRequestError(f"Storage validation failed: {NOT_AZURE}")
    return BadRequestError(f"Storage validation failed: could not {step} {location}: {reason}")


def _probe(profile: dict[str, Any], credential: dict[str, Any]) -> None:
    base = Location.parse(profile["base-location"])
    probe = base.child(f".icelog-probe-{uuid.uuid4().hex}")
    filesystem = profile["filesystem"]
    try:
        client = service_client(profile, credential, quick=True)
    except (AzureError, ValueError):
        raise BadRequestError(f"Storage validation failed: {NOT_AZURE}") from None
    blob = client.get_blob_client(filesystem, probe.key)
    step = "write"
    try:
        blob.upload_blob(_PAYLOAD, overwrite=False)
        step = "read"
        read = blob.download_blob(offset=0, length=len(_PAYLOAD) + 1).readall()
        if read != _PAYLOAD:
            raise BadRequestError(f"Storage validation failed: {NOT_AZURE}")
        step = "list"
        listed = client.get_container_client(filesystem).list_blobs(
            name_starts_with=probe.key, results_per_page=1
        )
        if not any(True for _ in next(listed.by_page(), [])):
            raise BadRequestError(
                f"Storage validation failed: could not list {probe}: the probe was not listed"
            )
        step = "delete"
        blob.delete_blob()
    except AzureError as exc:
        raise _failed(step, str(probe), exc) from None


def _probe_sas(profile: dict[str, Any], credential: dict[str, Any]) -> None:
    """Vend a read-write SAS for a probe folder and write and delete one blob with it."""
    base = Location.parse(profile["base-location"])
    folder = base.child(f".icelog-probe-{uuid.uuid4().hex}")
    _, directory = table_directory(profile, str(folder))
    try:
        sas = sign_with_catalog_credential(
            profile, credential, directory, True, dt.datetime.now(dt.UTC)
        )
    except CatalogError as exc:
        raise BadRequestError(f"Storage validation failed: {exc.message}") from None
    except AzureError as exc:
        raise _failed("vend a SAS token for", str(folder), exc) from None
    name = f"{directory}/probe"
    blob = BlobClient(
        endpoint_of(profile),
        profile["filesystem"],
        name,
        credential=sas.token,
        connection_timeout=3,
        read_timeout=10,
        retry_policy=retry_policy(quick=True),
    )
    written = False
    try:
        blob.upload_blob(_PAYLOAD, overwrite=False)
        written = True
        blob.delete_blob()
        written = False
    except AzureError as exc:
        reason = failure_reason(exc)
        if reason == NOT_AZURE:
            raise BadRequestError(f"Storage validation failed: {NOT_AZURE}") from None
        hint = f"; {HNS_HINT}" if getattr(exc, "status_code", None) == 403 else ""
        raise BadRequestError(
            f"Storage validation failed: a vended SAS token was refused at {folder}: {reason}{hint}"
        ) from None
    finally:
        if written:  # the token could write but not delete: leave no probe behind
            with contextlib.suppress(AzureError):
                catalog = service_client(profile, credential, quick=True)
                catalog.get_blob_client(profile["filesystem"], name).delete_blob()

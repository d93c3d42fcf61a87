"""The warehouse access check for GCS: prove the storage works before a warehouse depends
on it.

With the catalog's own credential: one access token from the key's `token_uri`, then a
probe object written (`ifGenerationMatch=0`), read, listed and deleted below the base
location, as Lakekeeper does; when the profile enables vending, one token exchange at the
STS endpoint for a prefix below the base location. Every failure is a 400
`Storage validation failed: <step and reason>`, the reason as `failures` words it (never a
key, a token or a server's own message).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from icelog.commands.storage.gcs.failures import NOT_GCS, GoogleAuthFailure
from icelog.commands.storage.gcs.fileio import GcsFileIO, GcsStorageError
from icelog.commands.storage.gcs.vending import GcsVendor
from icelog.domain.errors import BadRequestError, CatalogError
from icelog.domain.locations import Location
from icelog.domain.ports import UnreadableFileError

_PAYLOAD = b"icelog storage probe"


def _failed(reason: str) -> BadRequestError:
    return BadRequestError(f"Storage validation failed: {reason}")


def probe(
    profile: Mapping[str, Any],
    credential: Mapping[str, Any],
    io: GcsFileIO,
    authenticate: Callable[[], object],
    vendor: GcsVendor,
    client_config: Mapping[str, str],
) -> None:
    """The steps of the module docstring, in order; the first failure ends the check."""
    try:
        authenticate()
    except GoogleAuthFailure as exc:
        raise _failed(
            f"could not get an access token for the service account: {exc.reason}"
        ) from None
    base = Location.parse(profile["base-location"])
    location = str(base.child(f".icelog-probe-{uuid.uuid4().hex}"))
    step = "write"
    try:
        io.write_new(location, _PAYLOAD)
        step = "read"
        if io.read(location) != _PAYLOAD:
            raise _failed(NOT_GCS)  # no GCS service answers a read with other bytes
        step = "list"
        io.holds_files(location)  # one listing below the probe: what listing needs
        step = "delete"
        if not io.delete(location):
            raise _failed(f"could not delete {location}: it was gone")
    except GcsStorageError as exc:
        if exc.reason == NOT_GCS:
            raise _failed(NOT_GCS) from None
        raise _failed(f"could not {exc.action} {exc.location}: {exc.reason}") from None
    except CatalogError as exc:
        if isinstance(exc, BadRequestError) and exc.message.startswith("Storage validation"):
            raise
        raise _failed(f"could not {step} {location}: {exc.message}") from None
    except (FileNotFoundError, UnreadableFileError):
        # The object just written is not there, or not readable: not a working store.
        raise _failed(f"could not {step} {location}: the object did not read back") from None
    if profile.get("sts-enabled"):
        try:
            vendor.vend(
                profile,
                credential,
                f"{base}/.icelog-probe",
                write=True,
                client_config=client_config,
            )
        except CatalogError as exc:
            raise _failed(
                exc.message.removeprefix("Could not vend storage credentials: ")
            ) from None

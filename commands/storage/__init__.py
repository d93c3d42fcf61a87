"""Storage adapters: one FileIO per storage-profile type."""

from __future__ import annotations

from typing import Any

from commands.storage.local import LocalFileIO, check_writable_directory
from domain.errors import BadRequestError
from domain.locations import normalize_location
from domain.ports import FileIO

_LOCAL = LocalFileIO()


def file_io_for(storage_profile: dict[str, Any]) -> FileIO:
    """The FileIO that serves a warehouse's storage profile."""
    kind = storage_profile.get("type")
    if kind == "file":
        return _LOCAL
    raise BadRequestError(f"Unsupported storage profile type: {kind!r}")


def validate_storage_profile(profile: object, *, check_access: bool = True) -> dict[str, Any]:
    """Normalise a storage profile from the management API and check the storage works."""
    if not isinstance(profile, dict):
        raise BadRequestError("storage-profile must be an object")
    kind = profile.get("type")
    if kind != "file":
        raise BadRequestError(f"Unsupported storage-profile type {kind!r}; supported: 'file'")
    base = profile.get("base-location")
    if not isinstance(base, str) or not base.startswith(("file:", "/")):
        raise BadRequestError(
            "storage-profile.base-location must be a file:///<absolute directory> URI"
        )
    normalized = {"type": "file", "base-location": normalize_location(base)}
    if check_access:
        check_writable_directory(normalized["base-location"])
    return normalized

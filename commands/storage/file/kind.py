"""The `file` kind: a directory the server writes with `LocalFileIO`, which clients reach by
the same paths (their load-table config says nothing about storage)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from icelog.commands.storage.file.form import FORM
from icelog.commands.storage.file.local import LocalFileIO, check_writable_directory
from icelog.commands.storage.file.models import FileStorageProfile
from icelog.commands.storage.file.roots import check_below_allowed_root, resolved
from icelog.commands.storage.kind import (
    ConsoleForm,
    NoRemoteSigning,
    NoVending,
    StorageLimits,
)
from icelog.commands.storage.policy import StoragePolicy
from icelog.domain.errors import BadRequestError
from icelog.domain.locations import Location
from icelog.domain.ports import FileIO

_FIELDS = {"type", "base-location"}


class FileKind(NoRemoteSigning, NoVending):
    name: ClassVar[str] = "file"
    profile_model: ClassVar[type[BaseModel]] = FileStorageProfile
    credential_model: ClassVar[type[BaseModel] | None] = None
    form: ClassVar[ConsoleForm] = FORM

    def normalize(
        self, profile: dict[str, Any], credential: object, policy: StoragePolicy
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        if credential is not None:
            raise BadRequestError("A file storage profile takes no storage-credential")
        unknown = sorted(set(profile) - _FIELDS)
        if unknown:
            raise BadRequestError(f"storage-profile has unsupported field(s): {', '.join(unknown)}")
        base = Location.parse(profile.get("base-location"), "storage-profile.base-location")
        if not base.is_local or not base.segments:
            raise BadRequestError(
                "storage-profile.base-location must be a file:///<absolute directory> URI"
            )
        check_below_allowed_root(base, policy.file_roots)
        return {"type": self.name, "base-location": str(base)}, None

    def keeps_credential(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        return False  # there is none to keep

    def check_access(self, profile: dict[str, Any], credential: dict[str, Any] | None) -> None:
        """The directory must be writable (it is created)."""
        check_writable_directory(Location.parse(profile["base-location"]))

    def storage_root(self, profile: dict[str, Any]) -> Location:
        return resolved(
            Location.parse(profile.get("base-location"), "storage-profile.base-location")
        )

    def file_io(
        self, profile: dict[str, Any], credential: dict[str, Any] | None, limits: StorageLimits
    ) -> FileIO:
        root = Location.parse(profile.get("base-location"), "storage base-location")
        return LocalFileIO(root, limits.max_read_bytes)

    def client_config(self, profile: dict[str, Any]) -> dict[str, str]:
        return {}

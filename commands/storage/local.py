"""Local-filesystem storage (`file://` warehouses)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import unquote

from domain.errors import BadRequestError


def to_path(location: str) -> Path:
    """`file:///a/b`, `file:/a/b` or `/a/b` → `/a/b`."""
    if location.startswith("file://"):
        path = location[len("file://") :]
    elif location.startswith("file:"):
        path = location[len("file:") :]
    else:
        path = location
    if not path.startswith("/"):
        raise BadRequestError(f"Not an absolute file location: {location}")
    return Path(unquote(path))


class LocalFileIO:
    """Reads and writes files under a local directory tree."""

    def write_new(self, location: str, data: bytes) -> None:
        path = to_path(location)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write beside the target, then link it into place: readers never see a partial
        # file, and link() fails if the name exists, so a file is never overwritten.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.link(tmp, path)
        finally:
            os.unlink(tmp)

    def read(self, location: str) -> bytes:
        return to_path(location).read_bytes()

    def delete(self, location: str) -> bool:
        try:
            to_path(location).unlink()
        except FileNotFoundError:
            return False
        return True

    def exists(self, location: str) -> bool:
        return to_path(location).is_file()


def check_writable_directory(base_location: str) -> None:
    """Warehouse creation: the base directory must exist or be creatable, and be writable."""
    path = to_path(base_location)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".icelog-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise BadRequestError(
            f"Storage validation failed: base-location {base_location} is not a writable "
            f"directory ({exc.strerror})"
        ) from None

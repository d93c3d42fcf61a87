"""The `file` storage kind: warehouses in a directory of the server's own file system,
which clients read and write directly (no credential, nothing vended or signed)."""

from __future__ import annotations

from icelog.commands.storage.file.kind import FileKind

KIND = FileKind()

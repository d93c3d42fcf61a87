"""The management API's model of a `file` profile (a file warehouse takes no credential)."""

from __future__ import annotations

from typing import Literal

from pydantic import StrictStr

from icelog.commands.storage.shapes import ProfileBody, documented


class FileStorageProfile(ProfileBody):
    type: Literal["file"]
    base_location: StrictStr = documented(
        "A `file:///<absolute directory>` URI (or an absolute path); the server must be able "
        "to write there."
    )

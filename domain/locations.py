"""Storage locations: normalisation, containment and default table paths."""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

from domain.errors import BadRequestError
from domain.identifiers import NamespaceName, reject_control_characters

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
ALTERNATIVE_S3_SCHEMES = ("s3a://", "s3n://")


def normalize_location(location: str) -> str:
    """One spelling per place: `file:/x` and `file:///x` are the same file, no trailing '/'."""
    loc = reject_control_characters(location, "A location").strip()
    if loc.startswith("file:") and not loc.startswith("file://"):
        loc = "file://" + loc[len("file:") :]
    elif loc.startswith("/"):
        loc = "file://" + loc
    elif loc.startswith(ALTERNATIVE_S3_SCHEMES):
        # s3a:// and s3n:// (Hadoop's names) address the same objects as s3://.
        loc = "s3://" + loc.split("://", 1)[1]
    return loc.rstrip("/")


def uses_alternative_scheme(location: str) -> bool:
    """s3a:// or s3n://, accepted only where the warehouse allows alternative protocols."""
    return location.strip().startswith(ALTERNATIVE_S3_SCHEMES)


def check_scheme_allowed(storage_profile: dict[str, Any], location: str) -> None:
    """s3a:// and s3n:// only where the profile says `allow-alternative-protocols`."""
    if uses_alternative_scheme(location) and not storage_profile.get("allow-alternative-protocols"):
        raise BadRequestError(
            f"Location {location} uses an alternative protocol (s3a/s3n); the warehouse's "
            "storage profile does not allow them (allow-alternative-protocols)"
        )


def is_inside(location: str, base: str) -> bool:
    """True when `location` is `base` itself or below it."""
    loc, root = normalize_location(location), normalize_location(base)
    return loc == root or loc.startswith(root + "/")


def path_segment(text: str) -> str:
    """A name made safe to use as one path segment (names may hold '/', spaces, ...)."""
    safe = _UNSAFE.sub("_", text)
    return safe or "_"


def default_table_location(base: str, namespace: NamespaceName, name: str, table_id: UUID) -> str:
    """`<warehouse>/<ns levels>/<name>-<id>`: the id keeps re-created names from sharing files."""
    parts = [path_segment(level) for level in namespace.levels]
    return "/".join([normalize_location(base), *parts, f"{path_segment(name)}-{table_id.hex}"])

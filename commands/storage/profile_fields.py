"""The rules a storage profile's fields follow whatever the kind (s3, adls, gcs): optional
strings and flags, bounded integers, the warehouse's key prefix, endpoint URLs, and the
refusal of fields a kind does not know (so that a setting never silently does nothing).

Every rule answers 400 with a message that names the field, never its value: an endpoint
may carry a credential, and a message is logged and returned. A kind adds its own rules
after these (a longer key-prefix limit, characters its tokens cannot scope).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from typing import Any
from urllib.parse import urlsplit

from icelog.domain.errors import BadRequestError

# Written by icelog into the stored profile; accepted back from a client that round-trips a
# profile it read from GET warehouse.
DERIVED_FIELDS = frozenset({"base-location", "credential-id"})
HTTP_SCHEMES = ("http", "https")
# C0, DEL and C1: never part of a name, URL or key. (The domain's own check refuses only
# what storage cannot hold, NUL and the namespace separator.)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def refuse_unknown_fields(given: Iterable[str], known: Set[str], what: str) -> None:
    """400 naming every field of `given` (a profile's or credential's) not in `known`."""
    unknown = sorted(set(given) - known)
    if unknown:
        raise BadRequestError(f"{what} has unsupported field(s): {', '.join(unknown)}")


def optional_str(profile: dict[str, Any], key: str) -> str | None:
    """A string field; None when absent or empty."""
    value = profile.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadRequestError(f"storage-profile.{key} must be a string")
    return value


def flag(profile: dict[str, Any], key: str, default: bool) -> bool:
    """A true/false field; `default` when absent."""
    value = profile.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequestError(f"storage-profile.{key} must be true or false")
    return value


def int_in_range(profile: dict[str, Any], key: str, *, default: int, low: int, high: int) -> int:
    """An integer field from `low` to `high`; `default` when absent. A JSON `true` is no
    integer here, though Python counts it as one."""
    value = profile.get(key)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise BadRequestError(f"storage-profile.{key} must be an integer from {low} to {high}")
    return value


def reject_any_control_character(value: str, what: str) -> None:
    """Control characters (C0, DEL, C1) are never part of a name, URL or key field."""
    if _CONTROL.search(value):
        raise BadRequestError(f"{what} must not hold control characters")


def key_prefix(profile: dict[str, Any]) -> str:
    """The warehouse's folder in its bucket or filesystem (`key-prefix`): outer '/' dropped
    ("" for the whole of it), no control character, no empty, '.' or '..' part (one folder
    must have one spelling)."""
    prefix = (optional_str(profile, "key-prefix") or "").strip("/")
    reject_any_control_character(prefix, "storage-profile.key-prefix")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise BadRequestError("storage-profile.key-prefix must not hold empty, '.' or '..' parts")
    return prefix


def http_url(value: str, what: str, *, schemes: tuple[str, ...] = HTTP_SCHEMES) -> str:
    """`scheme://host[:port][/path]`, without a trailing '/'. No user information (the URL
    is logged and handed to clients, so it must never carry a credential), no query or
    fragment (they would change what the clients call)."""
    shown = "http(s)" if schemes == HTTP_SCHEMES else " or ".join(schemes)
    try:
        parts = urlsplit(value)
        _ = parts.port  # a port that is not a number, or out of range, raises
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in schemes or not parts.hostname:
        raise BadRequestError(f"{what} must be an {shown} URL")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise BadRequestError(
            f"{what} must be scheme://host[:port][/path], without user information, query "
            "or fragment"
        )
    return value.rstrip("/")


def optional_url(
    profile: dict[str, Any], key: str, *, schemes: tuple[str, ...] = HTTP_SCHEMES
) -> str | None:
    """An `http_url` field; None when absent or empty."""
    value = optional_str(profile, key)
    return None if value is None else http_url(value, f"storage-profile.{key}", schemes=schemes)

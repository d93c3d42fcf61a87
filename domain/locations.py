"""Storage locations: one type that parses, normalises and compares them by segments.

Every location the server derives, accepts, reads, writes or deletes goes through
`Location.parse` (ARCHITECTURE guarantee 7). Containment is decided on whole path segments,
never on string prefixes, and a location that could mean a different place to a different
reader is refused rather than interpreted:

- schemes: `file` (`file:///p`, `file:/p`, `file://localhost/p`, a bare absolute `/p`),
  `s3` (`s3://bucket/key`; Hadoop's `s3a://` and `s3n://` name the same objects), `gs`
  (`gs://bucket/key`) and `abfss` (ADLS Gen2: `abfss://<filesystem>@<account>.<host>/path`;
  `abfs://`, and the Blob API's `wasbs://` / `wasb://` at `<account>.blob.<suffix>`, name
  the same objects and are read as the `abfss` spelling at `<account>.dfs.<suffix>`);
- no control characters, `\\`, `?` or `#` anywhere (Java's S3URI drops `?...` and `#...`,
  Hadoop reads `#` as a fragment: the same text would name another object);
- no empty, `.` or `..` segment — also not once percent-decoded (`%2e%2e`), and not split
  out of a segment by a decoded separator (`..%2f`): some readers decode, some do not, so a
  location must stay inside its base under both readings. Locations clients choose refuse
  encoded separators (`%2F`, `%5C`) altogether; the files a table's metadata names may hold
  them (Iceberg writes a partition value's '/' as `%2F`), as literal characters;
- segments of at most 255 bytes for `file` (the file-name limit of Linux file systems) and
  keys of at most 1,024 bytes for `s3` (S3's limit), so an overlong name is a 400, never an
  I/O error.

The text form (`str()`) is canonical: one spelling per place, no trailing '/'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote
from uuid import UUID

from icelog.domain.errors import BadRequestError
from icelog.domain.identifiers import NamespaceName

if TYPE_CHECKING:  # storage_layout builds on this module
    from icelog.domain.storage_layout import StorageLayout

# The scheme of paths on the server's own file system (the others name object stores).
LOCAL_SCHEME = "file"
ALTERNATIVE_S3_SCHEMES = ("s3a://", "s3n://")
# Spellings a warehouse accepts only with `allow-alternative-protocols`.
ALTERNATIVE_SCHEMES = (*ALTERNATIVE_S3_SCHEMES, "abfs://", "wasbs://", "wasb://")
_SCHEMES = {
    "file": "file",
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gs",
    "abfss": "abfss",
    "abfs": "abfss",
    "wasbs": "abfss",
    "wasb": "abfss",
}
_BLOB_SCHEMES = ("wasbs", "wasb")
# `<filesystem>@<account>.<host>`: Azure's rules for container (3-63 lowercase letters,
# digits, single '-') and account names (3-24 lowercase letters and digits).
_ADLS_AUTHORITY = re.compile(
    r"^(?P<fs>[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62})@(?P<account>[a-z0-9]{3,24})"
    r"\.(?P<host>[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?)+)$"
)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
# Control characters (C0, DEL, C1), the Windows separator, query and fragment marks.
_REFUSED_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\\?#]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)
_BUCKET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-_]{0,254}$")
_DOTS = frozenset({"", ".", ".."})
MAX_LOCATION_CHARS = 4096
MAX_FILE_SEGMENT_BYTES = 255
# S3, GCS and Azure Blob all limit an object's name to 1,024 bytes (UTF-8).
MAX_S3_KEY_BYTES = MAX_OBJECT_KEY_BYTES = 1024
# Names become path segments of default locations: cut to this many characters, so
# that `<name>-<32 hex digits>` stays far below the 255-byte file-name limit.
MAX_NAME_SEGMENT_CHARS = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")


def _refuse(what: str, text: str, why: str) -> BadRequestError:
    shown = text if len(text) <= 256 else text[:256] + "..."
    return BadRequestError(f"Invalid {what} {shown!r}: {why}")


def _check_segment(segment: str, *, what: str, text: str, encoded_separators: bool) -> None:
    if segment in _DOTS:
        raise _refuse(what, text, "empty, '.' and '..' path segments are not allowed")
    if segment != segment.strip():
        # Some readers trim names (and a segment of spaces trims to nothing): refused.
        raise _refuse(what, text, "a path segment cannot begin or end with white space")
    if "%" not in segment:
        return
    if not encoded_separators and _ENCODED_SEPARATOR.search(segment):
        raise _refuse(what, text, "percent-encoded separators (%2F, %5C) are not allowed")
    decoded = unquote(segment)
    if _CONTROL.search(decoded):
        raise _refuse(what, text, "percent-encoded control characters are not allowed")
    for part in re.split(r"[/\\]", decoded):
        if part in (".", ".."):
            raise _refuse(what, text, "'.' and '..' path segments are not allowed, encoded or not")


@dataclass(frozen=True, slots=True)
class Location:
    """A parsed storage location: its scheme (`file`, `s3`, `gs`, `abfss`), its authority
    (the bucket; for `abfss` `<filesystem>@<account>.<host>`; empty for `file`) and the path
    segments as written (never empty, `.` or `..`, in either reading)."""

    scheme: str
    authority: str
    segments: tuple[str, ...]

    @classmethod
    def parse(
        cls, text: Any, what: str = "location", *, encoded_separators: bool = False
    ) -> Location:
        """Parse a location or refuse it (400). `encoded_separators`: accept `%2F` / `%5C`
        inside a segment (files named by a table's metadata), still refusing any that
        would form a dot segment."""
        if not isinstance(text, str) or not text.strip():
            raise BadRequestError(f"Invalid {what}: expected a non-empty string")
        raw = text
        if raw != raw.strip():
            # Never stripped: a stored text that parses differently the second time (a
            # trailing space dropped) would name another place than the one checked.
            raise _refuse(what, raw, "leading or trailing white space is not allowed")
        if len(raw) > MAX_LOCATION_CHARS:
            raise _refuse(what, raw, f"longer than {MAX_LOCATION_CHARS} characters")
        if _REFUSED_CHARACTERS.search(raw):
            raise _refuse(what, raw, "control characters, '\\', '?' and '#' are not allowed")
        scheme, authority, path = cls._split(raw, what)
        parts = path.split("/")
        # Absolute: the path starts with '/'; trailing '/'s name the same place.
        body = parts[1:]
        while body and body[-1] == "":
            body.pop()
        for segment in body:
            _check_segment(segment, what=what, text=raw, encoded_separators=encoded_separators)
        location = cls(scheme, authority, tuple(body))
        location._check_length(what, raw)
        return location

    @staticmethod
    def _split(raw: str, what: str) -> tuple[str, str, str]:
        """(scheme, authority, absolute path) of a location's text."""
        if raw.startswith("/"):
            if raw.startswith("//"):
                raise _refuse(what, raw, "a path must not start with '//'")
            return "file", "", raw
        match = _SCHEME.match(raw)
        if match is None:
            raise _refuse(what, raw, "expected file:///<path> or <scheme>://<bucket>/<key>")
        spelled = match.group(1).lower()
        scheme = _SCHEMES.get(spelled)
        if scheme is None:
            raise _refuse(
                what, raw, f"the scheme {spelled!r} is not supported (file, s3, gs, abfss)"
            )
        rest = raw[match.end() :]
        if scheme == LOCAL_SCHEME:
            if rest.startswith("//"):
                host, slash, path = rest[2:].partition("/")
                if host.lower() not in ("", "localhost"):
                    raise _refuse(what, raw, "a file location cannot name a host")
                rest = slash + path
            if not rest.startswith("/") or rest.startswith("//"):
                raise _refuse(what, raw, "a file location needs an absolute path")
            return "file", "", rest
        if not rest.startswith("//"):
            raise _refuse(what, raw, f"expected {scheme}://<bucket>/<key>")
        authority, slash, key = rest[2:].partition("/")
        if scheme == "abfss":
            authority = _adls_authority(authority, spelled, what, raw)
        elif not _BUCKET.fullmatch(authority) or ".." in authority:
            raise _refuse(what, raw, "not a valid bucket name")
        return scheme, authority, "/" + key if slash else "/"

    def _check_length(self, what: str, raw: str) -> None:
        if self.is_local:
            for segment in self.segments:
                if len(segment.encode()) > MAX_FILE_SEGMENT_BYTES:
                    raise _refuse(
                        what, raw, f"a path segment is longer than {MAX_FILE_SEGMENT_BYTES} bytes"
                    )
        elif len(self.key.encode()) > MAX_OBJECT_KEY_BYTES:
            raise _refuse(what, raw, f"the object key is longer than {MAX_OBJECT_KEY_BYTES} bytes")

    # -- text forms --------------------------------------------------------------------------
    def __str__(self) -> str:
        path = "/".join(self.segments)
        if self.is_local:
            return f"file:///{path}"
        root = f"{self.scheme}://{self.authority}"
        return f"{root}/{path}" if path else root

    @property
    def is_local(self) -> bool:
        """A path on the server's own file system (`file`), not an object store's key."""
        return self.scheme == LOCAL_SCHEME

    @property
    def path(self) -> str:
        """A file location's absolute path, as written (the server never decodes it)."""
        return "/" + "/".join(self.segments)

    @property
    def key(self) -> str:
        """An object store location's object key (or key prefix); for `abfss` the path
        inside the filesystem."""
        return "/".join(self.segments)

    # -- comparisons -------------------------------------------------------------------------
    def contains(self, other: Location) -> bool:
        """True when `other` is this location or lies below it (whole segments)."""
        n = len(self.segments)
        return (
            self.scheme == other.scheme
            and self.authority == other.authority
            and other.segments[:n] == self.segments
        )

    def overlaps(self, other: Location) -> bool:
        """One of the two contains the other."""
        return self.contains(other) or other.contains(self)

    def relative_to(self, base: Location) -> tuple[str, ...]:
        """The segments below `base` (which must contain this location)."""
        if not base.contains(self):
            raise ValueError(f"{self} is not inside {base}")
        return self.segments[len(base.segments) :]

    def child(self, *names: str) -> Location:
        """A location below this one; each name must be one valid segment."""
        for name in names:
            if "/" in name:
                raise _refuse("path segment", name, "a segment cannot hold '/'")
        return Location.parse(f"{self}/{'/'.join(names)}", "location")


def _adls_authority(authority: str, spelled: str, what: str, raw: str) -> str:
    """`<filesystem>@<account>.<host>`, lower-cased; the Blob API's host (`blob`) read as
    the DFS one (`dfs`), so that both spellings of one place compare equal."""
    match = _ADLS_AUTHORITY.fullmatch(authority.lower())
    if match is None:
        raise _refuse(what, raw, "expected abfss://<filesystem>@<account>.<host>/<path>")
    host = match["host"]
    if spelled in _BLOB_SCHEMES and host.startswith("blob."):
        host = "dfs." + host[len("blob.") :]
    return f"{match['fs']}@{match['account']}.{host}"


def parse_inside(text: Any, base: Location, what: str = "location") -> Location:
    """A location a client chose, which must lie inside `base` (400 otherwise)."""
    location = Location.parse(text, what)
    if not base.contains(location):
        raise BadRequestError(f"{what.capitalize()} {location} is not inside {base}")
    return location


def normalize_location(location: str) -> str:
    """The canonical text of a location — for stored values, which may predate the
    strict rules: a legacy spelling that no longer parses keeps a best-effort form
    (`file:` prefix, `s3` scheme, no trailing '/'), so that old logs still replay."""
    try:
        return str(Location.parse(location, encoded_separators=True))
    except BadRequestError:
        pass
    loc = location.strip()
    if loc.startswith("file:") and not loc.startswith("file://"):
        loc = "file://" + loc[len("file:") :]
    elif loc.startswith("/"):
        loc = "file://" + loc
    elif loc.startswith(ALTERNATIVE_S3_SCHEMES):
        loc = "s3://" + loc.split("://", 1)[1]
    return loc.rstrip("/")


def location_set_by(updates: Any) -> str | None:
    """The location a commit's updates end with, when they set one (`set-location`)."""
    found = None
    for update in updates if isinstance(updates, list) else ():
        if isinstance(update, dict) and str(update.get("action", "")).lower() == "set-location":
            found = update.get("location")
    return found if isinstance(found, str) else None


def uses_alternative_scheme(location: str) -> bool:
    """s3a://, s3n://, abfs://, wasbs:// or wasb://: accepted only where the warehouse
    allows alternative protocols."""
    return location.strip().lower().startswith(ALTERNATIVE_SCHEMES)


def check_scheme_allowed(storage_profile: dict[str, Any], location: str) -> None:
    """Alternative spellings only where the profile says `allow-alternative-protocols`."""
    if uses_alternative_scheme(location) and not storage_profile.get("allow-alternative-protocols"):
        raise BadRequestError(
            f"Location {location} uses an alternative protocol (s3a, s3n, abfs, wasbs, "
            "wasb); the warehouse's storage profile does not allow them "
            "(allow-alternative-protocols)"
        )


def is_inside(location: str, base: str) -> bool:
    """True when `location` is `base` itself or below it; False for any location that does
    not parse (it is inside nothing)."""
    try:
        return Location.parse(base, encoded_separators=True).contains(
            Location.parse(location, encoded_separators=True)
        )
    except BadRequestError:
        return False


def path_segment(text: str) -> str:
    """A name made safe to use as one path segment: names may hold '/', spaces, '..' or be
    thousands of characters long; the segment never is anything but letters, digits, '_',
    '-' and '.', never only dots, and at most MAX_NAME_SEGMENT_CHARS characters."""
    safe = _UNSAFE.sub("_", text)[:MAX_NAME_SEGMENT_CHARS]
    if not safe.strip("."):
        return "_" * max(1, len(safe))
    return safe


def default_table_location(
    base: Location,
    namespace: NamespaceName,
    name: str,
    table_id: UUID,
    *,
    layout: StorageLayout | None = None,
    warehouse_id: UUID | None = None,
) -> Location:
    """Where a new table or view goes when its create names no location: as the warehouse's
    `layout` places it (`domain/storage_layout.py`; a namespace level's id is derived from
    `warehouse_id`), else `<warehouse>/<ns levels>/<name>-<id>`: the id keeps re-created
    names from sharing files."""
    if layout is not None:
        if warehouse_id is None:
            raise ValueError("a storage layout places tables by their warehouse's id")
        return layout.place(base, warehouse_id, namespace, name, table_id)
    parts = [path_segment(level) for level in namespace.levels]
    return base.child(*parts, f"{path_segment(name)}-{table_id.hex}")

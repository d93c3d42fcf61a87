"""Where the catalog places a new table or view inside its warehouse: Lakekeeper's
`StorageLayout` (`storage-profile.storage-layout`, taken by every storage kind), or
icelog's own layout when the profile names none.

- absent: `<base>/<namespace levels>/<name>-<id hex>`, icelog's layout since its start;
- `{"type": "default"}`: Lakekeeper's default, flat: `<base>/{uuid}`;
- `{"type": "tabular-only", "tabular": T}`: flat, `<base>/T`;
- `{"type": "full-hierarchy", "namespace": N, "tabular": T}`: `<base>/N/.../N/T`, one `N`
  per namespace level.

A template is one path segment made of letters, digits, `_`, `-`, `.` and the placeholders
`{uuid}` and `{name}`. `{uuid}` is the table's (view's) id, or the namespace level's id
(`namespace_id`), hyphenated as Lakekeeper writes it. `{name}` is the name made one safe
segment by `path_segment` (letters, digits, `_`, `-`, `.`, at most 64 characters, never
only dots). Lakekeeper percent-encodes the name instead; icelog does not, because it refuses
'%' in the locations it chooses: a percent-escape would let one place be spelled two ways,
and readers that decode and readers that do not would disagree about it.

A tabular template must hold `{uuid}` (Lakekeeper asks it of `tabular-only`; icelog of
`full-hierarchy` too): re-creating a name never lands on the files of the one dropped
before. Rendered segments stay within the 255-byte file-name limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from icelog.domain.errors import BadRequestError
from icelog.domain.identifiers import NamespaceName, namespace_id
from icelog.domain.locations import (
    MAX_FILE_SEGMENT_BYTES,
    MAX_NAME_SEGMENT_CHARS,
    Location,
    path_segment,
)

FIELD = "storage-layout"
WHAT = "storage-profile.storage-layout"
TYPES = ("default", "tabular-only", "full-hierarchy")
_UUID, _NAME = "{uuid}", "{name}"
# One segment: the placeholders and characters that never need encoding anywhere.
TEMPLATE = re.compile(r"^(?:\{uuid\}|\{name\}|[A-Za-z0-9_.\-])+$")
MAX_TEMPLATE_CHARS = 200
_UUID_CHARS = 36  # str(UUID): 8-4-4-4-12 hex digits
_FIELDS = {
    "default": ("type",),
    "tabular-only": ("type", "tabular"),
    "full-hierarchy": ("type", "namespace", "tabular"),
}


def _template(value: object, key: str, *, needs_uuid: bool) -> str:
    what = f"{WHAT}.{key}"
    if not isinstance(value, str) or not value:
        raise BadRequestError(f"{what} must be a non-empty string")
    shown = value if len(value) <= 80 else value[:80] + "..."
    if len(value) > MAX_TEMPLATE_CHARS or not TEMPLATE.fullmatch(value):
        raise BadRequestError(
            f"{what} must be one path segment of at most {MAX_TEMPLATE_CHARS} letters, "
            "digits, '_', '-', '.' and the placeholders {uuid} and {name}: "
            f"{shown!r}"
        )
    if needs_uuid and _UUID not in value:
        raise BadRequestError(
            f"{what} must hold {{uuid}}, so that a re-created name never shares the files "
            f"of an earlier one: {shown!r}"
        )
    literal = value.replace(_UUID, "").replace(_NAME, "")
    if value == literal and not literal.strip("."):
        raise BadRequestError(f"{what} must not be '.' or '..': {shown!r}")
    longest = (
        len(literal)
        + value.count(_UUID) * _UUID_CHARS
        + value.count(_NAME) * MAX_NAME_SEGMENT_CHARS
    )
    if longest > MAX_FILE_SEGMENT_BYTES:
        raise BadRequestError(
            f"{what} may render segments longer than {MAX_FILE_SEGMENT_BYTES} bytes "
            f"({{uuid}} is {_UUID_CHARS} characters, {{name}} up to "
            f"{MAX_NAME_SEGMENT_CHARS}): {shown!r}"
        )
    return value


def _render(template: str, name: str, ident: UUID) -> str:
    # One pass, so that a name is never read as a placeholder.
    return re.sub(
        r"\{uuid\}|\{name\}",
        lambda m: str(ident) if m.group(0) == _UUID else path_segment(name),
        template,
    )


@dataclass(frozen=True)
class StorageLayout:
    """A checked layout: `namespace` is None for the flat ones."""

    type: str
    tabular: str
    namespace: str | None = None

    @classmethod
    def parse(cls, value: object) -> StorageLayout:
        """A layout from the management API (or a stored profile); 400 for anything else."""
        if not isinstance(value, Mapping) or value.get("type") not in TYPES:
            raise BadRequestError(
                f"{WHAT} must be an object whose type is one of: {', '.join(TYPES)}"
            )
        kind = str(value["type"])
        unknown = sorted(set(value) - set(_FIELDS[kind]))
        if unknown:
            raise BadRequestError(
                f"{WHAT} of type {kind} has unsupported field(s): {', '.join(unknown)}"
            )
        if kind == "default":
            return cls("default", _UUID)
        tabular = _template(value.get("tabular"), "tabular", needs_uuid=True)
        if kind == "tabular-only":
            return cls(kind, tabular)
        namespace = _template(value.get("namespace"), "namespace", needs_uuid=False)
        return cls(kind, tabular, namespace)

    @classmethod
    def of(cls, profile: Mapping[str, Any]) -> StorageLayout | None:
        """A stored profile's layout; None: icelog's own."""
        value = profile.get(FIELD)
        return None if value is None else cls.parse(value)

    def as_json(self) -> dict[str, str]:
        """The stored (and answered) form, Lakekeeper's shape."""
        found = {"type": self.type}
        if self.type != "default":
            if self.namespace is not None:
                found["namespace"] = self.namespace
            found["tabular"] = self.tabular
        return found

    def place(
        self,
        base: Location,
        warehouse_id: UUID,
        namespace: NamespaceName,
        name: str,
        tabular_id: UUID,
    ) -> Location:
        """A new table's or view's location below `base`."""
        parts = []
        if self.namespace is not None:
            levels = namespace.levels
            for depth in range(1, len(levels) + 1):
                level_id = namespace_id(warehouse_id, NamespaceName(levels[:depth]))
                parts.append(_render(self.namespace, levels[depth - 1], level_id))
        parts.append(_render(self.tabular, name, tabular_id))
        return base.child(*parts)

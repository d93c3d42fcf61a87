"""The management API's storage models that every kind shares: the base of a kind's profile
and credential models (Lakekeeper's JSON: kebab-case names, unknown fields refused) and the
`storage-layout` every profile takes.

Like the other management models (`api/models/management.py`) they check shape only; what a
value means is checked by the kind's `normalize` and, for the layout, by the registry
(`domain/storage_layout.py`), with their own messages. The API builds its unions from the
registered kinds' models (`registry.KINDS`), so a kind's models live in its folder.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr
from typing_extensions import TypeAliasType

from icelog.domain.storage_layout import MAX_TEMPLATE_CHARS, TEMPLATE


def kebab(name: str) -> str:
    """`key_prefix` → `key-prefix` (as the API layer's `Body` names fields)."""
    return name.replace("_", "-")


class StorageBody(BaseModel):
    """A storage model: the configuration of the API layer's `Body` (which `commands/` may
    not import): kebab-case names, unknown fields refused, immutable."""

    model_config = ConfigDict(
        alias_generator=kebab, populate_by_name=True, extra="forbid", frozen=True
    )


def documented(description: str, **schema: Any) -> Any:
    """A required field's description, and JSON-schema keywords that document a rule the
    server checks in `commands/` without the model enforcing it twice."""
    return Field(description=description, json_schema_extra=schema or None)


def optional(description: str, **schema: Any) -> Any:
    """An optional field (default None), documented as `documented` does."""
    return Field(default=None, description=description, json_schema_extra=schema or None)


_TEMPLATE = {"pattern": TEMPLATE.pattern, "minLength": 1, "maxLength": MAX_TEMPLATE_CHARS}


class StorageLayoutDefault(StorageBody):
    """Lakekeeper's default: flat, every table and view at `<base-location>/{uuid}`."""

    type: Literal["default"]


class StorageLayoutTabularOnly(StorageBody):
    """Flat: every table and view at `<base-location>/<tabular>`."""

    type: Literal["tabular-only"]
    tabular: StrictStr = documented(
        "One path segment: letters, digits, '_', '-', '.', `{uuid}` (the table's id) and "
        "`{name}` (its name, made a safe segment); must hold `{uuid}`. Example: "
        "`{name}-{uuid}`.",
        **_TEMPLATE,
    )


class StorageLayoutFullHierarchy(StorageBody):
    """A directory per namespace level: `<base-location>/<namespace>/.../<tabular>`."""

    type: Literal["full-hierarchy"]
    namespace: StrictStr = documented(
        "One path segment per namespace level: letters, digits, '_', '-', '.', `{uuid}` "
        "(the namespace's id) and `{name}` (the level's name, made a safe segment).",
        **_TEMPLATE,
    )
    tabular: StrictStr = documented(
        "As in `tabular-only`; must hold `{uuid}`.",
        **_TEMPLATE,
    )


StorageLayout = TypeAliasType(
    "StorageLayout",
    Annotated[
        StorageLayoutDefault | StorageLayoutTabularOnly | StorageLayoutFullHierarchy,
        Field(discriminator="type"),
    ],
)


class ProfileBody(StorageBody):
    """The base of every kind's profile model: the fields every kind takes."""

    storage_layout: StorageLayout | None = optional(
        "Where new tables and views go below `base-location` (Lakekeeper's StorageLayout). "
        "Absent: icelog's `<namespace levels>/<name>-<id>`. `{name}` is made a safe path "
        "segment (letters, digits, '_', '-', '.'), not percent-encoded as Lakekeeper does: "
        "icelog never chooses a location holding '%'."
    )

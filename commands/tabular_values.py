"""What table and view commands pass and answer (a `Change`, a `TableState`, a staged
change, a new tabular's place) and the helpers that shape a new tabular's first event, its
name claim and where its metadata files go. The core that uses them: commands/tabular.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple
from uuid import UUID

from icelog.commands.application import CatalogApplication, WarehouseStorage
from icelog.domain.claims import NameClaim, claim
from icelog.domain.context import RequestContext
from icelog.domain.errors import BadRequestError
from icelog.domain.identifiers import TabularName, tabular_claim_id
from icelog.domain.locations import Location, parse_inside
from icelog.domain.ports import FileIO
from icelog.domain.tabular import Tabular
from icelog.domain.warehouse import Warehouse

WRITE_METADATA_PATH = "write.metadata.path"


@dataclass(frozen=True)
class TableState:
    """What a table or view command answers with: the current metadata and where it lives."""

    table_id: UUID
    metadata_location: str | None
    metadata: dict[str, Any]
    # `metadata` as JSON, when the command already serialised it (a commit writes these
    # bytes as the metadata file): the answer reuses them instead of serialising again.
    document: bytes | None = None


class Change(NamedTuple):
    """A commit to a table or a replace of a view, as the client asked: who asks, which
    one, the requirements that must hold and the updates to apply."""

    ctx: RequestContext
    warehouse_id: UUID
    name: TabularName
    requirements: list[dict[str, Any]]
    updates: list[dict[str, Any]]


@dataclass(frozen=True)
class Staged:
    """A change applied and its metadata file written, waiting to be appended."""

    location: str
    data: bytes
    base: dict[str, Any]
    metadata: dict[str, Any]


@dataclass(frozen=True)
class NewPlace:
    """Where a create puts a new table or view, as one attempt found it."""

    warehouse: Warehouse | WarehouseStorage
    namespace_id: UUID
    claim: NameClaim | None  # the name's claim, absent or released (a held one is 409)
    location: str


# Stages a change on the tabular it is given (not yet saved): None when nothing changes.
Stage = Callable[[Any, FileIO], Staged | None]


def stage_written(
    app: CatalogApplication,
    file_io: FileIO,
    tabular: Tabular,
    ctx: RequestContext,
    change: tuple[list[dict[str, Any]], list[dict[str, Any]], int],
    base: dict[str, Any],
    metadata: dict[str, Any],
    location: str,
) -> Staged:
    """Write the next metadata document at `location` and record the change on the table
    or view (a commit, a replace): `change` is (requirements, updates, applied-at ms)."""
    requirements, updates, applied_at = change
    data = app.remember_metadata(location, metadata)
    app.write_metadata(file_io, location, data)
    tabular.record_change(
        requirements=requirements,
        updates=updates,
        metadata_location=location,
        applied_at_ms=applied_at,
        actor=ctx.actor,
        request_id=ctx.request_id,
    )
    return Staged(location, data, base, metadata)


class NeedsFreshState(Exception):
    """An optimistic attempt could not prove its answer; redo it on fresh state."""


def metadata_dir(metadata: dict[str, Any]) -> Location:
    """Where a table's or view's metadata files go: `<location>/metadata`, or the
    `write.metadata.path` property, which must lie inside the table's location (as
    Lakekeeper requires) — never elsewhere in the warehouse, never outside it."""
    location = Location.parse(metadata.get("location"), "table location")
    custom = metadata.get("properties", {}).get(WRITE_METADATA_PATH)
    if not custom:
        return location.child("metadata")
    return parse_inside(custom, location, WRITE_METADATA_PATH)


def inside(text: str, base: Location) -> bool:
    """Whether a location named by metadata lies inside `base` (False when it does not parse)."""
    try:
        return base.contains(Location.parse(text, encoded_separators=True))
    except BadRequestError:
        return False


def claim_name(
    existing: NameClaim | None,
    warehouse_id: UUID,
    name: TabularName,
    kind: str,
    holder_id: UUID,
    ctx: RequestContext,
) -> NameClaim:
    """Claim `name` for a table or view: a new claim, or the re-claim of a released one."""
    return claim(
        existing,
        claim_id=tabular_claim_id(warehouse_id, name),
        kind=kind,
        holder_id=holder_id,
        name=name.dotted,
        actor=ctx.actor,
        request_id=ctx.request_id,
    )


def new_tabular_fields(
    ctx: RequestContext,
    warehouse_id: UUID,
    ns_id: UUID,
    name: TabularName,
    *,
    location: str,
    metadata_location: str,
    metadata: dict[str, Any],
) -> dict[str, Any]:
    """What the first event of a new table or view says (created or registered)."""
    return {
        "warehouse_id": warehouse_id,
        "namespace_id": ns_id,
        "namespace": name.namespace.as_list(),
        "name": name.name,
        "location": location,
        "metadata_location": metadata_location,
        "metadata": metadata,
        "actor": ctx.actor,
        "request_id": ctx.request_id,
    }

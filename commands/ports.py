"""What the command groups ask the read model (handed in: commands/ cannot import
projections/). Every field is required: a catalog built without its location index or
its task count does not build, so no safety check can be skipped by an omission."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from icelog.domain.grants import Grant
from icelog.domain.permissions import ObjectRef
from icelog.domain.ports import LocationIndex


@dataclass
class ReadPorts:
    """Read-model queries the commands decide on. On the primary: a decision a command
    takes must see every acknowledged write."""

    # Another table's or view's location overlapping one (warehouse id, location).
    location_index: LocationIndex
    # Every table or view location overlapping one (a purge keeps their files).
    locations_overlapping: Callable[[str, str], list[str]]
    # Open (pending or running) tasks of a warehouse.
    open_task_count: Callable[[str], int]
    # How many roles a project has (the append checks it again).
    project_role_count: Callable[[str], int]
    # The grants on an object as the read model holds them now (relation, principal kind,
    # principal id). The grants stream of an object remembers every grant its events
    # made, but the read model ends them with the object (a dropped namespace and the
    # next one of its name share the stream): what is held is the read model's.
    grants_now: Callable[[ObjectRef], set[Grant]]
    # What a namespace holds, by kind (table, view, function, namespace, soft-deleted).
    namespace_contents: Callable[[str, str], dict[str, int]]
    # Every live warehouse's storage profile by id: seeds the storage roots registry of a
    # catalog whose log predates it.
    warehouse_profiles: Callable[[], dict[str, dict[str, Any]]]

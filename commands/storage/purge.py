"""Find every file reachable from a table's metadata that purge may delete.

Purge deletes only what the metadata references — metadata files, manifest lists,
manifests, data and delete files, statistics — and never a whole directory: another
table may live below the same prefix (RCK dropAfterRenameDoesntCorruptTable).

A table's metadata is written by its clients, so it may name any file anywhere: only
files inside the table's own location are read or deleted. Everything else it names is
skipped, with the reason, and the purge's outcome lists what was skipped.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import fastavro

from icelog.domain.errors import BadRequestError
from icelog.domain.locations import Location
from icelog.domain.ports import FileIO, OutsideStorageError, UnreadableFileError

# How many skipped files an outcome lists by name (all of them are counted).
MAX_LISTED_SKIPS = 100


@dataclass
class PurgePlan:
    """What a purge deletes, in order, and what it leaves alone and why."""

    paths: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # location -> reason

    def skip(self, location: Any, reason: str) -> None:
        self.skipped.setdefault(str(location), reason)

    def skipped_summary(self) -> dict[str, Any]:
        """For the task's outcome: how many were skipped, the first ones by name."""
        listed = [
            {"location": loc, "reason": why}
            for loc, why in sorted(self.skipped.items())[:MAX_LISTED_SKIPS]
        ]
        return {"skipped-files": len(self.skipped), "skipped": listed}


class _Scope:
    """Decides which named files purge may touch: those inside the table's location, and
    not inside another table's or view's (one nested in it, or one it was nested in)."""

    def __init__(
        self, table_location: Location | None, others: Iterable[Location], plan: PurgePlan
    ) -> None:
        self.table = table_location
        # The purged table is gone from the read model: any of these, even at the very same
        # location (a table created there since), is another table.
        self.others = list(others)
        self.plan = plan

    def admit(self, location: Any) -> str | None:
        if not isinstance(location, str):
            self.plan.skip(location, "not a location")
            return None
        try:
            parsed = Location.parse(location, encoded_separators=True)
        except BadRequestError as exc:
            self.plan.skip(location, exc.message)
            return None
        if self.table is None or not self.table.contains(parsed):
            self.plan.skip(location, "outside the table's location")
            return None
        if any(other.contains(parsed) for other in self.others):
            self.plan.skip(location, "inside another table's or view's location")
            return None
        return location


def _avro_records(file_io: FileIO, location: str, plan: PurgePlan) -> Iterator[dict[str, Any]]:
    try:
        data = file_io.read(location)
    except FileNotFoundError:
        return
    except UnreadableFileError as exc:
        # Not read for good (not a regular file, too large, too slow): the files it names
        # stay. A storage outage (503) fails the attempt instead, to be retried.
        plan.skip(location, f"not read: {exc.reason}")
        return
    except OutsideStorageError as exc:
        plan.skip(location, exc.message)
        return
    try:
        yield from fastavro.reader(io.BytesIO(data))  # type: ignore[misc]
    except Exception as exc:  # a damaged or hostile file: the files it names stay
        plan.skip(location, f"not a readable Avro file ({type(exc).__name__})")


def reachable_files(
    metadata: dict[str, Any],
    metadata_location: str,
    file_io: FileIO,
    progress: Callable[[], None] | None = None,
    also_metadata: Iterable[str] = (),
    table_location: Location | None = None,
    other_locations: Iterable[Location] = (),
) -> PurgePlan:
    """All files the table's metadata references inside `table_location`, leaves first,
    metadata files last; the rest is skipped.

    Deleting in this order keeps an interrupted purge restartable: the metadata that
    leads to the remaining files is deleted only after them. `progress` is called after
    each manifest list or manifest read (a big table has thousands). `also_metadata` are
    older metadata files known otherwise (the catalog wrote them; the metadata-log keeps only
    the last `write.metadata.previous-versions-max`).
    """
    tick = progress or (lambda: None)
    plan = PurgePlan()
    scope = _Scope(table_location, other_locations, plan)
    data_files: set[str] = set()
    manifests: set[str] = set()
    manifest_lists: set[str] = set()
    for snapshot in _objects(metadata.get("snapshots")):
        manifest_list = snapshot.get("manifest-list")
        if manifest_list is not None and scope.admit(manifest_list):
            manifest_lists.add(manifest_list)
            for entry in _avro_records(file_io, manifest_list, plan):
                path = scope.admit(entry.get("manifest_path"))
                if path:
                    manifests.add(path)
            tick()
        for path in snapshot.get("manifests") or []:
            if scope.admit(path):
                manifests.add(path)
    for manifest in sorted(manifests):
        for entry in _avro_records(file_io, manifest, plan):
            data_file = entry.get("data_file") or {}
            path = scope.admit(data_file.get("file_path"))
            if path:
                data_files.add(path)
        tick()
    statistics = {
        path
        for key in ("statistics", "partition-statistics")
        for s in _objects(metadata.get(key))
        if "statistics-path" in s and (path := scope.admit(s["statistics-path"]))
    }
    metadata_files = {
        path
        for entry in _objects(metadata.get("metadata-log"))
        if (path := scope.admit(entry.get("metadata-file")))
    }
    metadata_files.update(p for p in also_metadata if scope.admit(p))
    metadata_files.discard(metadata_location)
    ordered: list[str] = []
    for group in (data_files, statistics, manifests, manifest_lists, metadata_files):
        ordered.extend(sorted(group - set(ordered)))
    # The current metadata file goes last: while it exists, a re-run finds everything else.
    if scope.admit(metadata_location):
        ordered.append(metadata_location)
    plan.paths = ordered
    return plan


def _objects(value: Any) -> list[dict[str, Any]]:
    """The objects of a metadata list field (anything else in it is ignored)."""
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def purge_files(paths: list[str], file_io: FileIO) -> tuple[int, int]:
    """Delete files; returns (deleted, already missing). Idempotent when re-run."""
    deleted = missing = 0
    for path in paths:
        if file_io.delete(path):
            deleted += 1
        else:
            missing += 1
    return deleted, missing

"""Find every file reachable from a table's metadata, for purge.

Purge deletes only what the metadata references — metadata files, manifest lists,
manifests, data and delete files, statistics — and never a whole directory: another
table may live below the same prefix (RCK dropAfterRenameDoesntCorruptTable).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import fastavro

from domain.ports import FileIO


def _avro_records(file_io: FileIO, location: str) -> Iterator[dict[str, Any]]:
    try:
        data = file_io.read(location)
    except FileNotFoundError:
        return
    yield from fastavro.reader(io.BytesIO(data))  # type: ignore[misc]


def reachable_files(
    metadata: dict[str, Any],
    metadata_location: str,
    file_io: FileIO,
    progress: Callable[[], None] | None = None,
    also_metadata: Iterable[str] = (),
) -> list[str]:
    """All files the table's metadata references, leaves first, metadata files last.

    Deleting in this order keeps an interrupted purge restartable: the metadata that
    leads to the remaining files is deleted only after them. `progress` is called after
    each manifest list or manifest read (a big table has thousands). `also_metadata` are
    older metadata files known otherwise (the catalog wrote them; the metadata-log keeps only
    the last `write.metadata.previous-versions-max`).
    """
    tick = progress or (lambda: None)
    data_files: set[str] = set()
    manifests: set[str] = set()
    manifest_lists: set[str] = set()
    for snapshot in metadata.get("snapshots", []):
        manifest_list = snapshot.get("manifest-list")
        if manifest_list:
            manifest_lists.add(manifest_list)
            for entry in _avro_records(file_io, manifest_list):
                path = entry.get("manifest_path")
                if isinstance(path, str):
                    manifests.add(path)
            tick()
        for path in snapshot.get("manifests", []) or []:
            manifests.add(path)
    for manifest in sorted(manifests):
        for entry in _avro_records(file_io, manifest):
            data_file = entry.get("data_file") or {}
            path = data_file.get("file_path")
            if isinstance(path, str):
                data_files.add(path)
        tick()
    statistics = {
        s["statistics-path"]
        for key in ("statistics", "partition-statistics")
        for s in metadata.get(key, []) or []
        if isinstance(s, dict) and "statistics-path" in s
    }
    metadata_files = {entry["metadata-file"] for entry in metadata.get("metadata-log", [])}
    metadata_files.update(also_metadata)
    metadata_files.discard(metadata_location)
    ordered: list[str] = []
    for group in (data_files, statistics, manifests, manifest_lists, metadata_files):
        ordered.extend(sorted(group - set(ordered)))
    # The current metadata file goes last: while it exists, a re-run finds everything else.
    ordered.append(metadata_location)
    return ordered


def purge_files(paths: list[str], file_io: FileIO) -> tuple[int, int]:
    """Delete files; returns (deleted, already missing). Idempotent when re-run."""
    deleted = missing = 0
    for path in paths:
        if file_io.delete(path):
            deleted += 1
        else:
            missing += 1
    return deleted, missing

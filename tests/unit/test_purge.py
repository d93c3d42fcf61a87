"""Purge finds every file a real table's metadata reaches, and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

from icelog.commands.storage.local import LocalFileIO
from icelog.commands.storage.purge import purge_files, reachable_files
from icelog.domain.locations import Location


def test_reachable_files_of_a_pyiceberg_table_are_exactly_its_files(tmp_path: Path) -> None:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("db")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", "c"]})
    table = catalog.create_table("db.t", data.schema)
    table.append(data)
    table.append(data)
    table.delete("id = 2")
    table = catalog.load_table("db.t")
    neighbour = tmp_path / "db" / "t_neighbour.txt"
    neighbour.write_text("not part of the table")
    metadata = json.loads(Path(table.metadata_location[len("file://") :]).read_text())
    io = LocalFileIO(Location.parse(f"file://{tmp_path}"))
    table_location = Location.parse(metadata["location"])
    plan = reachable_files(metadata, table.metadata_location, io, table_location=table_location)
    assert plan.skipped == {}
    paths = plan.paths
    on_disk = {p for p in (tmp_path / "db" / "t").rglob("*") if p.is_file()}
    assert {Path(p.replace("file://", "")) for p in paths} == on_disk
    # Data files come before the metadata that leads to them.
    assert paths[-1] == table.metadata_location
    deleted, missing = purge_files(paths, io)
    assert (deleted, missing) == (len(on_disk), 0)
    assert not [p for p in (tmp_path / "db" / "t").rglob("*") if p.is_file()]
    assert neighbour.exists()
    # Idempotent: a second run finds nothing left to delete and does not fail.
    assert purge_files(paths, io) == (0, len(paths))

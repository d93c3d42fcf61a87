"""`FileIO.holds_files` on local storage: whether a table placed at a location would lie
over files already there. Empty directories (what a purge leaves) hold nothing; any file,
link or other non-directory does; the walk follows no link and is bounded (a larger tree
counts as holding files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from icelog.commands.storage import local
from icelog.commands.storage.local import LocalFileIO
from icelog.domain.locations import Location


@pytest.fixture
def io(tmp_path: Path) -> LocalFileIO:
    (tmp_path / "wh").mkdir()
    return LocalFileIO(Location.parse(f"file://{tmp_path}/wh"))


def at(io: LocalFileIO, *parts: str) -> str:
    return str(io.root.child(*parts))


def test_absent_and_empty_directories_hold_nothing(io: LocalFileIO, tmp_path: Path) -> None:
    assert not io.holds_files(at(io, "ns", "t"))
    (tmp_path / "wh/ns/t/metadata").mkdir(parents=True)
    (tmp_path / "wh/ns/t/data/a=1").mkdir(parents=True)
    assert not io.holds_files(at(io, "ns", "t"))
    assert not io.holds_files(at(io, "ns"))


def test_a_file_anywhere_below_is_found(io: LocalFileIO, tmp_path: Path) -> None:
    deep = tmp_path / "wh/ns/t/data/a=1/b=2"
    deep.mkdir(parents=True)
    (deep / "0.parquet").write_bytes(b"x")
    assert io.holds_files(at(io, "ns", "t"))
    assert io.holds_files(at(io, "ns"))
    assert not io.holds_files(at(io, "ns", "t-other"))


@pytest.mark.attack
def test_links_count_as_holding_and_are_not_followed(io: LocalFileIO, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "wh/ns").mkdir()
    os.symlink(outside, tmp_path / "wh/ns/t")
    assert io.holds_files(at(io, "ns", "t"))  # the location itself is a link
    (tmp_path / "wh/ns2").mkdir()
    os.symlink(outside, tmp_path / "wh/ns2/link")
    assert io.holds_files(at(io, "ns2"))  # a link below


def test_a_file_where_the_directory_would_be(io: LocalFileIO, tmp_path: Path) -> None:
    (tmp_path / "wh/ns").mkdir()
    (tmp_path / "wh/ns/t").write_bytes(b"x")
    assert io.holds_files(at(io, "ns", "t"))
    assert io.holds_files(at(io, "ns", "t", "below"))


@pytest.mark.attack
def test_the_walk_is_bounded(
    io: LocalFileIO, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More empty directories than the walk looks at: answered "holds" (the safe side)."""
    monkeypatch.setattr(local, "MAX_WALK_ENTRIES", 5)
    for i in range(6):
        (tmp_path / f"wh/ns/t/d{i}").mkdir(parents=True)
    assert io.holds_files(at(io, "ns", "t"))

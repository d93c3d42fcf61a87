"""The S3 FileIO adapter against an S3-compatible server (moto in server mode)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from icelog.commands.storage.purge import purge_files
from icelog.commands.storage.s3 import S3Access, S3FileIO, client_for, split_location
from icelog.domain.errors import BadRequestError, ConflictError
from icelog.domain.locations import Location
from tests.support.moto_server import access_with_bucket, moto_s3

SECRET = "s3cr3t-value-never-shown"


@pytest.fixture(scope="module")
def access(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Access]:
    with moto_s3(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        yield access_with_bucket(endpoint, "AKIDEXAMPLE", SECRET, "lake")


def test_locations_are_parsed_with_their_aliases() -> None:
    assert split_location("s3://lake/a/b.json") == ("lake", "a/b.json")
    assert split_location("s3a://lake/a") == ("lake", "a")
    assert split_location("s3n://lake/a") == ("lake", "a")
    with pytest.raises(BadRequestError):
        split_location("file:///tmp/x")


def test_write_read_exists_delete(access: S3Access) -> None:
    io = S3FileIO(client_for(access), Location.parse("s3://lake"))
    location = "s3://lake/wh/db/t/metadata/00000-a.metadata.json"
    assert not io.exists(location)
    io.write_new(location, b'{"format-version": 2}')
    assert io.exists(location)
    assert io.read(location) == b'{"format-version": 2}'
    with pytest.raises(ConflictError):
        io.write_new(location, b"{}")  # never overwritten
    assert io.read(location) == b'{"format-version": 2}'
    assert io.delete(location) is True
    assert io.delete(location) is False
    with pytest.raises(FileNotFoundError):
        io.read(location)


def test_purge_counts_deleted_and_missing_objects(access: S3Access) -> None:
    io = S3FileIO(client_for(access), Location.parse("s3://lake"))
    paths = [f"s3://lake/wh/db/p/data/{n}.parquet" for n in range(5)]
    for path in paths[:3]:
        io.write_new(path, b"x")
    assert purge_files(paths, io) == (3, 2)
    assert not any(io.exists(p) for p in paths)


def test_the_secret_never_shows_in_reprs_or_errors(access: S3Access, tmp_path: Path) -> None:
    assert SECRET not in repr(access)
    io = S3FileIO(client_for(access), Location.parse("s3://no-such-bucket"))
    with pytest.raises(Exception) as raised:
        io.write_new("s3://no-such-bucket/x", b"x")
    assert SECRET not in str(raised.value)

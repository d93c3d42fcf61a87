"""The command side's cache of parsed metadata documents stays bounded."""

from __future__ import annotations

from icelog.commands.application import MetadataCache


def doc(n: int) -> dict[str, int]:
    return {"n": n}


def test_only_the_newest_document_of_a_table_is_kept() -> None:
    cache = MetadataCache()
    cache.put("file:///w/t/metadata/00001-a.metadata.json", doc(1), 10)
    cache.put("file:///w/u/metadata/00001-b.metadata.json", doc(9), 10)
    cache.put("file:///w/t/metadata/00002-c.metadata.json", doc(2), 10)
    assert cache.get("file:///w/t/metadata/00001-a.metadata.json") is None
    assert cache.get("file:///w/t/metadata/00002-c.metadata.json") == doc(2)
    assert cache.get("file:///w/u/metadata/00001-b.metadata.json") == doc(9)


def test_bounded_by_json_bytes_least_recently_used_first() -> None:
    cache = MetadataCache(max_bytes=100)
    for i in range(5):
        cache.put(f"file:///w/t{i}/metadata/00001.metadata.json", doc(i), 30)
    kept = [i for i in range(5) if cache.get(f"file:///w/t{i}/metadata/00001.metadata.json")]
    assert kept == [2, 3, 4]
    # Reading t2 makes t3 the least recently used one.
    cache.get("file:///w/t2/metadata/00001.metadata.json")
    cache.put("file:///w/t9/metadata/00001.metadata.json", doc(9), 30)
    assert cache.get("file:///w/t3/metadata/00001.metadata.json") is None
    assert cache.get("file:///w/t2/metadata/00001.metadata.json") == doc(2)


def test_bounded_by_entries_and_a_lone_large_document_stays() -> None:
    cache = MetadataCache(max_entries=2, max_bytes=100)
    for i in range(3):
        cache.put(f"file:///w/t{i}/metadata/1.metadata.json", doc(i), 1)
    assert cache.get("file:///w/t0/metadata/1.metadata.json") is None
    cache.put("file:///w/big/metadata/1.metadata.json", doc(7), 1000)
    assert cache.get("file:///w/big/metadata/1.metadata.json") == doc(7)
    assert cache.get("file:///w/t2/metadata/1.metadata.json") is None
    # Putting the same location again does not count it twice.
    cache.put("file:///w/big/metadata/1.metadata.json", doc(7), 1000)
    cache.put("file:///w/s/metadata/1.metadata.json", doc(1), 1)
    assert cache.get("file:///w/s/metadata/1.metadata.json") == doc(1)

"""The loadTable document cache is bounded by bytes and keyed by immutable versions."""

from __future__ import annotations

from icelog.projections.fast_reads import DocumentCache


def test_evicts_least_recently_used_beyond_the_byte_bound() -> None:
    cache = DocumentCache(max_bytes=10)
    cache.put(("a", 1), b"12345")
    cache.put(("b", 1), b"12345")
    assert cache.get(("a", 1)) == b"12345"  # a is now most recent
    cache.put(("c", 1), b"123")
    assert cache.get(("b", 1)) is None
    assert cache.get(("a", 1)) == b"12345" and cache.get(("c", 1)) == b"123"
    cache.put(("huge", 1), b"x" * 11)
    assert cache.get(("huge", 1)) is None
    assert cache.get(("a", 2)) is None, "another version is another entry"


def test_keeps_only_the_newest_version_of_each_tabular() -> None:
    cache = DocumentCache(max_bytes=100)
    cache.put(("a", 1), b"v1")
    cache.put(("b", 1), b"b1")
    cache.put(("a", 2), b"v2")
    assert cache.get(("a", 1)) is None, "a newer version replaces the older one"
    assert cache.get(("a", 2)) == b"v2" and cache.get(("b", 1)) == b"b1"
    # A request that raced a commit brings back an older document: not cached over it.
    cache.put(("a", 1), b"v1")
    assert cache.get(("a", 1)) is None and cache.get(("a", 2)) == b"v2"


def test_bytes_stay_within_the_bound_under_constant_commits() -> None:
    cache = DocumentCache(max_bytes=1_000)
    for version in range(1, 200):
        cache.put(("hot", version), b"x" * 300)
        cache.put(("cold", 1), b"y" * 300)
    assert cache.get(("hot", 199)) == b"x" * 300
    assert cache.get(("cold", 1)) == b"y" * 300, "one document per table fits: nothing evicted"
    cache.put(("third", 1), b"z" * 500)
    assert cache.get(("hot", 199)) is None, "beyond the bound the least recently used goes"
    assert cache.get(("third", 1)) == b"z" * 500

"""The loadTable document cache is bounded by bytes and keyed by immutable versions."""

from __future__ import annotations

from projections.fast_reads import DocumentCache


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

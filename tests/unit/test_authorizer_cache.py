"""The decision cache: entries live their time, and a check made from the cache alone
never reads (it signals `WouldRead`, so the edge reruns it where reading may block)."""

from __future__ import annotations

import threading
import time

import pytest

from icelog.api.auth.authorizer import TtlCache, WouldRead, from_cache_only, watching_staleness


def test_an_entry_is_read_again_after_its_time() -> None:
    cache = TtlCache(ttl_s=0.05)
    loads: list[int] = []

    def load() -> int:
        loads.append(1)
        return len(loads)

    assert cache.get("k", load) == 1
    assert cache.get("k", load) == 1
    time.sleep(0.06)
    assert cache.get("k", load) == 2
    assert cache.get("k", load, fresh=True) == 3


def test_cache_only_answers_from_what_is_held_and_never_loads() -> None:
    cache = TtlCache(ttl_s=60)
    cache.get("held", lambda: "yes")

    def must_not_load() -> str:
        raise AssertionError("read while cache-only")

    assert from_cache_only(lambda: cache.get("held", must_not_load)) == "yes"
    with pytest.raises(WouldRead):
        from_cache_only(lambda: cache.get("missing", must_not_load))
    with pytest.raises(WouldRead):
        from_cache_only(lambda: cache.get("held", must_not_load, fresh=True))
    assert cache.get("missing", lambda: "loaded") == "loaded"  # outside, reads as usual


def test_a_full_cache_starts_again_rather_than_grow() -> None:
    cache = TtlCache(ttl_s=60, max_entries=3)
    for n in range(10):
        cache.get(n, lambda: 0)
    assert len(cache._entries) <= 3


def test_while_one_caller_reads_an_expired_entry_again_the_others_keep_the_old_answer() -> None:
    cache = TtlCache(ttl_s=0.01)
    cache.get("k", lambda: "old")
    time.sleep(0.02)
    reading = threading.Event()
    release = threading.Event()

    def slow() -> str:
        reading.set()
        release.wait(5)
        return "new"

    refresher = threading.Thread(target=lambda: cache.get("k", slow))
    refresher.start()
    assert reading.wait(5)

    def must_not_load() -> str:
        raise AssertionError("a second read of the same entry")

    assert cache.get("k", must_not_load) == "old"  # no stampede: the old answer serves
    # A decision made from that old answer is marked: the edge must not keep it as new.
    with watching_staleness() as stale:
        assert cache.get("k", must_not_load) == "old"
    assert stale
    release.set()
    refresher.join(5)
    assert cache.get("k", must_not_load) == "new"
    with watching_staleness() as stale:
        assert cache.get("k", must_not_load) == "new"
    assert not stale


def test_peek_gives_only_current_entries_and_never_loads() -> None:
    cache = TtlCache(ttl_s=0.05)
    assert cache.peek("k") is None
    cache.put("k", ("caps",))
    assert cache.peek("k") == ("caps",)
    time.sleep(0.06)
    assert cache.peek("k") is None  # past its time: the caller decides afresh
    cache.put("k", 1)
    cache.clear()
    assert cache.peek("k") is None

"""The decision cache: entries live their time, and a check made from the cache alone
never reads (it signals `WouldRead`, so the edge reruns it where reading may block)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from icelog.api.auth.authorizer import TtlCache, WouldRead, from_cache_only, watching_staleness


class HeldLoad:
    """`load_with(load)` on a thread of its own, where `load` holds (once it began) until
    `let_go()`, then answers `answer`, or raises it when it is an exception."""

    def __init__(self, load_with: Callable[[Callable[[], str]], object], answer: str | Exception):
        self.reading, self.release = threading.Event(), threading.Event()

        def load() -> str:
            self.reading.set()
            self.release.wait(5)
            if isinstance(answer, Exception):
                raise answer
            return answer

        self.thread = threading.Thread(target=load_with, args=(load,))
        self.thread.start()
        assert self.reading.wait(5)

    def let_go(self) -> None:
        self.release.set()
        self.thread.join(5)


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


@pytest.mark.attack
def test_no_entry_is_served_past_its_time_the_others_wait_for_the_one_reload() -> None:
    """The expired answer used to be served to every caller while one reloaded it, so a user
    who kept requesting kept a revoked right."""
    cache = TtlCache(ttl_s=0.01)
    cache.get("k", lambda: "old")
    time.sleep(0.02)
    refresher = HeldLoad(lambda load: cache.get("k", load), "new")

    def must_not_load() -> str:
        raise AssertionError("a second read of the same entry")

    answers: list[str] = []
    waiter = threading.Thread(target=lambda: answers.append(cache.get("k", must_not_load)))
    waiter.start()
    time.sleep(0.05)
    assert answers == []  # not "old": it waits for the reload
    refresher.let_go()
    waiter.join(5)
    assert answers == ["new"]  # and no stampede: one read
    with pytest.raises(WouldRead):  # on the event loop, an expired entry is a read
        time.sleep(0.02)
        from_cache_only(lambda: cache.get("k", must_not_load))


@pytest.mark.attack
def test_a_refusal_removes_an_allowed_entry() -> None:
    cache = TtlCache(ttl_s=0.01)
    cache.get("allowed", lambda: "yes")
    time.sleep(0.02)

    def refused() -> str:
        raise PermissionError("revoked")

    with pytest.raises(PermissionError):
        cache.get("allowed", refused)
    assert "allowed" not in cache._entries
    with pytest.raises(PermissionError):  # every later caller is refused, none served "yes"
        cache.get("allowed", refused)


@pytest.mark.attack
def test_a_waiter_on_a_refused_reload_reads_again_and_is_refused_too() -> None:
    cache = TtlCache(ttl_s=0.01)
    cache.get("allowed", lambda: "yes")
    time.sleep(0.02)
    errors: list[BaseException] = []

    def call(load: object) -> None:
        try:
            cache.get("allowed", load)  # type: ignore[arg-type]
        except PermissionError as exc:
            errors.append(exc)

    first = HeldLoad(call, PermissionError("revoked"))
    second = threading.Thread(target=call, args=(lambda: (_ for _ in ()).throw(PermissionError()),))
    second.start()
    first.let_go()
    second.join(5)
    assert len(errors) == 2


@pytest.mark.attack
def test_a_load_begun_before_clear_does_not_store_its_older_answer() -> None:
    cache = TtlCache(ttl_s=60)
    loader = HeldLoad(lambda load: cache.get("k", load), "allowed (read before the revoke)")
    cache.clear()  # this process revoked meanwhile
    answers: list[str] = []
    waiter = threading.Thread(target=lambda: answers.append(cache.get("k", lambda: "refused")))
    waiter.start()
    waiter.join(5)
    assert answers == ["refused"]  # it did not wait for the older read
    loader.let_go()
    assert cache.get("k", lambda: "refused") == "refused"  # the older answer was not kept


def test_a_waiter_reads_itself_when_the_reload_takes_too_long() -> None:
    cache = TtlCache(ttl_s=60, wait_s=0.05)
    loader = HeldLoad(lambda load: cache.get("k", load), "late")
    assert cache.get("k", lambda: "own") == "own"
    loader.let_go()


def test_a_decision_kept_inside_a_watch_expires_with_the_oldest_answer_it_used() -> None:
    cache = TtlCache(ttl_s=0.2)
    cache.get("grant", lambda: "yes")
    time.sleep(0.15)
    with watching_staleness() as seen:
        assert cache.get("grant", lambda: "no") == "yes"
        cache.put("route", "yes", read_at=seen.oldest())
    assert cache.peek("route") == "yes"
    time.sleep(0.07)  # the grant's entry ran out: so did the decision made from it
    assert cache.peek("route") is None


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


@pytest.mark.attack
def test_an_entry_built_from_cached_entries_expires_with_the_oldest_of_them() -> None:
    """A per-route "allowed" built late in a decision's life from the cached decision is
    not timed from its own load: it would stretch the decision to about twice the TTL."""
    cache = TtlCache(ttl_s=0.2)
    cache.get("decision", lambda: "allowed")
    time.sleep(0.15)
    with watching_staleness() as seen:
        built = cache.get("route", lambda: cache.get("decision", lambda: "refused"))
    assert built == "allowed"
    assert seen.oldest() is not None and cache.peek("route") == "allowed"
    time.sleep(0.07)  # the decision ran out: so did the entry made from it
    assert cache.peek("route") is None
    assert cache.get("route", lambda: cache.get("decision", lambda: "refused")) == "refused"


@pytest.mark.attack
def test_a_put_of_what_was_read_before_a_clear_is_dropped() -> None:
    cache = TtlCache(ttl_s=60.0)
    with watching_staleness() as seen:
        cache.get("decision", lambda: "allowed")
        cache.clear()  # a grant change in this process, while the decision was in use
        cache.put("route", "allowed", read_at=seen.oldest(), generation=seen.generation(cache))
    assert cache.peek("route") is None
    with watching_staleness() as seen:
        cache.get("decision", lambda: "allowed")
        cache.put("route", "allowed", read_at=seen.oldest(), generation=seen.generation(cache))
    assert cache.peek("route") == "allowed"

"""Turns: one holder per key at a time, and no deadlock when commands take several keys."""

from __future__ import annotations

import threading
import time

from icelog.commands.turns import Turns


def test_one_holder_per_key_and_other_keys_proceed() -> None:
    turns = Turns(stripes=64)
    inside: list[str] = []
    overlap: list[bool] = []

    def hold(key: str, tag: str) -> None:
        with turns.take([key]):
            overlap.append(bool(inside))
            inside.append(tag)
            time.sleep(0.02)
            inside.remove(tag)

    threads = [threading.Thread(target=hold, args=("k", str(i))) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlap == [False] * 5

    # A different key (another stripe: ints hash to themselves) is not held up.
    with turns.take([1]):
        done = threading.Event()

        def other() -> None:
            with turns.take([2]):
                done.set()

        threading.Thread(target=other).start()
        assert done.wait(1)


def test_several_keys_in_any_order_never_deadlock() -> None:
    turns = Turns(stripes=8)
    keys = [f"t{i}" for i in range(6)]
    finished = []

    def work(order: list[str]) -> None:
        for _ in range(200):
            with turns.take(order):
                pass
        finished.append(1)

    threads = [
        threading.Thread(target=work, args=(keys,)),
        threading.Thread(target=work, args=(list(reversed(keys)),)),
        threading.Thread(target=work, args=(keys[::2] + keys[1::2],)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert len(finished) == 3

"""Turns: commands on the same catalog object run one at a time within a process.

Two writers of one aggregate can never both land (the second conflicts on its version),
so letting them race only burns attempts: each loser reloads, re-applies and retries with
back-off. Worse, a command that stages more work per attempt kept losing to quicker ones
and starved (a multi-table transaction behind single-table commits: 100 attempts, then
503). Taking turns per object removes the race within a process; between replicas the
version check and the retries still decide.

Locks are striped by a hash of the key, so the set stays fixed whatever the number of
tables; several stripes are always taken in ascending order, so two commands that need
overlapping stripes cannot deadlock. Each `Turns` is one independent set: a command holds
turns of at most one set at a time.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Hashable, Iterable, Iterator

STRIPES = 1024


class Turns:
    def __init__(self, stripes: int = STRIPES) -> None:
        self._locks = tuple(threading.Lock() for _ in range(stripes))

    @contextlib.contextmanager
    def take(self, keys: Iterable[Hashable]) -> Iterator[None]:
        stripes = sorted({hash(key) % len(self._locks) for key in keys})
        with contextlib.ExitStack() as stack:
            for stripe in stripes:
                stack.enter_context(self._locks[stripe])
            yield


# Changes to a table's or view's metadata (updateTable, transactions/commit, replaceView).
TABULAR_TURNS = Turns()

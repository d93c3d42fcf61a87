"""A purge slower than its task's lease keeps the lease: the deletes are paced by
`purge_delete_rate`, and a wait between two deletes longer than the lease used to pass
without a heartbeat, so another worker could take the task over at every attempt. Confirmed:
the gap between heartbeats was 1/rate seconds (2.5 s here), so below one file per lease
(30 s by default) the lease ran out before each delete."""

from __future__ import annotations

import itertools
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest

from icelog.commands.storage.purge import PurgePlan
from icelog.commands.tasks import TaskCommands

pytestmark = pytest.mark.attack


class _Files:
    def delete(self, path: str) -> bool:
        return True


def test_the_lease_is_renewed_while_a_slow_purge_waits() -> None:
    beats: list[float] = []
    plan = PurgePlan(paths=["file:///w/t/a", "file:///w/t/b"])
    commands = cast(Any, SimpleNamespace(purge_delete_rate=0.4))  # 2.5 s between files
    started = time.monotonic()
    deleted, missing = TaskCommands._delete(
        commands, plan, cast(Any, _Files()), cast(Any, lambda: beats.append(time.monotonic()))
    )
    assert (deleted, missing) == (2, 0)
    marks = [started, *beats]
    longest = max(b - a for a, b in itertools.pairwise(marks))
    assert longest < 1.5, f"{longest:.1f} s without a heartbeat"

"""`icelog` with a kill switch, for tests of a server that dies mid-commit.

    python -m tests.support.dying_server N serve --host ... --port ...

Runs the `icelog` command line with an observer on every group committer of the process:
right after the N-th append that carries a table commit is in the log, and before any
caller hears of it, the process exits with 137 as under `kill -9` (no cleanup, no answer).
The product has no such switch; it only offers the committer's `after_append` observer.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from icelog.commands import group_commit

TABLE_COMMITTED = "icelog.table.committed.v1"


def die_after_table_commits(count: int) -> Callable[[Sequence[Any]], None]:
    """An `after_append` observer that ends the process after `count` table commits."""
    left = count

    def observe(events: Sequence[Any]) -> None:
        nonlocal left
        if any(getattr(event, "TOPIC", "") == TABLE_COMMITTED for event in events):
            left -= 1
            if left == 0:
                os._exit(137)

    return observe


def install(count: int) -> None:
    """Give every group committer made from now on the observer (one count per process)."""
    observe = die_after_table_commits(count)
    made = group_commit.GroupCommitter.__init__

    def init(self: group_commit.GroupCommitter, *args: Any, **kwargs: Any) -> None:
        kwargs["after_append"] = observe
        made(self, *args, **kwargs)

    group_commit.GroupCommitter.__init__ = init  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    from icelog.api.cli import main as icelog

    install(int(argv[0]))
    return icelog(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

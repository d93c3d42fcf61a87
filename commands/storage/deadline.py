"""The deadline of a warehouse access check, shared by every kind that probes a remote store.

A store that answers slowly enough never trips a per-read timeout (a dripping socket), so
the check runs in a thread the request stops waiting for. A check still running at the
deadline fails with the words the kind uses when no storage service answered: a slow host
must not be told apart from a closed port (docs/security.md: a check must not map a
network).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from icelog.domain.errors import BadRequestError

ACCESS_CHECK_DEADLINE_S = 20.0


def within_deadline(
    check: Callable[[], None],
    *,
    no_answer: str,
    thread_name: str,
    deadline_s: float = ACCESS_CHECK_DEADLINE_S,
) -> None:
    """Run `check`, waiting at most `deadline_s` for it: what it raised is raised here; a
    check still running then is 400 `Storage validation failed: <no_answer>`."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            check()
        except BaseException as exc:  # handed to the waiting request
            outcome.append(exc)
        else:
            outcome.append(None)

    # A daemon thread: a probe stuck on a dripping socket holds neither the request nor the
    # process's exit.
    worker = threading.Thread(target=run, name=thread_name, daemon=True)
    worker.start()
    worker.join(deadline_s)
    if not outcome:
        raise BadRequestError(f"Storage validation failed: {no_answer}")
    if outcome[0] is not None:
        raise outcome[0]

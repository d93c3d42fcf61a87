"""What is slow to build and safe to share (SDK clients, FileIOs, token sources), built once
per key and shared by every warehouse that asks for the same: the registry's FileIOs, each
kind's clients.

The cache is bounded the simple way: when full, it is emptied. What it drops costs only a
rebuild (tens of milliseconds for a boto3 client), and a key holds everything that shapes
what it built, so a changed profile or credential gets a new one rather than a stale one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BuildOnceCache(Generic[K, V]):
    """Values by key, each built on first use; safe to share between threads."""

    def __init__(self, max_entries: int) -> None:
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: dict[K, V] = {}

    def get(self, key: K, build: Callable[[], V]) -> V:
        """The value kept for `key`, or the one `build` makes (then kept). Two threads that
        miss at once may both build; both get the one kept."""
        with self._lock:
            found = self._entries.get(key)
        if found is not None:
            return found
        # Built outside the lock: one slow build must not hold up every other key.
        built = build()
        with self._lock:
            if len(self._entries) >= self._max_entries:
                self._entries.clear()
            return self._entries.setdefault(key, built)

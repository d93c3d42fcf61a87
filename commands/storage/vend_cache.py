"""The in-memory cache of vended credentials every vending kind keeps (S3's STS credentials,
ADLS's SAS tokens, GCS's downscoped tokens).

An answer is reused during the first half of its lifetime only, so that a client always gets
credentials that stay valid for at least half of theirs, and `/credentials` called again
after that gets new ones. The cache is bounded: past `max_entries` the oldest stored entry
goes. Its lock guards only the entries, never the call that vends: two concurrent misses
for one key may both vend; both answers are valid and the later one stays. Serialising per
key would make every request wait on the slowest round trip instead.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, replace

from icelog.commands.storage.kind import VendedCredentials


@dataclass(frozen=True)
class _Entry:
    credentials: VendedCredentials
    reuse_until: float  # the vendor's clock, in seconds: half of the lifetime past the vend


class VendCache:
    """Vended credentials by a key that holds everything that shapes them (so that a profile
    or credential change is never answered from a stale entry); safe to share between
    threads. Times are the vendor's clock, in seconds."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()

    def get(self, key: Hashable, now: float) -> VendedCredentials | None:
        """A copy of the credentials stored for `key`, while still in the first half of
        their lifetime; None (and the entry dropped when past it) otherwise."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if now < entry.reuse_until:
                return _copy(entry.credentials)
            del self._entries[key]
        return None

    def put(
        self, key: Hashable, credentials: VendedCredentials, *, now: float, lifetime_s: float
    ) -> VendedCredentials:
        """Store `credentials`, vended at `now` and valid `lifetime_s` seconds; returns the
        copy to hand out."""
        with self._lock:
            self._entries[key] = _Entry(credentials, now + lifetime_s / 2)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
        return _copy(credentials)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _copy(credentials: VendedCredentials) -> VendedCredentials:
    # The cached config must not change if a caller adds keys to the one it got.
    return replace(credentials, config=dict(credentials.config))

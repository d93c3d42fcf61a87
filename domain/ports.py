"""Ports the write side needs from the outside world (implemented in commands/storage)."""

from __future__ import annotations

from typing import Any, Protocol
from uuid import UUID

from icelog.domain.errors import BadRequestError
from icelog.domain.locations import Location


class OutsideStorageError(BadRequestError):
    """A location outside the storage a FileIO serves: it is never read, written or deleted."""


class UnreadableFileError(Exception):
    """A file that exists but is not read: not a regular file, a symbolic link, too large,
    too slow, or refused by the store. `reason` is for the server log, never for clients
    (the same answer for every cause keeps the storage from being probed)."""

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(f"{location}: {reason}")
        self.location = location
        self.reason = reason


class FileIO(Protocol):
    """Object storage for one warehouse, confined to its root: a location outside it is an
    OutsideStorageError before any I/O. Metadata files are written and read through it."""

    @property
    def root(self) -> Location:
        """The warehouse's base location; nothing outside it is touched."""

    def write_new(self, location: str, data: bytes) -> None:
        """Write a file that must not exist yet (metadata file names are unique)."""

    def read(self, location: str) -> bytes:
        """Read a whole regular file, bounded in size and time; FileNotFoundError when it is
        absent, UnreadableFileError when it is there but not read."""

    def delete(self, location: str) -> bool:
        """Delete a file; returns False when it was already gone."""

    def exists(self, location: str) -> bool:
        """True when the file exists."""

    def holds_files(self, location: str) -> bool:
        """True when any file lies below `location` (a directory, a key prefix): whether a
        table placed there would cover files already in storage. Bounded: one listing of
        at most one key (S3), a walk of a bounded number of entries (local), which answers
        True when it stops early. Errors as for `read`."""


class LocationIndex(Protocol):
    """Answers which live table or view, if any, overlaps a location in a warehouse."""

    def __call__(self, warehouse_id: str, location: str) -> str | None:
        """Return the dotted name of an overlapping tabular, or None."""


class TaskLeaseStore(Protocol):
    """Leases on due tasks, so that several worker processes share one queue."""

    def claim(self, worker: str, *, now_ms: int, lease_ms: int, limit: int) -> list[str]:
        """Lease up to `limit` due tasks nobody holds; their ids."""

    def renew(self, task_id: str, worker: str, *, until_ms: int) -> bool:
        """Extend a held lease; False when it was lost."""

    def release(self, task_id: str, worker: str) -> None:
        """Give a lease up."""

    def next_due_ms(self) -> int | None:
        """When the earliest open task falls due."""


class SecretVault(Protocol):
    """Storage credentials, kept encrypted outside the event log (projections/secrets.py)."""

    def put(self, value: dict[str, Any]) -> UUID:
        """Store a secret; its new id."""

    def get(self, secret_id: UUID) -> dict[str, Any] | None:
        """A stored secret, or None when there is none with that id."""

    def delete(self, secret_id: UUID) -> None:
        """Forget a secret (no error when it is gone)."""

    def retire(self, secret_id: UUID, after_s: float) -> None:
        """Forget a secret once `after_s` seconds have passed (replicas may still use it)."""

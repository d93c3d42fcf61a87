"""The event-sourced application every command group runs in: the event store, the
repository, saving (group commit, retries, Idempotency-Key landing) and the metadata
file I/O the groups share. The command groups (commands/catalog.py) hold one of these;
none of them is a subclass of it."""

from __future__ import annotations

import gzip
import logging
import random
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

import orjson
from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.domain import Aggregate

from icelog.commands.group_commit import ConcurrentChange, GroupCommitter
from icelog.commands.storage import StorageLimits, file_io_for
from icelog.domain.cancellation import check_cancelled
from icelog.domain.claims import NameClaim
from icelog.domain.errors import (
    BadRequestError,
    NoSuchWarehouseError,
    NotFoundError,
    ServiceUnavailableError,
)
from icelog.domain.idempotency import HeldClaim, IdempotencyRecord, IdempotentReplay, held_claim
from icelog.domain.identifiers import PROPERTIES_HINT_PREFIX
from icelog.domain.json_limits import check_json_depth
from icelog.domain.namespace import Namespace
from icelog.domain.ownership import GrantsEnded, grants_ended_by
from icelog.domain.ports import FileIO, OutsideStorageError, SecretVault, UnreadableFileError
from icelog.domain.project import Project
from icelog.domain.table import Table
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse

log = logging.getLogger("icelog.commands")

A = TypeVar("A", bound=Aggregate)
R = TypeVar("R")

# Server-side retries when a concurrent writer appended first to an aggregate we touched.
# Each retry reloads and re-checks everything, so a retry is only a fresh attempt.
MAX_ATTEMPTS = 100
# How long a replica may use a warehouse's storage profile before re-reading it.
STORAGE_PROFILE_TTL_S = 2.0


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class WarehouseStorage:
    """A warehouse as a create sees it: where its tables go and how they are written."""

    id: UUID
    storage_profile: dict[str, Any]

    @property
    def base_location(self) -> str:
        return str(self.storage_profile["base-location"])


class MetadataCache:
    """Parsed metadata documents by location. Metadata files are immutable once written,
    so an entry can never be stale; only memory bounds the cache.

    A commit starts from its table's current document, so only the newest document of
    each metadata directory is kept: holding every version cost ~250 MB per process after
    a few hundred commits on one large table (a parsed document takes several times its
    JSON size, and 512 versions of it were kept). Beyond that, at most `max_entries`
    documents and `max_bytes` of their JSON, least recently used out first (the newest
    one always stays, however large)."""

    def __init__(self, max_entries: int = 512, max_bytes: int = 32 << 20) -> None:
        self._entries: OrderedDict[str, tuple[dict[str, Any], int]] = OrderedDict()
        self._newest: dict[str, str] = {}  # metadata directory -> its cached location
        self._bytes = 0
        self._max = max_entries
        self._max_bytes = max_bytes
        self._lock = threading.Lock()

    def get(self, location: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._entries.get(location)
            if found is None:
                return None
            self._entries.move_to_end(location)
            return found[0]

    def put(self, location: str, metadata: dict[str, Any], size: int) -> None:
        """`size`: the document's JSON length, the measure of its memory."""
        directory = location.rpartition("/")[0]
        with self._lock:
            previous = self._newest.get(directory)
            if previous is not None and previous != location:
                self._drop(previous)
            self._drop(location)
            self._entries[location] = (metadata, size)
            self._newest[directory] = location
            self._bytes += size
            while len(self._entries) > 1 and (
                len(self._entries) > self._max or self._bytes > self._max_bytes
            ):
                self._drop(next(iter(self._entries)))

    def _drop(self, location: str) -> None:
        found = self._entries.pop(location, None)
        if found is None:
            return
        self._bytes -= found[1]
        directory = location.rpartition("/")[0]
        if self._newest.get(directory) == location:
            del self._newest[directory]


def _metadata_location(hints: dict[str, bytes] | None) -> str | None:
    """The metadata file an append names, when it names exactly one (its answer's): hints
    are documents by metadata location, and namespace properties by a key of their own."""
    found = [key for key in hints or () if not key.startswith(PROPERTIES_HINT_PREFIX)]
    return found[0] if len(found) == 1 else None


def gunzip_bounded(data: bytes, limit: int) -> bytes:
    """Unpack gzip data of at most `limit` bytes unpacked (OSError beyond)."""
    unpacker = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    out = unpacker.decompress(data, limit + 1)
    if len(out) > limit or unpacker.unconsumed_tail:
        raise OSError(f"gzip data unpacks to more than {limit} bytes")
    return out


class CatalogApplication(Application[UUID]):
    """One application, one ordered stream: the whole catalog's history in one log."""

    # The library names an application after its class unless told otherwise, and
    # the name is stored format: it names the PostgreSQL tables (icelog_events, ...).
    name = "icelog"

    snapshotting_intervals = {  # noqa: RUF012 - the library reads this class attribute
        Table: 100,
        View: 100,
        Namespace: 200,
        NameClaim: 100,
        Warehouse: 200,
        Project: 200,
    }

    # Observability hooks, no-ops unless the composition root sets them (api/metrics.py):
    # a server-side retry after a concurrent change; one append transaction (seconds,
    # commands). Nothing is checked through them, so a catalog without metrics is whole.
    on_commit_conflict: Callable[[], None] = staticmethod(lambda: None)
    on_append: Callable[[float, int], None] = staticmethod(lambda _seconds, _commands: None)
    # Told after an append whose events ended grants (an object or principal gone: domain/
    # ownership.py `grants_ended_by`), also when the append's outcome is unknown: the api
    # layer's decision cache forgets them (a task's expiry runs outside any request). A
    # notification, not a check: without authentication there is no cache to tell.
    on_grants_ended: Callable[[list[GrantsEnded]], None] = staticmethod(lambda _ended: None)

    def __init__(
        self,
        env: dict[str, str] | None = None,
        *,
        secrets: SecretVault | None = None,
        storage_limits: StorageLimits | None = None,
    ) -> None:
        """`secrets`: storage credentials (encrypted, outside the log), handed in by the
        composition root because commands/ cannot import projections/; None: only file
        warehouses work. `storage_limits`: what reading one file may cost (settings)."""
        super().__init__(env=env)
        self.secrets = secrets
        self.storage_limits = storage_limits or StorageLimits()
        self.metadata_cache = MetadataCache()
        self._storage_cache: dict[UUID, tuple[float, dict[str, Any]]] = {}
        # A lambda, not the bound hook: the hook may be set after construction.
        self._committer = GroupCommitter(self, on_append=lambda s, n: self.on_append(s, n))  # noqa: PLW0108

    def close(self) -> None:
        self._committer.close()
        super().close()

    def storage_profile(self, warehouse_id: UUID, *, fresh: bool = False) -> dict[str, Any]:
        """A warehouse's storage profile for commits, cached for a moment (`fresh`: read
        now, and the cache renewed).

        Loading the Warehouse aggregate on every commit made all writers of a warehouse
        queue on one aggregate. A commit only needs the storage profile; a live table
        implies a live warehouse (a warehouse is deleted only when empty).
        """
        cached = None if fresh else self.cached_storage_profile(warehouse_id)
        if cached is not None:
            return cached
        warehouse = self.get_or_none(warehouse_id, Warehouse)
        if warehouse is None or warehouse.deleted:
            raise NoSuchWarehouseError(f"Warehouse does not exist: {warehouse_id}")
        self._storage_cache[warehouse_id] = (time.monotonic(), warehouse.storage_profile)
        return warehouse.storage_profile

    def warehouse_storage(self, warehouse_id: UUID, *, fresh: bool) -> WarehouseStorage:
        """What a create needs of its warehouse: its id and storage profile.

        Not `fresh`, from the storage profile cache (`storage_profile`'s, a moment old at
        most) without reading the Warehouse aggregate, whose read was ~13 % of a create's
        CPU: a create appends only into a namespace that still exists (the append checks
        it), a namespace exists only in a live warehouse (one is deleted only when it holds
        no namespace), and a warehouse's base location and storage type never change. What
        a moment's staleness can differ in is how the storage is reached (a credential, an
        S3 endpoint or region changed with it), as for commits; and which other schemes a
        client-chosen location may use — so a create that names its location reads the
        warehouse (`fresh`). `fresh` (also a retry) reads the aggregate and renews the
        cache."""
        return WarehouseStorage(warehouse_id, self.storage_profile(warehouse_id, fresh=fresh))

    def file_io(self, storage_profile: dict[str, Any]) -> FileIO:
        """The FileIO for a warehouse's storage profile (S3 with its stored credential)."""
        return file_io_for(storage_profile, self.secrets, self.storage_limits)

    def cached_storage_profile(self, warehouse_id: UUID) -> dict[str, Any] | None:
        """The profile if this replica read it recently (never touches the database)."""
        cached = self._storage_cache.get(warehouse_id)
        if cached is None or time.monotonic() - cached[0] >= STORAGE_PROFILE_TTL_S:
            return None
        return cached[1]

    def forget_storage_profile(self, warehouse_id: UUID) -> None:
        """This replica's cached profile of a warehouse whose storage just changed."""
        self._storage_cache.pop(warehouse_id, None)

    def metadata_document(self, warehouse_id: UUID, location: str) -> dict[str, Any]:
        """A metadata document by location (immutable) in a warehouse's storage."""
        return self.load_metadata(location, self.file_io(self.storage_profile(warehouse_id)))

    # -- loading -------------------------------------------------------------------------
    def get_or_none(self, aggregate_id: UUID, cls: type[A]) -> A | None:
        try:
            aggregate: Aggregate = self.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None
        # Ids from requests may name an aggregate of another kind: that one is not found.
        return aggregate if isinstance(aggregate, cls) else None

    # -- saving --------------------------------------------------------------------------
    def save_all(self, *aggregates: Aggregate | None, hints: dict[str, bytes] | None = None) -> int:
        """Append every pending event of `aggregates` in ONE transaction, together with the
        inline read-model update. Returns the log position of the last event.

        `hints` are metadata documents already rendered by the command, keyed by location,
        so the inline projection need not fold them again.
        """
        present = [a for a in aggregates if a is not None]
        ended = [
            found
            for aggregate in present
            for event in aggregate.pending_events
            if (found := grants_ended_by(event)) is not None
        ]
        if not ended:
            return self._save(present, hints)
        try:
            return self._save(present, hints)
        finally:
            self.on_grants_ended(ended)

    def _save(self, present: list[Aggregate], hints: dict[str, bytes] | None) -> int:
        held = held_claim()
        if held is None or held.landed or held.deferred or not present:
            return self._committer.save(present, hints or {})
        # The request holds an Idempotency-Key: its command's first append lands the key,
        # in the same transaction, so that the key cannot land twice (ADR 0012).
        record = self._held_record(held)
        if not record.landed:  # else: an earlier append of ours landed, unacknowledged
            record.land(_metadata_location(hints), actor=held.actor, request_id=held.request_id)
            present.append(record)
        position = self._committer.save(present, hints or {})
        held.landed = True
        return position

    def _held_record(self, held: HeldClaim) -> IdempotencyRecord:
        """The key this request holds; IdempotentReplay when another request took it over."""
        record = self.get_or_none(held.record_id, IdempotencyRecord)
        if record is None or not record.held_by(held.token):
            raise IdempotentReplay
        return record

    def _check_claim(self) -> None:
        """Before each attempt of a command: stop if the request's Idempotency-Key was taken
        over meanwhile (its answer is the other request's, not a fresh 409)."""
        held = held_claim()
        if held is not None and not held.landed:
            self._held_record(held)

    def retrying(self, attempt: Callable[[], R]) -> R:
        """Run a command attempt until it does not collide with a concurrent writer."""
        for n in range(MAX_ATTEMPTS):
            check_cancelled()
            self._check_claim()
            try:
                return attempt()
            except ConcurrentChange:
                self.on_commit_conflict()
                # Back off a little, with jitter: contended writers would otherwise retry
                # in lockstep and keep colliding.
                time.sleep(random.uniform(0, min(0.002 * (n + 1), 0.05)))  # noqa: S311
        raise ServiceUnavailableError(
            "Too much concurrent change on the same catalog objects; retry later"
        )

    # -- metadata documents ----------------------------------------------------------------
    def remember_metadata(self, location: str, metadata: dict[str, Any]) -> bytes:
        """Cache a document just written (or about to be) and return its JSON bytes."""
        data = orjson.dumps(metadata)
        self.metadata_cache.put(location, metadata, len(data))
        return data

    def write_metadata(self, file_io: FileIO, location: str, data: bytes) -> None:
        """Write a new metadata file; `.gz.metadata.json` names are gzip-compressed."""
        if location.endswith(".gz.metadata.json"):
            # mtime=0: the same document always gives the same bytes.
            data = gzip.compress(data, mtime=0)
        file_io.write_new(location, data)

    def load_metadata(
        self, location: str, file_io: FileIO, *, fresh: bool = False
    ) -> dict[str, Any]:
        """A metadata document by location (immutable once the catalog names it, so cached
        without expiry); `fresh` reads the file as it is now (register)."""
        cached = None if fresh else self.metadata_cache.get(location)
        if cached is not None:
            return cached
        try:
            raw = file_io.read(location)
        except FileNotFoundError:
            raise NotFoundError(f"Failed to open input stream for file: {location}") from None
        except UnreadableFileError as exc:
            log.warning("metadata file not read: %s", exc)
            raise ServiceUnavailableError(f"Cannot read metadata file {location}") from None
        metadata = self.parse_metadata(raw, location)
        # A gzip file's JSON is several times its size; 8 is a typical ratio for metadata.
        size = len(raw) * (8 if raw[:2] == b"\x1f\x8b" else 1)
        self.metadata_cache.put(location, metadata, size)
        return metadata

    def load_client_metadata(
        self, location: str, file_io: FileIO, is_metadata: Callable[[dict[str, Any]], bool]
    ) -> dict[str, Any]:
        """A metadata file a client names (register): inside the warehouse (else 400), and
        one answer for every reason it cannot be used — missing, not a regular file, too
        large, too slow, not JSON, not `is_metadata` — so that registering cannot probe
        the storage. The reason goes to the server log."""
        try:
            metadata = self.load_metadata(location, file_io, fresh=True)
            if is_metadata(metadata):
                return metadata
            reason = "not Iceberg metadata of the expected kind"
        except OutsideStorageError:
            raise
        except (NotFoundError, ServiceUnavailableError, BadRequestError) as exc:
            reason = exc.message
        log.info("register: metadata file %s not used: %s", location, reason)
        raise NotFoundError(
            f"Cannot read metadata file {location}: there is no readable Iceberg metadata "
            "file of that name in the warehouse"
        )

    def parse_metadata(self, raw: bytes, location: str) -> dict[str, Any]:
        """A metadata file's bytes as a document; 400 when they are not one. A gzip file
        may unpack to at most the size limit of a file (a small bomb never unpacks)."""
        try:
            # Readers accept gzip whatever the name says (Iceberg spec, appendix F).
            if raw[:2] == b"\x1f\x8b":
                raw = gunzip_bounded(raw, self.storage_limits.max_read_bytes)
            metadata = orjson.loads(raw)
        except (OSError, EOFError, zlib.error, orjson.JSONDecodeError):
            raise BadRequestError(f"Not a metadata file: {location}") from None
        if not isinstance(metadata, dict):
            raise BadRequestError(f"Not a metadata file: {location}")
        check_json_depth(metadata, f"Metadata file {location}")
        return metadata

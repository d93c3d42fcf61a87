"""Decisions: what a principal may do on an object (docs/auth.md).

`Authorizer` is the seam: `GrantAuthorizer` answers from the grants read model in-process;
`AllowAll` (no identity provider) allows everything. An OpenFGA or Cedar authorizer would
implement the same two methods, mapping `ObjectRef`s to its object ids and `capabilities`
to its check API (docs/auth.md, "Another authorizer").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar, cast
from uuid import UUID

from icelog.domain.errors import (
    NoSuchNamespaceError,
    NoSuchProjectError,
    NoSuchRoleError,
    NoSuchTableError,
    NoSuchViewError,
    NoSuchWarehouseError,
    NotFoundError,
)
from icelog.domain.identifiers import NIL_UUID, SERVER_ID, NamespaceName, namespace_id
from icelog.domain.permissions import (
    KINDS,
    NAVIGABLE_KINDS,
    NAVIGATION,
    ObjectRef,
    PrincipalRef,
    capabilities,
    role_closure,
)
from icelog.projections.queries import CatalogQueries

SERVER = ObjectRef("server", str(SERVER_ID))
T = TypeVar("T")
EVERYTHING = frozenset(
    {"ownership", "modify", "select", "describe", "create", "manage_grants", "pass_grants",
     "grant_data_admin", "administer", "create_role", "server_admin", "navigate"}
)  # fmt: skip


class Authorizer(Protocol):
    enabled: bool

    def principals(self, user_id: str, *, fresh: bool = False) -> frozenset[PrincipalRef]: ...

    def decide(
        self, principals: frozenset[PrincipalRef], obj: ObjectRef, *, fresh: bool = False
    ) -> tuple[frozenset[str], frozenset[str]]:
        """(capabilities on `obj`, relations held directly on it); `fresh`: read the grants
        now, not from a cache (a refusal is always confirmed so)."""
        ...

    def forget(self) -> None:
        """Grants changed in this process: no cached decision may outlive that."""
        ...

    def lookup(self, key: Hashable, load: Callable[[], T], *, fresh: bool = False) -> T:
        """A read model lookup the checks need (a table's id by name), cached like them."""
        ...

    def recall(self, key: Hashable) -> Any:
        """What `remember` kept under `key`, if it is still current; else None."""
        ...

    def remember(self, key: Hashable, value: Any) -> None:
        """Keep an allowed decision (never a refusal) as long as the cached grants."""
        ...


class AllowAll:
    """No identity provider: every caller may do everything (and says so in /info)."""

    enabled = False

    def principals(self, user_id: str, *, fresh: bool = False) -> frozenset[PrincipalRef]:
        return frozenset({PrincipalRef("user", user_id)})

    def decide(
        self, principals: frozenset[PrincipalRef], obj: ObjectRef, *, fresh: bool = False
    ) -> tuple[frozenset[str], frozenset[str]]:
        return EVERYTHING, frozenset()

    def forget(self) -> None:
        pass

    def lookup(self, key: Hashable, load: Callable[[], T], *, fresh: bool = False) -> T:
        return load()

    def recall(self, key: Hashable) -> Any:
        return None

    def remember(self, key: Hashable, value: Any) -> None:
        pass


class GrantSource(Protocol):
    def grants_held(
        self,
        principal_ids: list[str],
        object_ids: list[str] | None = None,
        object_kind: str | None = None,
    ) -> list[tuple[str, str, str, str]]:
        """(object kind, object id, relation, principal id) of every grant they hold."""
        ...

    def holds_below(self, principal_ids: list[str], obj: ObjectRef) -> bool:
        """Whether they hold a `NAVIGATING` grant on something inside `obj` (a project,
        warehouse or namespace): what lets them navigate to it (bottom-up)."""
        ...


class WouldRead(Exception):
    """A check made from the cache alone needed something the cache did not hold."""


# Set while a guard runs on the event loop: the checks may use what is cached, and raise
# `WouldRead` instead of blocking the loop on a read (the guard then reruns in a thread).
_CACHE_ONLY: ContextVar[bool] = ContextVar("icelog_cache_only", default=False)


class Reads:
    """What a decision was made from: when each cached answer it used was read (a load's
    start, or — for an answer built from other cached answers — the oldest read those
    used), and the oldest generation of each cache it came from (a `clear` since then
    means it may have been read before a grant change of this process)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._generations: dict[int, int] = {}  # id(cache) -> oldest generation used

    def add(self, cache: object, read_at: float, generation: int) -> None:
        self.times.append(read_at)
        kept = self._generations.get(id(cache))
        if kept is None or generation < kept:
            self._generations[id(cache)] = generation

    def merge(self, other: Reads) -> None:
        self.times.extend(other.times)
        for cache, generation in other._generations.items():
            kept = self._generations.get(cache)
            if kept is None or generation < kept:
                self._generations[cache] = generation

    def oldest(self) -> float | None:
        return min(self.times) if self.times else None

    def generation(self, cache: object) -> int | None:
        """The oldest generation of `cache` used; None if nothing came from it."""
        return self._generations.get(id(cache))


# Set while a decision is made that may be kept — by the edge (`remember`), or as a cache
# entry built from other cached entries (a per-route "allowed", `guards._allowed`): what it
# was read from, so that the kept decision expires with the oldest of them instead of a
# full TTL after it was made, and is not kept at all across a `clear`.
_READ_AT: ContextVar[Reads | None] = ContextVar("icelog_read_at", default=None)


@contextmanager
def watching_staleness() -> Iterator[Reads]:
    """Yields what the cached answers used inside it were read from (shared with a thread
    the check may rerun in); `remember` inside it keeps its value no longer than the
    oldest of them lives, and not at all if the cache was cleared since one was read."""
    seen = Reads()
    token = _READ_AT.set(seen)
    try:
        yield seen
    finally:
        _READ_AT.reset(token)


def _used(cache: object, read_at: float, generation: int) -> None:
    seen = _READ_AT.get()
    if seen is not None:
        seen.add(cache, read_at, generation)


def from_cache_only(check: Callable[[], T]) -> T:
    """`check()` answered from cached grants only; `WouldRead` if it needed to read."""
    token = _CACHE_ONLY.set(True)
    try:
        return check()
    finally:
        _CACHE_ONLY.reset(token)


class _Flight:
    """One load of a key in progress; the callers that need the key meanwhile wait for it."""

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.done = threading.Event()
        self.answer: tuple[float, Any] | None = None  # (read at, value) when it succeeded


class TtlCache:
    """A small map whose entries live `ttl_s` seconds from when they were read: decisions
    read the grants again at most that often per key, so a grant or revoke made on another
    replica takes effect within it; this process's own grant writes clear it at once
    (`clear`).

    No entry is served past its time. When one runs out, one caller reads it again and the
    others that need it meanwhile wait for that read (at most `wait_s`, then they read it
    themselves) instead of all reading the same rows at once. A load that fails — a refusal
    raises — removes the entry: an "allowed" never outlives a refusal (served
    to everyone while one caller reloaded, with a refusal leaving it in place, an old answer
    let a user who kept requesting keep a revoked right on the other replicas). A load
    that began before a `clear` does not store its answer."""

    def __init__(self, ttl_s: float, max_entries: int = 50_000, wait_s: float = 2.0) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.wait_s = wait_s
        self._entries: dict[Hashable, tuple[float, Any]] = {}  # key -> (read at, value)
        self._flights: dict[Hashable, _Flight] = {}
        self._generation = 0  # moved on by `clear`
        self._lock = threading.Lock()

    def _current(self, key: Hashable) -> tuple[float, Any] | None:
        found = self._entries.get(key)
        if found is not None and time.monotonic() - found[0] < self.ttl_s:
            return found
        return None

    def get(self, key: Hashable, load: Callable[[], T], *, fresh: bool = False) -> T:
        if not fresh:
            generation = self._generation  # before the lookup: a `clear` after it counts
            found = self._current(key)
            if found is not None:
                _used(self, found[0], generation)
                return cast(T, found[1])
        if _CACHE_ONLY.get():
            raise WouldRead
        deadline = time.monotonic() + self.wait_s
        while True:
            with self._lock:
                flight = None if fresh else self._flights.get(key)
                if flight is None:
                    flight = _Flight(self._generation)
                    if not fresh:  # a fresh read is nobody's to wait for: it may be refused
                        self._flights[key] = flight
                    break
            left = deadline - time.monotonic()
            if left <= 0 or not flight.done.wait(left):
                flight = _Flight(self._generation)  # waited long enough: read it too
                break
            found = flight.answer
            if found is not None and flight.generation == self._generation:
                _used(self, found[0], flight.generation)  # read after this caller asked
                return cast(T, found[1])
            # The read failed (a refusal), or a `clear` came after it began: read again.
        started = time.monotonic()
        # What the load itself takes from the cache (a per-route entry is built from the
        # decision and lookups, which may be cached): the entry is as old as the oldest.
        inner = Reads()
        token = _READ_AT.set(inner)
        try:
            value = load()
            oldest = inner.oldest()
            read_at = started if oldest is None else min(started, oldest)
            flight.answer = (read_at, value)
        except BaseException:
            with self._lock:
                self._entries.pop(key, None)
            raise
        finally:
            _READ_AT.reset(token)
            with self._lock:
                if self._flights.get(key) is flight:
                    del self._flights[key]
            flight.done.set()
        within = inner.generation(self)
        generation = flight.generation if within is None else min(flight.generation, within)
        self._store(key, value, read_at, generation)
        outer = _READ_AT.get()
        if outer is not None:
            outer.merge(inner)
        _used(self, read_at, generation)
        return value

    def peek(self, key: Hashable) -> Any:
        """The value under `key` while it is current, else None: no reload, no waiting."""
        found = self._current(key)
        return None if found is None else found[1]

    def put(
        self,
        key: Hashable,
        value: Any,
        *,
        read_at: float | None = None,
        generation: int | None = None,
    ) -> None:
        """Keep `value`, as read at `read_at` (default now) in `generation` (default the
        current one): nothing is kept when a `clear` came since."""
        if generation is None:
            with self._lock:
                generation = self._generation
        self._store(key, value, time.monotonic() if read_at is None else read_at, generation)

    def _store(self, key: Hashable, value: Any, read_at: float, generation: int) -> None:
        with self._lock:
            if generation != self._generation:
                return  # read before a `clear`: what it read may be what changed
            kept = self._entries.get(key)
            if kept is not None and kept[0] > read_at:
                return  # a newer read is there already
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[key] = (read_at, value)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._flights.clear()  # later callers read afresh instead of waiting for them
            self._generation += 1


class GrantAuthorizer:
    """From the grants read model: the caller's roles (nested), then the relations they hold
    on the object and its ancestors. `grants`: where grants are read (default the live read
    model; `GrantsAsOf` for a past moment). With `ttl_s`, principals, grants and ancestor
    chains are kept that long (the hot path then reads nothing)."""

    enabled = True

    def __init__(
        self, queries: CatalogQueries, grants: GrantSource | None = None, ttl_s: float = 0.0
    ) -> None:
        self.queries = queries
        self.grants: GrantSource = grants if grants is not None else queries
        self._cache = TtlCache(ttl_s) if ttl_s > 0 else None

    def forget(self) -> None:
        """This process changed grants or roles: decide afresh."""
        if self._cache is not None:
            self._cache.clear()

    def lookup(self, key: Hashable, load: Callable[[], T], *, fresh: bool = False) -> T:
        return self._cached(key, load, fresh)

    def recall(self, key: Hashable) -> Any:
        return None if self._cache is None else self._cache.peek(key)

    def remember(self, key: Hashable, value: Any) -> None:
        if self._cache is not None:
            # Inside `watching_staleness`: no longer than the oldest answer it came from,
            # and not at all when this process changed grants since one was read.
            seen = _READ_AT.get()
            if seen is None:
                self._cache.put(key, value)
                return
            read_at = seen.oldest()
            self._cache.put(key, value, read_at=read_at, generation=seen.generation(self._cache))

    def _cached(self, key: Hashable, load: Callable[[], T], fresh: bool) -> T:
        if self._cache is not None:
            return self._cache.get(key, load, fresh=fresh)
        if _CACHE_ONLY.get():
            raise WouldRead
        return load()

    def principals(self, user_id: str, *, fresh: bool = False) -> frozenset[PrincipalRef]:
        return self._cached(("principals", user_id), lambda: self._principals(user_id), fresh)

    def _principals(self, user_id: str) -> frozenset[PrincipalRef]:
        memberships: dict[PrincipalRef, list[str]] = {}
        pending = [user_id]
        seen: set[str] = set()
        while pending:  # one query per level of role nesting
            rows = self.grants.grants_held(pending, object_kind="role")
            seen.update(pending)
            pending = []
            for kind, object_id, relation, principal_id in rows:
                if kind == "role" and relation == "assignee":
                    who = PrincipalRef("user" if principal_id == user_id else "role", principal_id)
                    memberships.setdefault(who, []).append(object_id)
                    if object_id not in seen:
                        pending.append(object_id)
        return role_closure(user_id, memberships)

    def decide(
        self, principals: frozenset[PrincipalRef], obj: ObjectRef, *, fresh: bool = False
    ) -> tuple[frozenset[str], frozenset[str]]:
        return self._cached(
            ("decision", principals, obj), lambda: self._decide(principals, obj, fresh), fresh
        )

    def _decide(
        self, principals: frozenset[PrincipalRef], obj: ObjectRef, fresh: bool
    ) -> tuple[frozenset[str], frozenset[str]]:
        chain = self.chain(obj, fresh=fresh)
        held: dict[ObjectRef, set[str]] = {}
        rows = self.grants.grants_held(
            sorted(p.id for p in principals), object_ids=[o.id for o in chain]
        )
        for kind, object_id, relation, _ in rows:
            if kind in KINDS:
                held.setdefault(ObjectRef(kind, object_id), set()).add(relation)
        own = frozenset(held.get(obj, set()))
        caps = capabilities(chain, held)
        # Part of the decision, so cached, cleared and confirmed with it: a revoke below
        # ends the way in as it ends the right itself.
        below = "navigate" not in caps and obj.kind in NAVIGABLE_KINDS
        if below and self.grants.holds_below(sorted(p.id for p in principals), obj):
            caps |= NAVIGATION
        return caps, own

    def chain(self, obj: ObjectRef, *, fresh: bool = False) -> list[ObjectRef]:
        """`obj` and its ancestors up to the server (NotFoundError when it is gone)."""
        return self._cached(("chain", obj), lambda: ancestors(self.queries, obj), fresh)


# The "does not exist" error of each kind of object (the server always exists).
NOT_FOUND: dict[str, type[NotFoundError]] = {
    "project": NoSuchProjectError,
    "warehouse": NoSuchWarehouseError,
    "namespace": NoSuchNamespaceError,
    "table": NoSuchTableError,
    "view": NoSuchViewError,
    "role": NoSuchRoleError,
}


def missing(obj: ObjectRef, what: str = "") -> NotFoundError:
    """The error for an object that does not exist, by id (or by the name `what` the
    caller gave). Objects a caller may not see answer with exactly this too (guards'
    `require`), so an answer never tells hidden from unknown."""
    error = NOT_FOUND.get(obj.kind, NotFoundError)
    return error(f"{obj.kind.capitalize()} does not exist: {what or obj.id}")


def ancestors(queries: CatalogQueries, obj: ObjectRef) -> list[ObjectRef]:
    if obj.kind == "server":
        return [SERVER]
    if obj.kind == "project":
        if obj.id != str(NIL_UUID) and queries.project(obj.id) is None:
            raise missing(obj)
        return [obj, SERVER]
    if obj.kind == "role":
        role = queries.role(obj.id)
        if role is None:
            raise missing(obj)
        return [obj, ObjectRef("project", role["project-id"]), SERVER]
    if obj.kind == "warehouse":
        return [obj, *_warehouse_up(queries, obj.id)[1:]]
    if obj.kind == "namespace":
        found = queries.namespace_by_id(obj.id)
        if found is None:
            raise missing(obj)
        return _namespace_up(queries, *found)
    found_tabular = queries.tabular_by_id(obj.id)
    if found_tabular is None or found_tabular[3] != obj.kind:
        raise missing(obj)
    warehouse_id, namespace, _, _ = found_tabular
    return [obj, *_namespace_up(queries, warehouse_id, namespace)]


def namespace_chain(
    queries: CatalogQueries, warehouse_id: str, namespace: NamespaceName
) -> list[ObjectRef]:
    """A namespace (by name) and its ancestors, without a lookup per level: namespace ids
    derive from (warehouse, levels)."""
    return _namespace_up(queries, warehouse_id, namespace)


def _namespace_up(
    queries: CatalogQueries, warehouse_id: str, namespace: NamespaceName
) -> list[ObjectRef]:
    levels = namespace.levels
    found = [
        ObjectRef("namespace", str(namespace_id(UUID(warehouse_id), NamespaceName(levels[:n]))))
        for n in range(len(levels), 0, -1)
    ]
    return [*found, *_warehouse_up(queries, warehouse_id)]


def _warehouse_up(queries: CatalogQueries, warehouse_id: str) -> list[ObjectRef]:
    warehouse = queries.warehouse(warehouse_id)
    if warehouse is None:
        raise missing(ObjectRef("warehouse", warehouse_id))
    project = ObjectRef("project", str(warehouse["project-id"]))
    return [ObjectRef("warehouse", warehouse_id), project, SERVER]

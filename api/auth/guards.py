"""Which right each route needs, on which object (docs/auth.md, "Permissions").

A guard runs after the request's body and query are validated and before its handler, in
the threadpool (it reads the grants read model). It raises 403 when the caller may see the
object but not do the action, and 404 — the object's own "does not exist" error, worded
exactly as for an object that does not exist — when the caller may not even see it, so
that nobody learns what exists in a project they have no rights in. Every kind but the
server is hidden so (`_sees`). Without an identity provider no guard runs (`AllowAll`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast
from uuid import UUID

from starlette.requests import Request

from icelog.api.auth.authorizer import NOT_FOUND, Authorizer, missing
from icelog.api.auth.principal import Principal
from icelog.domain.errors import ForbiddenError, NotFoundError
from icelog.domain.identifiers import NIL_UUID, NamespaceName, TabularName, namespace_id
from icelog.domain.locations import location_set_by
from icelog.domain.permissions import (
    ALL_DATA,
    NO_DATA,
    DataRights,
    ObjectRef,
    PrincipalRef,
    allows,
    data_rights_from,
)

Guard = Callable[[Request, Any, Any], None]

# Kinds whose objects a caller who may not see them is told do not exist.
_HIDDEN = frozenset(NOT_FOUND)
# The action `hidden_unless_seen` checks: the one each kind's "describe" gives.
_SEE_ACTION = {"project": "list_warehouses", "role": "read"}


def authorizer(request: Request) -> Authorizer:
    return cast(Authorizer, request.app.state.authorizer)


def principals(request: Request) -> frozenset[PrincipalRef]:
    """The caller and their roles, once per request."""
    cached = getattr(request.state, "principals", None)
    if cached is not None:
        return cast(frozenset[PrincipalRef], cached)
    found = authorizer(request).principals(_user(request))
    request.state.principals = found
    return found


def _user(request: Request) -> str:
    principal = getattr(request.state, "principal", None)
    return principal.user_id if isinstance(principal, Principal) else "anonymous"


def _hidden(obj: ObjectRef, what: str) -> NotFoundError:
    """The "does not exist" answer for `obj`, named as the caller named it (`what`: a
    dotted name) or by id: the same for an object hidden from the caller and for one
    that does not exist."""
    return missing(obj, what)


def _sees(request: Request, obj: ObjectRef, caps: frozenset[str], own: frozenset[str]) -> bool:
    """Whether the caller may know that `obj` exists: `describe` on it (from it or from
    above), or — a project, warehouse or namespace — `navigate` (a grant inside it: it is
    on the way to what they hold, and lists show it). A role is also seen by its members
    and owner; a project by whoever holds any capability on it (a server admin, a role
    creator) or any grant in it (what the project list shows, `visible`), and the default
    (nil) project, which `/info` names, by everyone."""
    if "describe" in caps or "navigate" in caps:
        return True
    if obj.kind == "role":
        return bool(caps or own)
    if obj.kind == "project":
        return bool(caps or own) or obj.id == str(NIL_UUID) or obj.id in places_held(request)[0]
    return False


def _decide(
    request: Request,
    who: frozenset[PrincipalRef],
    obj: ObjectRef,
    what: str,
    *,
    fresh: bool = False,
) -> tuple[frozenset[str], frozenset[str]]:
    """`Authorizer.decide`; an object that does not exist answers as a hidden one does,
    by the name the caller gave (not by its id, which for a namespace is derived from the
    name and would tell the two apart)."""
    try:
        return authorizer(request).decide(who, obj, fresh=fresh)
    except NotFoundError:
        if what and obj.kind in _HIDDEN:
            raise _hidden(obj, what) from None
        raise


def require(request: Request, obj: ObjectRef, action: str, what: str = "") -> frozenset[str]:
    """The caller's capabilities on `obj`, when they allow `action`; else 403 or 404."""
    auth = authorizer(request)
    caps, own = _decide(request, principals(request), obj, what)
    if allows(obj.kind, action, caps, own):
        return caps
    # A refusal is confirmed from the read model itself, never from the cache: a grant or
    # an object made a moment ago (here or on another replica) counts at once.
    who = auth.principals(_user(request), fresh=True)
    request.state.principals = who
    caps, own = _decide(request, who, obj, what, fresh=True)
    if allows(obj.kind, action, caps, own):
        return caps
    if obj.kind in _HIDDEN and not _sees(request, obj, caps, own):
        raise _hidden(obj, what)
    raise ForbiddenError(f"Not allowed to {action} on {obj.kind} {what or obj.id}")


def hidden_unless_seen(request: Request, obj: ObjectRef) -> None:
    """Answer about `obj` (by id) only to a caller who may see it: to anyone else an object
    that exists answers exactly as one that does not, so ids (namespace ids are predictable)
    cannot be probed for existence."""
    if obj.kind not in _HIDDEN:
        return
    try:
        require(request, obj, _SEE_ACTION.get(obj.kind, "get_metadata"))
    except ForbiddenError:
        return  # seen: `require` refuses with 403 only a caller who sees the object
    except NotFoundError:
        raise missing(obj) from None


def may(request: Request, obj: ObjectRef, action: str) -> bool:
    """Whether the caller may do `action` on `obj` (what `require` would allow): for what an
    answer shows or leaves out rather than refuses."""
    try:
        require(request, obj, action)
    except (ForbiddenError, NotFoundError):
        return False
    return True


# -- the objects a catalog request names -------------------------------------------------------
def _services(request: Request) -> Any:
    return request.app.state.services


def warehouse_of(request: Request) -> ObjectRef:
    prefix = request.path_params.get("prefix")
    wid = _services(request).warehouse_for_prefix(str(prefix) if prefix is not None else None)
    return ObjectRef("warehouse", str(wid))


def namespace_ref(request: Request, namespace: NamespaceName) -> ObjectRef:
    wid = UUID(warehouse_of(request).id)
    return ObjectRef("namespace", str(namespace_id(wid, namespace)))


def tabular_ref(request: Request, name: TabularName, kind: str) -> ObjectRef:
    warehouse = warehouse_of(request)
    key = ("tabular", warehouse.id, name.namespace.key, name.name)

    def load() -> tuple[str, str] | None:
        found: tuple[str, str] | None = _services(request).primary.tabular_id(
            warehouse.id, name.namespace, name.name
        )
        return found

    found = authorizer(request).lookup(key, load)
    if found is None or found[1] != kind:
        # Not there, as far as the cache knows: a table just made elsewhere must count.
        found = authorizer(request).lookup(key, load, fresh=True)
    if found is None or found[1] != kind:
        raise _hidden(ObjectRef("table" if kind == "table" else "view", ""), name.dotted)
    return ObjectRef("table" if kind == "table" else "view", found[0])


# -- guards of the catalog routes --------------------------------------------------------------
def cache_first(guard: Guard) -> Guard:
    """Mark a guard that reads nothing but through the authorizer: the edge first runs it on
    the event loop from cached grants, and in a thread only when it needs a read
    (`WouldRead`) — the thread hop is most of what a cached check would cost."""
    setattr(guard, "cache_first", True)  # noqa: B010 - a mark on a plain function
    return guard


def path_only(guard: Guard) -> Guard:
    """Mark a guard whose decision depends on nothing but the caller and the request's path
    (not its body or query): the edge keeps its allowed answer per caller and path, so a
    repeated request (an engine loading the same table) costs one lookup."""
    setattr(guard, "path_only", True)  # noqa: B010 - a mark on a plain function
    return cache_first(guard)


def _path_namespace(request: Request) -> NamespaceName:
    from icelog.api.http import namespace_param  # noqa: PLC0415 - api.http imports models

    return namespace_param(request)


def _path_tabular(request: Request, param: str) -> TabularName:
    from icelog.api.http import path_param  # noqa: PLC0415

    return TabularName(_path_namespace(request), path_param(request, param))


def _allowed(
    request: Request, route_key: tuple[Any, ...], check: Callable[[], frozenset[str]]
) -> frozenset[str]:
    """`check()` (the caller's capabilities, or a refusal), remembered per caller and
    `route_key` (the route's raw path; a table's id) like every cached decision: a repeated
    request (an engine loading the same table) then costs one lookup. Refusals are never
    remembered (`require`). The entry lives no longer than the oldest cached answer
    `check()` used (`TtlCache.get`): it never stretches a decision past the cache time."""
    key = ("allowed", _user(request), *route_key)
    return authorizer(request).lookup(key, check)


def on_warehouse(action: str) -> Guard:
    def guard(request: Request, body: Any, query: Any) -> None:
        require(request, warehouse_of(request), action)

    return path_only(guard)


def on_namespace(action: str) -> Guard:
    def guard(request: Request, body: Any, query: Any) -> None:
        def check() -> frozenset[str]:
            namespace = _path_namespace(request)
            return require(request, namespace_ref(request, namespace), action, namespace.dotted)

        params = request.path_params
        _allowed(request, ("ns", action, params.get("prefix"), params["namespace"]), check)

    return path_only(guard)


_create_in_namespace = on_namespace("create_table")


@cache_first
def on_new_namespace(request: Request, body: Any, query: Any) -> None:
    """Creating `a.b.c` needs `create_namespace` on `a.b` (on the warehouse for `a`)."""
    levels = tuple(body.namespace)
    if len(levels) == 1:
        require(request, warehouse_of(request), "create_namespace")
        return
    parent = NamespaceName(levels[:-1])
    require(request, namespace_ref(request, parent), "create_namespace", parent.dotted)


def on_tabular(kind: str, action: str, param: str) -> Guard:
    def guard(request: Request, body: Any, query: Any) -> None:
        name = _path_tabular(request, param)
        ref = tabular_ref(request, name, kind)
        # Kept by the table's id, not its name: after a drop and a create under the same
        # name, the new table is never answered with the old one's decision.
        key = (kind, action, ref.id)
        # What vended credentials may do (load, credentials).
        request.state.caps = _allowed(
            request, key, lambda: require(request, ref, action, name.dotted)
        )

    return path_only(guard)


def on_rename(kind: str) -> Guard:
    def guard(request: Request, body: Any, query: Any) -> None:
        source = TabularName(NamespaceName(tuple(body.source.namespace)), body.source.name)
        require(request, tabular_ref(request, source, kind), "rename", source.dotted)
        target = NamespaceName(tuple(body.destination.namespace))
        require(request, namespace_ref(request, target), f"create_{kind}", target.dotted)

    return cache_first(guard)


def _creates(requirements: list[Any] | None) -> bool:
    """A commit that creates its table (`assert-create`: the second half of a staged
    create, or a create transaction): there is no table yet to hold rights on."""
    return any(
        isinstance(r, dict) and str(r.get("type", "")).lower() == "assert-create"
        for r in requirements or ()
    )


def _may_create_in(request: Request, namespace: NamespaceName) -> None:
    """What a create needs: `create_table` on the namespace (as `POST .../tables`); 403 when
    the caller sees the namespace, 404 when not — whether or not the table exists."""
    params = request.path_params

    def check() -> frozenset[str]:
        ref = namespace_ref(request, namespace)
        return require(request, ref, "create_table", namespace.dotted)

    _allowed(request, ("create_table_in", params.get("prefix"), namespace.key), check)


@path_only
def on_register(request: Request, body: Any, query: Any) -> None:
    """registerTable: `create` on the namespace, and `modify` on the warehouse — a
    registered table lies over files that are already there (`may_cover_files`)."""
    _create_in_namespace(request, body, query)
    if not may_cover_files(request):
        raise ForbiddenError(
            "Registering a table needs modify on the warehouse: it places a table over "
            "files already in storage"
        )


@cache_first
def on_table_commit(request: Request, body: Any, query: Any) -> None:
    """updateTable: `commit` on the table; a commit with `assert-create` makes the table, so
    it needs what creating it needs. Not `path_only`: the decision depends on the body."""
    if _creates(body.requirements):
        _may_create_in(request, _path_namespace(request))
        return
    name = _path_tabular(request, "table")
    ref = tabular_ref(request, name, "table")
    _allowed(
        request, ("table", "commit", ref.id), lambda: require(request, ref, "commit", name.dotted)
    )


@cache_first
def on_transaction(request: Request, body: Any, query: Any) -> None:
    for change in body.table_changes:
        name = TabularName(
            NamespaceName(tuple(change.identifier.namespace)), change.identifier.name
        )
        if _creates(change.requirements):
            _may_create_in(request, name.namespace)
            continue
        require(request, tabular_ref(request, name, "table"), "commit", name.dotted)


@cache_first
def on_sign(request: Request, body: Any, query: Any) -> None:
    """Reads (GET, HEAD) need `read_data`, anything else `write_data`."""
    action = "read_data" if body.method in ("GET", "HEAD") else "write_data"
    name = _path_tabular(request, "table")
    require(request, tabular_ref(request, name, "table"), action, name.dotted)


@cache_first
def on_warehouse_sign(request: Request, body: Any, query: Any) -> None:
    """The signer's warehouse-wide path names no table: rights on the whole warehouse."""
    action = "read_data" if body.method in ("GET", "HEAD") else "write_data"
    caps, _ = authorizer(request).decide(principals(request), warehouse_of(request))
    need = "select" if action == "read_data" else "modify"
    if need not in caps:
        raise ForbiddenError(f"Not allowed to {action} in this warehouse (sign at the table)")


def on_list(kind: str) -> Guard:
    """A list needs `list_<kind>s` on its container — `navigate`: describe, or a grant
    inside it — and is filtered to what the caller may see (`visible_to` in the list
    query: the way to what they hold) unless they may describe the container; see
    `list_filter`. A container they may not even navigate answers as one that does not
    exist (by the name they gave)."""
    action = f"list_{kind}s"

    def guard(request: Request, body: Any, query: Any) -> None:
        if kind == "namespace" and getattr(query, "parent", None):
            from icelog.api.http import namespace_from_query  # noqa: PLC0415

            parent = namespace_from_query(query.parent)
            container, what = namespace_ref(request, parent), parent.dotted
        elif kind == "namespace":
            container = warehouse_of(request)
            what = container.id
        else:
            namespace = _path_namespace(request)
            container, what = namespace_ref(request, namespace), namespace.dotted
        caps = require(request, container, action, what)
        if "describe" not in caps:
            request.state.visible_to = sorted(p.id for p in principals(request))

    return cache_first(guard)


def list_filter(request: Request) -> list[str] | None:
    """The principal ids a list is filtered to, or None: everything."""
    found = getattr(request.state, "visible_to", None)
    return cast(list[str] | None, found)


def authorization_on(request: Request) -> bool:
    """Whether rights are checked at all (an identity provider is configured)."""
    auth: Authorizer | None = getattr(request.app.state, "authorizer", None)
    return auth is not None and auth.enabled


def data_rights(request: Request, table: ObjectRef | None = None) -> DataRights:
    """Which of `read_data` / `write_data` the caller holds on `table` — by default on the
    table the route's guard checked (`on_tabular` leaves its capabilities on the request).
    Every path that hands out storage access (vended credentials, signer configuration)
    asks this: nothing without `read_data`, write scope only with `write_data`. Without a
    provider: both. A route whose guard left nothing to go by vends nothing (fail closed)."""
    if not authorization_on(request):
        return ALL_DATA
    if table is None:
        caps = getattr(request.state, "caps", None)
        return NO_DATA if caps is None else data_rights_from(caps)
    # Read now, not from the cache: what is vended must not outlive a revoke.
    caps, own = authorizer(request).decide(principals(request), table, fresh=True)
    return data_rights_from(caps, own)


def may_cover_files(request: Request) -> bool:
    """Whether the caller may place a table over files already in storage (a location that
    holds files: a dropped, unregistered or purge-pending table's): `modify` on the
    warehouse. Such a table's owner would be handed those files; what holds them belongs to
    no table any more, so only the warehouse decides. Without a provider: yes. A refusal
    is confirmed from the read model, as in `require`."""
    if not authorization_on(request):
        return True
    auth = authorizer(request)
    warehouse = warehouse_of(request)
    if "modify" in auth.decide(principals(request), warehouse)[0]:
        return True
    who = auth.principals(_user(request), fresh=True)
    request.state.principals = who
    return "modify" in auth.decide(who, warehouse, fresh=True)[0]


def sets_location(updates: Any) -> bool:
    """Whether a commit's updates move the table (`set-location`): only then does
    `may_cover_files` matter."""
    return location_set_by(list(updates or [])) is not None


def new_table_rights(
    request: Request,
    namespace: NamespaceName,
    table_id: str | None,
    *,
    chosen_location: bool,
) -> DataRights:
    """The storage access of a createTable / registerTable answer. A created or registered
    table (`table_id`) is its creator's own: their rights on it, as for a load. A staged
    create (`table_id` None) claims nothing: at a location the client chose, no access at
    all (no table holds that location yet, and it may lie on another table's or a dropped
    table's files); at the default location (a fresh path of its own) read-write access for
    a caller who may create tables in the namespace."""
    if not authorization_on(request):
        return ALL_DATA
    if table_id is not None:
        return data_rights(request, ObjectRef("table", table_id))
    if chosen_location:
        return NO_DATA
    if may(request, namespace_ref(request, namespace), "create_table"):
        return ALL_DATA
    return NO_DATA


def places_held(request: Request) -> tuple[set[str], set[str]]:
    """(project ids, warehouse ids) the caller holds a grant in or below: what lists of
    projects and warehouses show besides what the caller may describe."""
    found: tuple[set[str], set[str]] = _services(request).primary.places_held(
        [p.id for p in principals(request)]
    )
    return found


def visible(request: Request, kind: str, ids: list[str]) -> set[str]:
    """Which of these projects or warehouses the caller may see (all without a provider)."""
    if not authorizer(request).enabled:
        return set(ids)
    projects, warehouses = places_held(request)
    held = projects if kind == "project" else warehouses
    found = set()
    for object_id in ids:
        obj = ObjectRef("project" if kind == "project" else "warehouse", object_id)
        if (
            object_id in held
            or "describe" in authorizer(request).decide(principals(request), obj)[0]
        ):
            found.add(object_id)
    return found

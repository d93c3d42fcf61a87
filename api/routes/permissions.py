"""Roles, assignments, my access and checks (Lakekeeper's `/management/v1/permissions`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, cast
from uuid import UUID

import orjson
from starlette.requests import Request

from icelog.api.auth.authorizer import SERVER, Authorizer, GrantAuthorizer, ancestors, missing
from icelog.api.auth.guards import hidden_unless_seen, principals, require
from icelog.api.auth.principal import Principal
from icelog.api.event_log import Indexer
from icelog.api.http import ascii_int, context, namespace_from_query, parse_uuid, path_param
from icelog.api.models.permissions import (
    AccessQuery,
    Assignment,
    AssignmentAnswer,
    AssignmentsQuery,
    CheckObject,
    CheckRequest,
    CheckResponse,
    CreateRoleRequest,
    GetAccessResponse,
    GetAssignmentsResponse,
    ListRolesQuery,
    ListRolesResponse,
    NamespaceIdQuery,
    NamespaceIdResponse,
    RoleAnswer,
    UpdateAssignmentsRequest,
    UpdateRoleRequest,
)
from icelog.api.routes import services
from icelog.api.routes.config import project_id
from icelog.domain.errors import BadRequestError, ForbiddenError, NoSuchRoleError, NotFoundError
from icelog.domain.identifiers import namespace_id
from icelog.domain.permissions import (
    ACTIONS,
    NAVIGATING,
    Kind,
    ObjectRef,
    PrincipalRef,
    allowed_actions,
    allows,
)
from icelog.projections.queries import CatalogQueries, decode_token, encode_token


def authorizer(request: Request) -> Authorizer:
    return cast(Authorizer, request.app.state.authorizer)


def caller(request: Request) -> frozenset[PrincipalRef]:
    return principals(request)


# -- which object a path names -------------------------------------------------------------
def _server(request: Request) -> ObjectRef:
    return SERVER


def _project(request: Request) -> ObjectRef:
    explicit = request.path_params.get("project_id")
    pid = parse_uuid(explicit, "project id") if explicit is not None else project_id(request)
    return ObjectRef("project", str(pid))


def _by_id(kind: Kind, param: str) -> Callable[[Request], ObjectRef]:
    def resolve(request: Request) -> ObjectRef:
        obj = ObjectRef(kind, str(parse_uuid(path_param(request, param), f"{kind} id")))
        chain = ancestors(services(request).queries, obj)  # 404 when it does not exist
        if kind in ("table", "view"):
            expected = str(parse_uuid(path_param(request, "warehouse_id"), "warehouse id"))
            if not any(o.kind == "warehouse" and o.id == expected for o in chain):
                raise missing(obj)  # as if unknown: no hint that it lives elsewhere
        return obj

    return resolve


OBJECTS: dict[str, Callable[[Request], ObjectRef]] = {
    "/permissions/server": _server,
    "/permissions/project": _project,
    "/permissions/project/{project_id}": _project,
    "/permissions/warehouse/{warehouse_id}": _by_id("warehouse", "warehouse_id"),
    "/permissions/namespace/{namespace_id}": _by_id("namespace", "namespace_id"),
    "/permissions/warehouse/{warehouse_id}/table/{table_id}": _by_id("table", "table_id"),
    "/permissions/warehouse/{warehouse_id}/view/{view_id}": _by_id("view", "view_id"),
    "/permissions/role/{role_id}": _by_id("role", "role_id"),
}


def _principal(item: Assignment) -> PrincipalRef:
    if item.user is not None:
        return PrincipalRef("user", item.user)
    return PrincipalRef("role", str(item.role))


def get_assignments(
    resolve: Callable[[Request], ObjectRef],
) -> Callable[[Request, AssignmentsQuery], GetAssignmentsResponse]:
    def handler(request: Request, query: AssignmentsQuery) -> GetAssignmentsResponse:
        obj = resolve(request)
        require(request, obj, "read_assignments")
        wanted = set(query.relations or ())
        position = None
        if query.as_of is not None:
            position, _, rows = _indexer(request).grants_at(_moment(query.as_of), object_id=obj.id)
            held = [(relation, kind, pid) for _, _, relation, kind, pid in rows]
        else:
            held = services(request).queries.grants_on(obj.id)
        found = [
            AssignmentAnswer.model_validate({"type": relation, kind: pid})
            for relation, kind, pid in held
            if not wanted or relation in wanted
        ]
        if position is None:
            return GetAssignmentsResponse(assignments=found)
        return GetAssignmentsResponse(assignments=found, as_of_position=position)

    return handler


def update_assignments(
    resolve: Callable[[Request], ObjectRef],
) -> Callable[[Request, UpdateAssignmentsRequest], None]:
    def handler(request: Request, body: UpdateAssignmentsRequest) -> None:
        obj = resolve(request)
        # Decided per item below; first, an object the caller may not see is unknown to
        # them, whatever (or however little) the body asks.
        hidden_unless_seen(request, obj)
        caps, own = authorizer(request).decide(caller(request), obj)
        for item in (*body.writes, *body.deletes):
            if not allows(obj.kind, f"grant_{item.type}", caps, own):
                raise ForbiddenError(f"Not allowed to grant {item.type} on {obj.kind} {obj.id}")
        if obj.kind == "role":
            _no_cycle(request, obj, body.writes)
        services(request).catalog.access.change_grants(
            context(request),
            obj,
            writes=[(i.type, _principal(i)) for i in body.writes],
            deletes=[(i.type, _principal(i)) for i in body.deletes],
        )
        authorizer(request).forget()

    return handler


def _no_cycle(request: Request, role: ObjectRef, writes: list[Assignment]) -> None:
    """A role may not become (through nesting) a member of itself: making X a member of
    `role` closes a cycle when `role` already is (transitively) a member of X."""
    above = {p.id for p in authorizer(request).principals(role.id)}  # role and its parents
    for item in writes:
        if item.role is not None and item.type == "assignee" and str(item.role) in above:
            raise BadRequestError(f"Role {item.role} would become a member of itself")


def get_access(
    resolve: Callable[[Request], ObjectRef],
) -> Callable[[Request, AccessQuery], GetAccessResponse]:
    def handler(request: Request, query: AccessQuery) -> GetAccessResponse:
        obj = resolve(request)
        auth = authorizer(request)
        position = None
        if query.as_of is not None and auth.enabled:
            past = GrantsAsOf(_indexer(request), _moment(query.as_of), services(request).queries)
            position = past.position
            auth = GrantAuthorizer(services(request).queries, grants=past)
        if query.principal_user is not None or query.principal_role is not None:
            require(request, obj, "read_assignments")
            who = _identity(auth, query.principal_user, query.principal_role)
        else:
            principal = getattr(request.state, "principal", None)
            user = principal.user_id if isinstance(principal, Principal) else "anonymous"
            who = auth.principals(user)
        caps, own = auth.decide(who, obj)
        # One's own access to what one may not see answers as unknown; as of a past moment,
        # what one could see then is answered (it tells nothing new) — if it was there
        # then: the object is found as it is now, and one made after a revoke must not
        # answer a former reader who names it (namespace ids derive from names).
        asking_for_self = query.principal_user is None and query.principal_role is None
        seen_then = (
            position is not None
            and "describe" in caps
            and _indexer(request).existed_at(position, obj.id)
        )
        if asking_for_self and not seen_then:
            hidden_unless_seen(request, obj)
        allowed = allowed_actions(obj.kind, caps, own)
        if position is None:
            return GetAccessResponse(allowed_actions=allowed)
        return GetAccessResponse(allowed_actions=allowed, as_of_position=position)

    return handler


def _identity(auth: Authorizer, user: str | None, role: UUID | None) -> frozenset[PrincipalRef]:
    if user is not None:
        return auth.principals(user)
    assert role is not None
    return frozenset({PrincipalRef("role", str(role))})


def check(request: Request, body: CheckRequest) -> CheckResponse:
    kind, target = next((k, v) for k, v in body.operation.__dict__.items() if v is not None)
    obj = _check_object(request, kind, target)
    if body.identity is not None and (body.identity.user or body.identity.role):
        require(request, obj, "read_assignments")
        who = _identity(authorizer(request), body.identity.user, body.identity.role)
    else:
        hidden_unless_seen(request, obj)
        who = caller(request)
    if not target.action.startswith("grant_") and target.action not in ACTIONS[obj.kind]:
        raise BadRequestError(f"{obj.kind} has no action {target.action!r}")
    caps, own = authorizer(request).decide(who, obj)
    return CheckResponse(allowed=allows(obj.kind, target.action, caps, own))


def _check_object(request: Request, kind: str, target: CheckObject) -> ObjectRef:
    if kind == "server":
        return SERVER
    if kind == "project":
        return ObjectRef("project", str(target.project_id or project_id(request)))
    found = getattr(target, f"{kind}_id")
    if found is None:
        raise BadRequestError(f"{kind}-id is required")
    obj = ObjectRef(cast(Kind, kind), str(found))
    ancestors(services(request).queries, obj)
    return obj


def namespace_id_of(request: Request, query: NamespaceIdQuery) -> NamespaceIdResponse:
    warehouse = parse_uuid(path_param(request, "warehouse_id"), "warehouse id")
    name = namespace_from_query(query.namespace)
    nid = namespace_id(warehouse, name)
    found = ObjectRef("namespace", str(nid))
    ancestors(services(request).queries, found)
    hidden_unless_seen(request, found)
    return NamespaceIdResponse(namespace_id=nid)


# -- roles ---------------------------------------------------------------------------------
def create_role(request: Request, body: CreateRoleRequest) -> RoleAnswer:
    pid = body.project_id or UUID(project_id(request))
    require(request, ObjectRef("project", str(pid)), "create_role")
    rid = services(request).catalog.access.create_role(
        context(request), pid, body.name, body.description
    )
    return _role(request, rid)


def _role(request: Request, role_id: UUID) -> RoleAnswer:
    found = services(request).primary.role(str(role_id))
    if found is None:
        raise NoSuchRoleError(f"Role does not exist: {role_id}")
    return RoleAnswer.model_validate(found)


def list_roles(request: Request, query: ListRolesQuery) -> ListRolesResponse:
    pid = project_id(request)
    require(request, ObjectRef("project", str(pid)), "list_roles")
    after = None
    if query.page_token:
        try:
            decoded: Any = orjson.loads(decode_token(query.page_token))
        except orjson.JSONDecodeError:
            decoded = None
        if not (isinstance(decoded, list) and len(decoded) == 2):
            raise BadRequestError(f"Invalid pageToken: {query.page_token!r}")
        after = (str(decoded[0]), str(decoded[1]))
    rows = services(request).queries.roles(
        str(pid), name=query.name, after=after, limit=query.page_size + 1
    )
    token = None
    if len(rows) > query.page_size:
        rows = rows[: query.page_size]
        token = encode_token(orjson.dumps([rows[-1]["name"], rows[-1]["id"]]).decode())
    return ListRolesResponse(
        roles=[RoleAnswer.model_validate(r) for r in rows], next_page_token=token
    )


def _role_id(request: Request) -> UUID:
    return parse_uuid(path_param(request, "role_id"), "role id")


def get_role(request: Request) -> RoleAnswer:
    rid = _role_id(request)
    require(request, ObjectRef("role", str(rid)), "read")
    return _role(request, rid)


def update_role(request: Request, body: UpdateRoleRequest) -> RoleAnswer:
    rid = _role_id(request)
    require(request, ObjectRef("role", str(rid)), "update")
    services(request).catalog.access.update_role(context(request), rid, body.name, body.description)
    return _role(request, rid)


def delete_role(request: Request) -> None:
    rid = _role_id(request)
    require(request, ObjectRef("role", str(rid)), "delete")
    services(request).catalog.access.delete_role(
        context(request), rid
    )  # a DELETE: the edge forgets


# -- who could do what, when ---------------------------------------------------------------
def _indexer(request: Request) -> Indexer:
    return cast(Indexer, request.app.state.indexer)


def _moment(value: str) -> tuple[int | None, int | None]:
    """`as-of`: a log position, or an RFC 3339 time with its offset."""
    position = ascii_int(value)
    if position is not None:
        return position, None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise BadRequestError(
            f"as-of must be a log position or an RFC 3339 time: {value!r}"
        ) from None
    if when.tzinfo is None:
        raise BadRequestError("as-of needs a time zone offset (e.g. Z)")
    return None, int(when.timestamp() * 1_000_000)


class GrantsAsOf:
    """The grants as they were at a past moment (the catalog history's grant versions); the
    objects' places in the tree are read as they are now (`queries`), as for the checks."""

    def __init__(
        self, indexer: Indexer, moment: tuple[int | None, int | None], queries: CatalogQueries
    ) -> None:
        self.indexer = indexer
        self.queries = queries
        self.position = indexer.resolve(moment)

    def holds_below(self, principal_ids: list[str], obj: ObjectRef) -> bool:
        """Whether a `NAVIGATING` grant they held then lies inside `obj` now."""
        for kind, object_id, relation, _ in self.grants_held(principal_ids):
            if relation not in NAVIGATING or kind not in (
                "warehouse",
                "namespace",
                "table",
                "view",
            ):
                continue
            try:
                above = ancestors(self.queries, ObjectRef(cast(Kind, kind), object_id))[1:]
            except NotFoundError:
                continue  # gone since: nothing inside it to find a way to
            if obj in above:
                return True
        return False

    def grants_held(
        self,
        principal_ids: list[str],
        object_ids: list[str] | None = None,
        object_kind: str | None = None,
    ) -> list[tuple[str, str, str, str]]:
        _, _, rows = self.indexer.grants_at((self.position, None), principal_ids=principal_ids)
        return [
            (kind, oid, relation, pid)
            for kind, oid, relation, _, pid in rows
            if (object_ids is None or oid in object_ids)
            and (object_kind is None or kind == object_kind)
        ]

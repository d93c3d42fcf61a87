"""The console's users, roles and assignments pages, and the "my access" panel of every
object page — over the API's own permission and user operations, called in-process
(api/console/calls.py), so every guard is the API's and a refusal reads as the API says it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response

from icelog.api.console.calls import ApiError, call, namespace_segment
from icelog.api.console.frame import (
    OPERATION,
    SEP,
    as_of_query,
    attempt,
    done,
    form,
    link,
    my_access,
    ns_levels,
    ns_param,
    page,
    render,
)
from icelog.domain.permissions import ACTIONS, RELATIONS, Kind

# How many users and roles a page reads to name the holders and fill the grant form.
PEOPLE_LIMIT = 500
# The relations listed strongest first in the grant form (the rest after, by name).
_ORDER = (
    "ownership", "admin", "operator", "project_admin", "security_admin", "data_admin",
    "manage_grants", "pass_grants", "modify", "create", "select", "describe",
    "role_creator", "assignee",
)  # fmt: skip


def relations(kind: str) -> list[str]:
    held = RELATIONS[cast(Kind, kind)]
    return sorted(held, key=lambda r: (_ORDER.index(r) if r in _ORDER else 99, r))


@dataclass
class Target:
    """The object whose assignments a page shows: its kind, the permission routes' path
    parameters, how the page names it and where its own page is."""

    kind: str
    path: dict[str, str]
    title: str
    here: str  # this access page
    back: str | None  # the object's own page
    crumbs: list[tuple[str, str | None]] = field(default_factory=list)
    project_id: str | None = None  # whose roles may be granted here


async def _people(request: Request, project_id: str | None) -> dict[str, Any]:
    """Users and the project's roles, to name holders and fill the grant form (each part
    may be refused on its own)."""
    # The project's security admins may search users there (api/routes/users.py).
    project = {"x-project-id": project_id} if project_id is not None else {}
    users, users_error = await attempt(
        call(request, "listUsers", query={"pageSize": PEOPLE_LIMIT}, headers=project)
    )
    roles, roles_error = (None, None)
    if project_id is not None:
        roles, roles_error = await attempt(
            call(
                request,
                "listRoles",
                query={"pageSize": PEOPLE_LIMIT},
                headers={"x-project-id": project_id},
            )
        )
    return {
        "users": (users or {}).get("users", []),
        "users_error": users_error,
        "roles": (roles or {}).get("roles", []),
        "roles_error": roles_error,
    }


def _names(people: dict[str, Any]) -> dict[str, str]:
    found = {f"user:{u['id']}": u["name"] for u in people["users"]}
    found.update({f"role:{r['id']}": r["name"] for r in people["roles"]})
    return found


async def _assignments(
    request: Request, target: Target
) -> tuple[list[dict[str, Any]] | None, ApiError | None]:
    answer, error = await attempt(
        call(
            request,
            f"get{OPERATION[target.kind]}Assignments",
            path=target.path,
            query=as_of_query(request),
        )
    )
    if answer is None:
        return None, error
    rows = [
        {
            "type": a["type"],
            "principal": f"user:{a['user']}" if a.get("user") else f"role:{a['role']}",
            "kind": "user" if a.get("user") else "role",
            "id": a.get("user") or a.get("role"),
        }
        for a in answer["assignments"]
    ]
    order = {r: i for i, r in enumerate(relations(target.kind))}
    rows.sort(key=lambda a: (order.get(a["type"], 99), a["kind"], a["id"]))
    return rows, None


async def _show(
    request: Request, target: Target, template: str = "access.html", **extra: Any
) -> Response:
    """An object's assignments, the caller's access and the grant form."""
    people = await _people(request, target.project_id)
    assignments, assignments_error = await _assignments(request, target)
    actions, access_error = await my_access(request, target.kind, target.path)
    who = request.query_params.get("principal", "")
    theirs: tuple[list[str] | None, ApiError | None] = (None, None)
    if who.startswith(("user:", "role:")):
        kind, _, pid = who.partition(":")
        who_key = "principalUser" if kind == "user" else "principalRole"
        query = {who_key: pid, **as_of_query(request)}
        answer, error = await attempt(
            call(request, f"get{OPERATION[target.kind]}Access", path=target.path, query=query)
        )
        theirs = (sorted(answer["allowed-actions"]) if answer else None, error)
    context = {
        "target": target,
        "relations": relations(target.kind),
        "assignments": assignments,
        "assignments_error": assignments_error,
        "actions": actions,
        "access_error": access_error,
        "all_actions": sorted(ACTIONS[cast(Kind, target.kind)]),
        "names": _names(people),
        "principal": who,
        "their_actions": theirs[0],
        "their_error": theirs[1],
        **people,
        **extra,
    }
    status = 200
    form_error = extra.get("form_error")
    if isinstance(form_error, ApiError):
        status = form_error.status
    return render(request, template, context, status=status)


async def _change(request: Request, target: Target, **extra: Any) -> Response:
    """A grant or a revoke from the page's forms: `update…Assignments` with one write or
    one delete. A refusal is shown on the page, above the form."""
    data = await form(request)
    relation = data.get("relation", "")
    principal = data.get("principal", "")
    typed = data.get("user-id", "").strip()
    if typed:
        principal = f"user:{typed}"
    kind, _, pid = principal.partition(":")
    if kind not in ("user", "role") or not pid or not relation:
        error = ApiError(400, "BadRequestException", "Choose a relation and a user or a role")
        return await _show(request, target, form_error=error, **extra)
    item = {"type": relation, kind: pid}
    revoke = data.get("op") == "revoke"
    body = {"deletes": [item]} if revoke else {"writes": [item]}
    try:
        await call(
            request, f"update{OPERATION[target.kind]}Assignments", path=target.path, body=body
        )
    except ApiError as error:
        return await _show(request, target, form_error=error, **extra)
    said = f"Revoked {relation} from {pid}" if revoke else f"Granted {relation} to {pid}"
    return done(target.here, said)


# -- which object ------------------------------------------------------------------------------
async def _server(request: Request) -> Target:
    return Target(
        "server", {}, "the server", "/ui/server/access", None,
        [("Users", "/ui/users"), ("Server access", None)],
    )  # fmt: skip


async def _project(request: Request) -> Target:
    pid = request.path_params["project_id"]
    info = await call(request, "getProjectById", path={"project_id": pid})
    name = info["project-name"]
    u = link(request.state.moment)
    return Target(
        "project", {"project_id": pid}, f"project {name}", f"/ui/projects/{pid}/access",
        u(f"/ui/projects/{pid}"),
        [("Projects", u("/ui/projects")), (name, u(f"/ui/projects/{pid}")), ("Access", None)],
        project_id=pid,
    )  # fmt: skip


async def _warehouse_info(request: Request, wid: str) -> dict[str, Any]:
    return cast(dict[str, Any], await call(request, "getWarehouse", path={"warehouse_id": wid}))


async def _project_of(request: Request, wid: str) -> str | None:
    """The warehouse's project (whose roles the grant form offers), if the caller may see
    the warehouse: a table can be theirs without it."""
    info, _ = await attempt(_warehouse_info(request, wid))
    return None if info is None else str(info["project-id"])


async def _warehouse(request: Request) -> Target:
    wid = request.path_params["warehouse_id"]
    info = await _warehouse_info(request, wid)
    u = link(request.state.moment)
    return Target(
        "warehouse", {"warehouse_id": wid}, f"warehouse {info['name']}",
        f"/ui/warehouses/{wid}/access", u(f"/ui/warehouses/{wid}"),
        [(info["name"], u(f"/ui/warehouses/{wid}")), ("Access", None)],
        project_id=info["project-id"],
    )  # fmt: skip


async def namespace_id(request: Request, wid: str, levels: list[str]) -> str:
    answer = await call(
        request,
        "getNamespaceId",
        path={"warehouse_id": wid},
        query={"namespace": SEP.join(levels)},
    )
    return str(answer["namespace-id"])


def _crumbs(request: Request, wid: str, levels: list[str]) -> list[tuple[str, str | None]]:
    u = link(request.state.moment)
    parts: list[tuple[str, str | None]] = [("Warehouse", u(f"/ui/warehouses/{wid}"))]
    for i in range(len(levels)):
        ns_page = u(f"/ui/warehouses/{wid}/namespace", ns=ns_param(levels[: i + 1]))
        parts.append((levels[i], ns_page))
    return parts


async def _tabular_target(request: Request, kind: str) -> Target:
    wid = request.path_params["warehouse_id"]
    levels = ns_levels(request)
    project_id = await _project_of(request, wid)
    u = link(request.state.moment)
    crumbs = _crumbs(request, wid, levels)
    ns = ns_param(levels)
    if kind == "namespace":
        nid = await namespace_id(request, wid, levels)
        return Target(
            "namespace", {"namespace_id": nid}, f"namespace {'.'.join(levels)}",
            f"/ui/warehouses/{wid}/namespace/access?ns={quote(ns)}",
            u(f"/ui/warehouses/{wid}/namespace", ns=ns), [*crumbs, ("Access", None)],
            project_id=project_id,
        )  # fmt: skip
    name = request.query_params.get("name", "")
    segment = {"prefix": wid, "namespace": namespace_segment(levels), kind: name}
    loaded = await call(request, "loadTable" if kind == "table" else "loadView", path=segment)
    tid = str(loaded["metadata"]["table-uuid" if kind == "table" else "view-uuid"])
    own = u(f"/ui/warehouses/{wid}/{kind}", ns=ns, name=name)
    return Target(
        kind, {"warehouse_id": wid, f"{kind}_id": tid}, f"{kind} {'.'.join([*levels, name])}",
        f"/ui/warehouses/{wid}/{kind}/access?ns={quote(ns)}&name={quote(name)}", own,
        [*crumbs, (name, own), ("Access", None)], project_id=project_id,
    )  # fmt: skip


async def _target(request: Request) -> Target:
    kind = request.path_params.get("kind")
    if kind is not None:
        if kind not in ("namespace", "table", "view"):
            raise ApiError(404, "NotFoundException", f"No console page {request.url.path}")
        return await _tabular_target(request, kind)
    if "warehouse_id" in request.path_params:
        return await _warehouse(request)
    if "project_id" in request.path_params:
        return await _project(request)
    return await _server(request)


@page
async def access(request: Request) -> Response:
    """`…/access`: who holds what on the object, what the caller may do, grant and revoke."""
    target = await _target(request)
    if request.method == "POST":
        if request.state.moment.active:
            raise ApiError(400, "BadRequestException", "Pages as of a past moment change nothing")
        return await _change(request, target)
    return await _show(request, target)


# -- users -------------------------------------------------------------------------------------
@page
async def users(request: Request) -> Response:
    name = request.query_params.get("name", "").strip()
    query: dict[str, Any] = {"pageSize": 100, "name": name or None}
    if request.query_params.get("page"):
        query["pageToken"] = request.query_params["page"]
    found, error = await attempt(call(request, "listUsers", query=query))
    me, _ = await attempt(call(request, "whoami"))
    actions, access_error = await my_access(request, "server", {})
    context = {
        "found": found,
        "error": error,
        "name": name,
        "me": me,
        "actions": actions,
        "access_error": access_error,
    }
    return render(request, "users.html", context)


@page
async def user_action(request: Request) -> Response:
    action = request.path_params["action"]
    data = await form(request)
    if action == "delete":
        user_id = data.get("id", "")
        await call(request, "deleteUser", path={"user_id": user_id})
        return done("/ui/users", f"Deleted user {user_id}")
    if action == "add":
        body: dict[str, Any] = {
            "id": data.get("id", "").strip(),
            "name": data.get("name", "").strip() or None,
            "email": data.get("email", "").strip() or None,
            "user-type": data.get("user-type") or "human",
        }
        await call(request, "createUser", body=body)
        return done("/ui/users", f"Added user {body['id']}")
    raise ApiError(404, "NotFoundException", f"No such action: {action}")


# -- roles -------------------------------------------------------------------------------------
@page
async def roles(request: Request) -> Response:
    pid = request.path_params["project_id"]
    info = await call(request, "getProjectById", path={"project_id": pid})
    name = request.query_params.get("name", "").strip()
    found, error = await attempt(
        call(
            request,
            "listRoles",
            query={"pageSize": PEOPLE_LIMIT, "name": name or None},
            headers={"x-project-id": pid},
        )
    )
    context = {"project": info, "found": found, "error": error, "name": name}
    return render(request, "roles.html", context)


@page
async def create_role(request: Request) -> Response:
    pid = request.path_params["project_id"]
    data = await form(request)
    body = {
        "name": data.get("name", "").strip(),
        "description": data.get("description", "").strip() or None,
        "project-id": pid,
    }
    answer = await call(request, "createRole", body=body)
    return done(f"/ui/roles/{answer['id']}", f"Role {answer['name']} created")


async def _role_target(request: Request) -> tuple[Target, dict[str, Any]]:
    rid = request.path_params["role_id"]
    role = await call(request, "getRole", path={"role_id": rid})
    pid = str(role["project-id"])
    u = link(request.state.moment)
    target = Target(
        "role", {"role_id": rid}, f"role {role['name']}", f"/ui/roles/{rid}", None,
        [("Projects", u("/ui/projects")), ("Project", u(f"/ui/projects/{pid}")),
         ("Roles", u(f"/ui/projects/{pid}/roles")), (role["name"], None)],
        project_id=pid,
    )  # fmt: skip
    return target, role


@page
async def role(request: Request) -> Response:
    target, found = await _role_target(request)
    if request.method == "POST":
        if request.state.moment.active:
            raise ApiError(400, "BadRequestException", "Pages as of a past moment change nothing")
        return await _change(request, target, role=found)
    return await _show(request, target, "role.html", role=found)


@page
async def role_action(request: Request) -> Response:
    rid = request.path_params["role_id"]
    action = request.path_params["action"]
    data = await form(request)
    if action == "rename":
        body = {
            "name": data.get("name", "").strip(),
            "description": data.get("description", "").strip() or None,
        }
        await call(request, "updateRole", path={"role_id": rid}, body=body)
        return done(f"/ui/roles/{rid}", "Role renamed")
    if action == "delete":
        found = await call(request, "getRole", path={"role_id": rid})
        await call(request, "deleteRole", path={"role_id": rid})
        return done(f"/ui/projects/{found['project-id']}/roles", f"Role {found['name']} deleted")
    raise ApiError(404, "NotFoundException", f"No such action: {action}")

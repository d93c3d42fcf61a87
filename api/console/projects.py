"""The console's project pages: the start page, the projects, one project and its forms."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from icelog.api.console.calls import ApiError, call
from icelog.api.console.frame import (
    actions,
    as_of_catalog,
    attempt,
    done,
    form,
    link,
    page,
    rename,
    render,
    with_access,
)


@page
async def home(request: Request) -> Response:
    """The start page leads to where there is something to see: with one project (that the
    caller may see), to its only warehouse — the default warehouse of a fresh server — or
    to the project; with none or several (or as of a past moment), to the projects."""
    u = link(request.state.moment)
    if request.state.moment.active:
        return RedirectResponse(u("/ui/projects"), status_code=303)
    listed, _ = await attempt(call(request, "listProjects"))
    projects = (listed or {}).get("projects", [])
    if len(projects) != 1:
        return RedirectResponse(u("/ui/projects"), status_code=303)
    pid = projects[0]["project-id"]
    found, _ = await attempt(call(request, "listWarehouses", headers={"x-project-id": pid}))
    warehouses = (found or {}).get("warehouses", [])
    if len(warehouses) == 1:
        return RedirectResponse(u(f"/ui/warehouses/{warehouses[0]['id']}"), status_code=303)
    return RedirectResponse(u(f"/ui/projects/{pid}"), status_code=303)


@page
async def projects(request: Request) -> Response:
    if request.state.moment.active:
        found = (await as_of_catalog(request))["projects"]
        rows = [{"project-id": p["project-id"], "project-name": p["name"]} for p in found]
    else:
        rows = (await call(request, "listProjects"))["projects"]
    return render(request, "projects.html", {"projects": rows})


@page
async def create_project(request: Request) -> Response:
    data = await form(request)
    try:
        answer = await call(request, "createProject", body={"project-name": data.get("name", "")})
    except ApiError as error:
        rows, _ = await attempt(call(request, "listProjects"))
        context = {"projects": (rows or {}).get("projects", []), "error": error}
        return render(request, "projects.html", context, status=error.status)
    return done(f"/ui/projects/{answer['project-id']}", "Project created")


@page
async def project(request: Request) -> Response:
    pid = request.path_params["project_id"]
    if request.state.moment.active:
        catalog = await as_of_catalog(request)
        found = [p for p in catalog["projects"] if p["project-id"] == pid]
        if not found:
            raise ApiError(404, "NoSuchProjectException", f"Project did not exist then: {pid}")
        info = {"project-id": pid, "project-name": found[0]["name"]}
        warehouses = [
            {"id": w["warehouse-id"], "name": w["name"], "as_of": True}
            for w in catalog["warehouses"].values()
            if w.get("project-id") == pid
        ]
    else:
        info = await call(request, "getProjectById", path={"project_id": pid})
        listed = await call(request, "listWarehouses", headers={"x-project-id": pid})
        warehouses = listed["warehouses"]
    context = {"project": info, "warehouses": warehouses}
    path = {"project_id": pid}
    await with_access(request, context, "project", path, f"/ui/projects/{pid}/access")
    return render(request, "project.html", context)


async def _delete(request: Request, pid: str, _data: dict[str, str]) -> Response:
    await call(request, "deleteProjectById", path={"project_id": pid})
    return done("/ui/projects", "Project deleted")


_RENAME = rename("renameProjectById", "project_id", "/ui/projects/{}", "Project renamed")
project_action = actions("project_id", {"rename": _RENAME, "delete": _delete})

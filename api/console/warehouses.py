"""The console's warehouse and namespace pages: a new warehouse's form, a warehouse (its
namespace tree, dropped tables and views, tasks, history) with its forms, and a namespace."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from icelog.api.console import history
from icelog.api.console.calls import ApiError, call, namespace_segment
from icelog.api.console.frame import (
    SEP,
    Moment,
    actions,
    as_of_catalog,
    attempt,
    done,
    form,
    ns_levels,
    ns_param,
    page,
    rename,
    render,
    with_access,
)
from icelog.api.http import ascii_int
from icelog.commands.storage import KINDS, FormField

# The storage kinds' forms, by kind, in the registry's order (the first is preselected).
_FORMS = {kind.name: kind.form for kind in KINDS}
# Inputs never shown again on a refused form.
_SECRET_INPUTS = {field.key for form in _FORMS.values() for field in form.fields if field.secret}

# How much of the namespace tree the warehouse page walks.
TREE_LIMIT = 300
# A warehouse's or namespace's history reads at most this many pages of 1000 events, and
# shows the newest of them.
HISTORY_PAGES = 20
HISTORY_SHOWN = 50


def _value(field: FormField, raw: str) -> Any:
    """What an input sends: None for nothing (the field is left out)."""
    if field.widget == "checkbox":
        return True if raw else None
    if field.widget == "json":
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw  # not JSON: the API refuses it, naming the field
    return raw if raw or field.required else None


def _storage_body(data: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The profile and credential the chosen kind's inputs describe (its `ConsoleForm`)."""
    chosen = data.get("storage-type") or KINDS[0].name
    form = _FORMS.get(chosen)
    if form is None:
        return {"type": chosen}, None  # no such kind: the API says which there are
    profile: dict[str, Any] = {"type": chosen}
    credential: dict[str, Any] = {}
    for field in form.fields:
        value = _value(field, data.get(field.key, ""))
        if value is not None:
            (credential if field.part == "credential" else profile)[field.key] = value
    if not credential:
        return profile, None
    # Every credential input goes, empty or not: the API says which one is missing.
    for field in form.fields:
        if field.part == "credential" and field.widget == "text":
            credential.setdefault(field.key, "")
    return profile, {**form.credential, **credential}


def _delete_profile(data: dict[str, str]) -> dict[str, Any]:
    if data.get("delete-type") == "soft":
        seconds = data.get("expiration-seconds", "") or "0"
        parsed = ascii_int(seconds)
        return {"type": "soft", "expiration-seconds": -1 if parsed is None else parsed}
    return {"type": "hard"}


@page
async def new_warehouse(request: Request) -> Response:
    pid = request.path_params["project_id"]
    context = {"project_id": pid, "values": {}, "kinds": KINDS}
    return render(request, "warehouse_new.html", context)


@page
async def create_warehouse(request: Request) -> Response:
    pid = request.path_params["project_id"]
    data = await form(request)
    profile, credential = _storage_body(data)
    body: dict[str, Any] = {
        "warehouse-name": data.get("name", ""),
        "project-id": pid,
        "storage-profile": profile,
        "delete-profile": _delete_profile(data),
    }
    if credential is not None:
        body["storage-credential"] = credential
    try:
        answer = await call(request, "createWarehouse", body=body)
    except ApiError as error:
        # The access check's answer (or any refusal) on the form, with what was typed —
        # never a secret.
        values = {k: v for k, v in data.items() if k not in _SECRET_INPUTS}
        context = {"project_id": pid, "values": values, "error": error, "kinds": KINDS}
        return render(request, "warehouse_new.html", context, status=error.status)
    return done(f"/ui/warehouses/{answer['warehouse-id']}", "Warehouse created")


async def _history(request: Request, query: dict[str, Any]) -> list[dict[str, Any]]:
    """The newest events of a warehouse or namespace (up to the page's moment), each with
    what it changed. The log is read in order, page after page (bounded), so that the
    newest are shown and property values are known from the events before them."""
    moment: Moment = request.state.moment
    found: list[dict[str, Any]] = []
    after = 0
    for _ in range(HISTORY_PAGES):
        answer = await call(request, "listEvents", query={**query, "limit": 1000, "after": after})
        found += answer["events"]
        after = answer.get("next-after")
        if after is None or (moment.active and after >= (moment.position or 0)):
            break
    shown = [
        e
        for e in history.describe_events(found)
        if not moment.active or e["position"] <= (moment.position or 0)
    ]
    return list(reversed(shown))[:HISTORY_SHOWN]


async def _tree(request: Request, wid: str) -> tuple[list[dict[str, Any]], bool]:
    """The namespace tree (depth first), as far as the caller may list it."""
    found: list[dict[str, Any]] = []
    pending: list[list[str] | None] = [None]
    while pending and len(found) < TREE_LIMIT:
        parent = pending.pop()
        query = {"parent": ns_param(parent)} if parent else {}
        answer = await call(request, "listNamespaces", path={"prefix": wid}, query=query)
        children = sorted(answer["namespaces"], reverse=True)
        pending += children
        if parent is not None:
            found.append({"namespace": parent})
    return found, bool(pending)


@page
async def warehouse(request: Request) -> Response:
    wid = request.path_params["warehouse_id"]
    moment: Moment = request.state.moment
    path = {"warehouse_id": wid}
    context: dict[str, Any] = {}
    if moment.active:
        catalog = await as_of_catalog(request, wid)
        held = catalog["warehouses"].get(wid)
        if held is None:
            raise ApiError(404, "NoSuchWarehouseException", f"Warehouse did not exist then: {wid}")
        context["warehouse"] = {"id": wid, "name": held["name"], "project-id": held["project-id"]}
        namespaces = sorted(held["namespaces"].values(), key=lambda n: n["namespace"])
        context["tree"], context["tree_cut"] = namespaces, False
        tables = sum(len(n["tables"]) for n in namespaces)
        views = sum(len(n["views"]) for n in namespaces)
        context["stats"] = {"namespaces": len(namespaces), "tables": tables, "views": views}
    else:
        context["warehouse"] = await call(request, "getWarehouse", path=path)
        context["tree"], context["tree_cut"] = await _tree(request, wid)
        context["stats"] = {"namespaces": len(context["tree"])}
        context["deleted"], context["deleted_error"] = await attempt(
            call(request, "listDeletedTabulars", path=path, query={"pageSize": 1000})
        )
        context["tasks"], context["tasks_error"] = await attempt(
            call(request, "listTasks", path=path)
        )
    context["events"], context["events_error"] = await attempt(
        _history(request, {"warehouse-id": wid})
    )
    await with_access(request, context, "warehouse", path, f"/ui/warehouses/{wid}/access")
    return render(request, "warehouse.html", context)


async def _changed(
    request: Request, wid: str, operation: str, body: dict[str, Any], message: str
) -> Response:
    """A form's change to the warehouse, then back to its page saying what was done."""
    await call(request, operation, path={"warehouse_id": wid}, body=body)
    return done(f"/ui/warehouses/{wid}", message)


async def _delete(request: Request, wid: str, data: dict[str, str]) -> Response:
    project_id = data.get("project-id", "")
    await call(request, "deleteWarehouse", path={"warehouse_id": wid})
    return done(f"/ui/projects/{project_id}" if project_id else "/ui/projects", "Warehouse deleted")


async def _delete_profile_change(request: Request, wid: str, data: dict[str, str]) -> Response:
    body = {"delete-profile": _delete_profile(data)}
    return await _changed(request, wid, "updateDeleteProfile", body, "Delete profile changed")


async def _protection(request: Request, wid: str, data: dict[str, str]) -> Response:
    body = {"protected": data.get("protected") == "true"}
    return await _changed(request, wid, "setWarehouseProtection", body, "Protection changed")


async def _undrop(request: Request, wid: str, data: dict[str, str]) -> Response:
    target = {"type": data.get("type", "table"), "id": data.get("id", "")}
    if data.get("new-name"):
        target["new-name"] = data["new-name"]
    body = {"targets": [target]}
    return await _changed(
        request, wid, "undropTabulars", body, f"Restored {data.get('name', 'it')}"
    )


warehouse_action = actions(
    "warehouse_id",
    {
        "rename": rename(
            "renameWarehouse", "warehouse_id", "/ui/warehouses/{}", "Warehouse renamed"
        ),
        "delete": _delete,
        "delete-profile": _delete_profile_change,
        "protection": _protection,
        "undrop": _undrop,
    },
)


@page
async def namespace(request: Request) -> Response:
    wid = request.path_params["warehouse_id"]
    levels = ns_levels(request)
    moment: Moment = request.state.moment
    context: dict[str, Any] = {"wid": wid, "levels": levels}
    if moment.active:
        held = (await as_of_catalog(request, wid))["warehouses"].get(wid, {"namespaces": {}})
        ns = held["namespaces"].get(SEP.join(levels))
        if ns is None:
            dotted = ".".join(levels)
            raise ApiError(
                404, "NoSuchNamespaceException", f"Namespace did not exist then: {dotted}"
            )
        context["properties"] = ns["properties"]
        context["children"] = [
            n["namespace"] for n in held["namespaces"].values() if n["namespace"][:-1] == levels
        ]
        context["tables"] = [t["name"] for t in ns["tables"] if not t.get("soft-deleted")]
        context["views"] = [v["name"] for v in ns["views"] if not v.get("soft-deleted")]
    else:
        segment = {"prefix": wid, "namespace": namespace_segment(levels)}
        # Each part may be refused on its own (shown in place): someone with a grant below
        # the namespace loads it and lists the way to what they hold (docs/auth.md, "What
        # each right allows"); the page fails only when every part does.
        loaded, context["properties_error"] = await attempt(
            call(request, "loadNamespace", path=segment)
        )
        context["properties"] = (loaded or {}).get("properties", {})
        children, children_error = await attempt(
            call(
                request, "listNamespaces", path={"prefix": wid}, query={"parent": ns_param(levels)}
            )
        )
        tables, tables_error = await attempt(call(request, "listTables", path=segment))
        views, views_error = await attempt(call(request, "listViews", path=segment))
        if loaded is None and children is None and tables is None and views is None:
            refused = context["properties_error"] or children_error or tables_error or views_error
            assert refused is not None
            raise refused
        context["children"] = (children or {}).get("namespaces", [])
        context["tables"] = [t["name"] for t in (tables or {}).get("identifiers", [])]
        context["views"] = [v["name"] for v in (views or {}).get("identifiers", [])]
    context["events"], context["events_error"] = await attempt(
        _history(request, {"warehouse-id": wid, "namespace": ".".join(levels)})
    )
    nid, nid_error = await attempt(
        call(
            request,
            "getNamespaceId",
            path={"warehouse_id": wid},
            query={"namespace": SEP.join(levels)},
        )
    )
    url = f"/ui/warehouses/{wid}/namespace/access?" + urlencode({"ns": ns_param(levels)})
    if nid is None:
        context["access"], context["access_url"] = (None, nid_error), url
    else:
        path = {"namespace_id": str(nid["namespace-id"])}
        await with_access(request, context, "namespace", path, url)
    return render(request, "namespace.html", context)


@page
async def task(request: Request) -> Response:
    """One task (an expiration or a purge) with every attempt, from its own events."""
    wid, tid = request.path_params["warehouse_id"], request.path_params["task_id"]
    found = await call(request, "getTask", path={"warehouse_id": wid, "task_id": tid})
    logged = await call(request, "listEvents", query={"aggregate-id": tid, "limit": 1000})
    context = {
        "warehouse_id": wid,
        "task": found,
        "attempts": history.task_attempts(logged["events"]),
    }
    return render(request, "task.html", context)

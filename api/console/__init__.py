"""The web console at `/ui` (docs/console.md, ADR 0016): server-rendered pages over the
API's own operations, called in-process; its templates and one CSS and one JS file are
package data, so it works offline and needs nothing but `icelog serve`."""

from __future__ import annotations

from pathlib import Path

from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from icelog.api.console import access, log, login, projects, status, tabulars, warehouses

STATIC = Path(__file__).parent / "static"


# Every answer under /ui: never inside another site's frame (clickjacking), no type sniffing,
# and the console's URLs (which may carry a login's code) not sent to other sites.
CONSOLE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)


class ConsoleHeaders:
    """ASGI middleware: `CONSOLE_HEADERS` on every `/ui` answer (pages, redirects, assets)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != "/ui" and not path.startswith("/ui/"):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {bytes(name).lower() for name, _ in message.get("headers", [])}
                extra = [h for h in CONSOLE_HEADERS if h[0] not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)


def console_routes() -> list[BaseRoute]:
    wh = "/ui/warehouses/{warehouse_id}"
    return [
        Route("/ui", projects.home, methods=["GET"]),
        Route("/ui/", projects.home, methods=["GET"]),
        Route("/ui/projects", projects.projects, methods=["GET"]),
        Route("/ui/projects", projects.create_project, methods=["POST"]),
        Route("/ui/projects/{project_id}", projects.project, methods=["GET"]),
        Route("/ui/projects/{project_id}/new-warehouse", warehouses.new_warehouse, methods=["GET"]),
        Route(
            "/ui/projects/{project_id}/new-warehouse", warehouses.create_warehouse, methods=["POST"]
        ),
        Route("/ui/projects/{project_id}/access", access.access, methods=["GET", "POST"]),
        Route("/ui/projects/{project_id}/roles", access.roles, methods=["GET"]),
        Route("/ui/projects/{project_id}/roles", access.create_role, methods=["POST"]),
        Route("/ui/projects/{project_id}/{action}", projects.project_action, methods=["POST"]),
        Route("/ui/roles/{role_id}", access.role, methods=["GET", "POST"]),
        Route("/ui/roles/{role_id}/{action}", access.role_action, methods=["POST"]),
        Route("/ui/users", access.users, methods=["GET"]),
        Route("/ui/users/{action}", access.user_action, methods=["POST"]),
        Route("/ui/server/access", access.access, methods=["GET", "POST"]),
        Route(wh, warehouses.warehouse, methods=["GET"]),
        Route(wh + "/namespace", warehouses.namespace, methods=["GET"]),
        Route(wh + "/table", tabulars.table, methods=["GET"]),
        Route(wh + "/view", tabulars.view, methods=["GET"]),
        Route(wh + "/tasks/{task_id}", warehouses.task, methods=["GET"]),
        Route(wh + "/access", access.access, methods=["GET", "POST"]),
        Route(wh + "/{kind}/access", access.access, methods=["GET", "POST"]),
        Route(wh + "/{kind}/{action}", tabulars.tabular_action, methods=["POST"]),
        Route(wh + "/{action}", warehouses.warehouse_action, methods=["POST"]),
        Route("/ui/events", log.events, methods=["GET"]),
        Route("/ui/events/{position}", log.event_object, methods=["GET"]),
        Route("/ui/status", status.status, methods=["GET"]),
        Route("/ui/login", login.login, methods=["GET"]),
        Route("/ui/login/start", login.login_start, methods=["GET"]),
        Route("/ui/callback", login.callback, methods=["GET"], name="console-callback"),
        # POST only, from the console's own pages (a cross-site form cannot log anyone out).
        Route("/ui/logout", login.logout, methods=["POST"]),
        Mount("/ui/static", app=StaticFiles(directory=str(STATIC)), name="console-static"),
        Route("/ui/{rest:path}", status.not_found, methods=["GET", "POST"]),
    ]

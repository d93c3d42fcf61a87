"""Route modules; `api.app` mounts them."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from icelog.api.services import Services


def services(request: Request) -> Services:
    found: Any = request.app.state.services
    assert isinstance(found, Services)
    return found


def prefix(request: Request) -> str | None:
    value = request.path_params.get("prefix")
    return str(value) if value is not None else None

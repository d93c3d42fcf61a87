"""Client helpers: a PyIceberg REST catalog for a test server, file listings for purge checks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from tests.support.server import CatalogServer


def rest_catalog(server: CatalogServer, name: str = "icelog", **props: str) -> Any:
    from pyiceberg.catalog import load_catalog

    settings = {"warehouse": server.warehouse, **props}
    if server.token and "token" not in props and "credential" not in props:
        settings["token"] = server.token
    return load_catalog(name, type="rest", uri=server.uri, **settings)


def local_path(location: str) -> Path:
    """``file:///a/b`` or ``/a/b`` → ``Path('/a/b')``."""
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        raise ValueError(f"not a local location: {location}")
    return Path(unquote(parsed.path))


def files_under(location: str) -> set[Path]:
    root = local_path(location)
    return {p for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def wait_until(predicate: Any, timeout: float = 15.0, interval: float = 0.2) -> bool:
    """Poll ``predicate()`` until it is truthy (for work a server may finish asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)

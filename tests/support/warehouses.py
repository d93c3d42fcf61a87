"""Extra warehouses on a running test server (e.g. with a soft delete profile)."""

from __future__ import annotations

import secrets
from typing import Any

import httpx

from tests.support.server import CatalogServer


def create_warehouse(
    server: CatalogServer, delete_profile: dict[str, Any], prefix: str = "wh"
) -> tuple[str, str]:
    """Create a warehouse under the server's data dir; returns (name, id)."""
    name = f"{prefix}_{secrets.token_hex(3)}"
    base = server.data_dir / "warehouses" / name
    response = httpx.post(
        f"{server.base}/management/v1/warehouse",
        json={
            "warehouse-name": name,
            "storage-profile": {"type": "file", "base-location": f"file://{base}"},
            "delete-profile": delete_profile,
        },
        headers=server.headers(),
    )
    assert response.status_code in (200, 201), response.text
    return name, str(response.json()["warehouse-id"])


def deleted_tabulars(server: CatalogServer, warehouse_id: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{server.base}/management/v1/warehouse/{warehouse_id}/deleted-tabulars",
        headers=server.headers(),
    )
    response.raise_for_status()
    found: list[dict[str, Any]] = response.json()["tabulars"]
    return found


def undrop(server: CatalogServer, warehouse_id: str, *targets: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{server.base}/management/v1/warehouse/{warehouse_id}/deleted-tabulars/undrop",
        json={"targets": list(targets)},
        headers=server.headers(),
    )

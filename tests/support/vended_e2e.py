"""What the end-to-end tests of vended storage credentials (tests/e2e/test_adls_pyiceberg.py,
tests/e2e/test_gcs_pyiceberg.py) share: a deployment with authentication off or on, a
warehouse created through the management API as a user sends it, table grants to other
users, and what a client's properties may not hold.

An `auth` deployment is the `sqlite-auth` server of tests/support/fixtures.py: its clients
act as E2E_WRITER, who holds nothing but `create` on the project (so the warehouse, its
namespaces and tables are the writer's own); E2E_ADMIN hands out table grants to the other
users of a test, each holding exactly one relation on one table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from tests.support.clients import rest_catalog
from tests.support.fixtures import E2E_ADMIN
from tests.support.idp import TestIdentityProvider
from tests.support.server import CatalogServer

VENDED = {"header.X-Iceberg-Access-Delegation": "vended-credentials"}
# Prefixes of FileIO properties that configure storage: a client configured with none of
# them reaches its files with what the catalog vends, or not at all.
STORAGE_PREFIXES = ("adls.", "gcs.", "s3.", "client.", "hadoop.", "fs.")


@dataclass
class Deployment:
    """An `icelog serve` process, with (`idp`) or without authentication."""

    name: str
    server: CatalogServer
    idp: TestIdentityProvider | None = None

    @property
    def auth(self) -> bool:
        return self.idp is not None

    def admin_headers(self) -> dict[str, str]:
        assert self.idp is not None
        return {"Authorization": f"Bearer {self.idp.issue(E2E_ADMIN)}"}

    def create_warehouse(
        self, name: str, profile: dict[str, Any], credential: dict[str, Any]
    ) -> httpx.Response:
        """`POST /management/v1/warehouse` as the clients' user (the writer, with auth)."""
        return httpx.post(
            f"{self.server.base}/management/v1/warehouse",
            json={
                "warehouse-name": name,
                "storage-profile": profile,
                "storage-credential": credential,
            },
            headers=self.server.headers(),
            timeout=60,
        )

    def warehouse(self, name: str, profile: dict[str, Any], credential: dict[str, Any]) -> str:
        """A new warehouse; its id."""
        created = self.create_warehouse(name, profile, credential)
        assert created.status_code == 200, created.text
        return str(created.json()["warehouse-id"])

    def catalog(self, warehouse: str, *, token: str | None = None, name: str = "icelog") -> Any:
        """PyIceberg's REST catalog asking for vended credentials, with no storage
        configuration of its own (as the clients' user, or with `token`)."""
        props = dict(VENDED)
        if token is not None:
            props["token"] = token
        catalog = rest_catalog(self.server, name=name, warehouse=warehouse, **props)
        assert storage_keys(catalog.properties) == [], catalog.properties
        return catalog

    def grant_on_table(self, warehouse_id: str, table_id: str, relation: str, user: str) -> str:
        """`relation` on one table for `user` (granted by the admin); the user's token."""
        assert self.idp is not None
        granted = httpx.post(
            f"{self.server.base}/management/v1/permissions/warehouse/{warehouse_id}"
            f"/table/{table_id}/assignments",
            json={"writes": [{"type": relation, "user": f"oidc~{user}"}]},
            headers=self.admin_headers(),
            timeout=30,
        )
        assert granted.status_code == 204, granted.text
        return self.idp.issue(user)

    def credentials(
        self, warehouse_id: str, namespace: str, table: str, *, token: str | None = None
    ) -> httpx.Response:
        """`GET /v1/{prefix}/namespaces/{ns}/tables/{t}/credentials`."""
        headers = {"Authorization": f"Bearer {token}"} if token else self.server.headers()
        return httpx.get(
            f"{self.server.uri}/v1/{warehouse_id}/namespaces/{namespace}/tables/{table}"
            "/credentials",
            headers=headers,
            timeout=30,
        )


def storage_keys(properties: dict[str, Any]) -> list[str]:
    """The keys of `properties` that configure storage access."""
    return sorted(k for k in properties if k.startswith(STORAGE_PREFIXES))

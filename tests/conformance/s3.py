"""S3 warehouses for the conformance runs, in a moto server (`conftest.s3_endpoint`)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.server import CatalogServer

BUCKET = "conformance"
REGION = "us-east-1"
# moto's default mode takes any key: what the catalog sends to S3, and whether its
# signatures hold, is for tests/integration (moto with its IAM checks on).
CREDENTIAL = {"type": "s3", "access-key-id": "conformance", "secret-access-key": "conformance"}


def s3_profile(endpoint: str, key_prefix: str) -> dict[str, Any]:
    """Vended credentials (STS at moto) and remote signing, both on."""
    return {
        "type": "s3",
        "bucket": BUCKET,
        "key-prefix": key_prefix,
        "region": REGION,
        "endpoint": endpoint,
        "path-style-access": True,
        "flavor": "s3-compat",
        "sts-enabled": True,
    }


def create_s3_warehouse(server: CatalogServer, endpoint: str, name: str, key_prefix: str) -> str:
    """A warehouse in `BUCKET` below ``key_prefix`` ("" for the whole bucket); its id."""
    response = httpx.post(
        f"{server.base}/management/v1/warehouse",
        json={
            "warehouse-name": name,
            "storage-profile": s3_profile(endpoint, key_prefix),
            "storage-credential": CREDENTIAL,
        },
        headers=server.headers(),
        timeout=60,
    )
    assert response.status_code == 200, response.text
    return str(response.json()["warehouse-id"])

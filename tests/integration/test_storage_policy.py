"""The operator's allow-lists: `ICELOG_FILE_WAREHOUSE_ROOTS` (where file warehouses may
live) and `ICELOG_S3_ENDPOINT_HOSTS` (which S3 and STS endpoints profiles may name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icelog.api.settings import Settings, SettingsError
from tests.integration.conftest import BACKENDS
from tests.support.hostile import assert_error, catalog

ROOT = "/management/v1"


def s3_profile(endpoint: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "s3",
        "bucket": "lake",
        "key-prefix": "wh",
        "region": "us-east-1",
        "endpoint": endpoint,
        "path-style-access": True,
        "flavor": "s3-compat",
        **extra,
    }


CREDENTIAL = {"type": "s3", "credential-type": "access-key", "access-key-id": "k"}
CREDENTIAL["secret-access-key"] = "s"


@pytest.mark.parametrize("backend", [p.values[0] for p in BACKENDS])
def test_file_warehouses_only_below_the_allowed_roots(backend: str, tmp_path: Path) -> None:
    allowed = tmp_path / "data"  # holds the default warehouse (data/warehouse)
    roots = (f"file://{allowed}",)
    for api in catalog(backend, tmp_path, file_warehouse_roots=roots):
        inside = api.client.post(
            f"{ROOT}/warehouse",
            json={
                "warehouse-name": "inside",
                "storage-profile": {"type": "file", "base-location": f"file://{allowed}/a"},
            },
        )
        assert inside.status_code in (200, 201), inside.text
        for name, base in (
            ("beside", f"file://{tmp_path}/data2/a"),  # a sibling with the same prefix
            ("above", f"file://{tmp_path}"),
            ("elsewhere", "file:///tmp/icelog-elsewhere"),
        ):
            refused = api.client.post(
                f"{ROOT}/warehouse",
                json={
                    "warehouse-name": name,
                    "storage-profile": {"type": "file", "base-location": base},
                },
            )
            assert "ICELOG_FILE_WAREHOUSE_ROOTS" in assert_error(refused, 400)
            assert not Path(base.removeprefix("file://")).exists() or name == "above"


def test_s3_endpoints_only_on_the_allowed_hosts(tmp_path: Path) -> None:
    hosts = ("minio.internal:9000", "s3.eu-west-1.amazonaws.com")
    for api in catalog("sqlite", tmp_path, s3_endpoint_hosts=hosts):
        for key, profile in (
            ("endpoint", s3_profile("http://169.254.169.254:80")),
            ("endpoint", s3_profile("http://minio.internal:9001")),  # right host, other port
            (
                "sts-endpoint",
                s3_profile(
                    "http://minio.internal:9000", **{"sts-endpoint": "http://127.0.0.1:6379"}
                ),
            ),
        ):
            refused = api.client.post(
                f"{ROOT}/warehouse",
                json={
                    "warehouse-name": "w",
                    "storage-profile": profile,
                    "storage-credential": CREDENTIAL,
                },
            )
            message = assert_error(refused, 400)
            assert f"storage-profile.{key}" in message and "ICELOG_S3_ENDPOINT_HOSTS" in message


def test_the_allow_lists_are_read_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "ICELOG_FILE_WAREHOUSE_ROOTS": "/srv/lakes, file:///data/x/",
            "ICELOG_S3_ENDPOINT_HOSTS": "MinIO.internal:9000,s3.amazonaws.com",
        }
    )
    assert settings.file_warehouse_roots == ("file:///srv/lakes", "file:///data/x")
    assert settings.s3_endpoint_hosts == ("minio.internal:9000", "s3.amazonaws.com")
    with pytest.raises(SettingsError):
        Settings.from_env({"ICELOG_FILE_WAREHOUSE_ROOTS": "s3://bucket/prefix"})
    with pytest.raises(SettingsError):
        Settings.from_env({"ICELOG_FILE_WAREHOUSE_ROOTS": "/srv/../etc"})

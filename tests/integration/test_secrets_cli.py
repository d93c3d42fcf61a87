"""`icelog secrets rotate`: every storage credential re-encrypted under the new key."""

from __future__ import annotations

import base64
from pathlib import Path
from uuid import UUID

import pytest

from icelog.api.services import Services
from icelog.api.settings import Settings
from icelog.domain.context import SYSTEM
from icelog.domain.identifiers import NIL_UUID
from tests.integration.conftest import BACKENDS
from tests.integration.test_cli import icelog
from tests.support import postgres

OLD = base64.b64encode(bytes(range(1, 33))).decode()
NEW = base64.b64encode(bytes(range(50, 82))).decode()
CREDENTIAL = {
    "type": "s3",
    "credential-type": "access-key",
    "access-key-id": "AKIAROTATE0000000001",
    "secret-access-key": "rotate-me-secret",
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_rotate_reencrypts_under_the_new_key(backend: str, tmp_path: Path) -> None:
    url = postgres.create_database() if backend == "postgres" else None
    try:
        env = {"ICELOG_DATA_DIR": str(tmp_path), "ICELOG_TASK_WORKERS": "0"}
        if url:
            env["ICELOG_DATABASE_URL"] = url
        services = Services.build(Settings.from_env({**env, "ICELOG_SECRETS_KEY": OLD}))
        try:
            services.ensure_defaults()
            wid = services.catalog.management.create_warehouse(
                SYSTEM,
                project_id=NIL_UUID,
                name="lake",
                storage_profile={"type": "s3", "bucket": "lake", "region": "us-east-1"},
                storage_credential=CREDENTIAL,
                check_access=False,
            )
            credential_id = UUID(
                services.catalog.management.get_warehouse(wid).storage_profile["credential-id"]
            )
        finally:
            services.close()

        without_old = icelog("secrets", "rotate", env={**env, "ICELOG_SECRETS_KEY": NEW})
        assert without_old.returncode == 1
        assert "ICELOG_SECRETS_OLD_KEYS" in without_old.stdout
        rotated = icelog(
            "secrets",
            "rotate",
            env={**env, "ICELOG_SECRETS_KEY": NEW, "ICELOG_SECRETS_OLD_KEYS": OLD},
        )
        assert rotated.returncode == 0, rotated.stderr
        assert "re-encrypted 1 storage credential(s)" in rotated.stdout
        for output in (without_old.stdout, without_old.stderr, rotated.stdout, rotated.stderr):
            assert "rotate-me-secret" not in output and NEW not in output and OLD not in output

        services = Services.build(Settings.from_env({**env, "ICELOG_SECRETS_KEY": NEW}))
        try:
            assert services.catalog.app.secrets is not None
            assert services.catalog.app.secrets.get(credential_id) == CREDENTIAL
        finally:
            services.close()
    finally:
        if url:
            postgres.drop_database(url)

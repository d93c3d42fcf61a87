"""The storage-credentials key is checked before the server starts, and never printed."""

from __future__ import annotations

import base64

import pytest

from icelog.api.settings import Settings, SettingsError

PG = "postgresql://postgres@127.0.0.1:5432/icelog"
GOOD = base64.b64encode(bytes(range(100, 132))).decode()


def test_postgres_requires_a_key() -> None:
    with pytest.raises(SettingsError, match="ICELOG_SECRETS_KEY is required with PostgreSQL"):
        Settings.from_env({"ICELOG_DATABASE_URL": PG})
    settings = Settings.from_env({"ICELOG_DATABASE_URL": PG, "ICELOG_SECRETS_KEY": GOOD})
    assert settings.secrets_key == GOOD


def test_the_embedded_default_needs_no_key() -> None:
    assert Settings.from_env({}).secrets_key is None


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("not base64!", "base64"),
        (base64.b64encode(b"short").decode(), "32 bytes"),
        (base64.b64encode(bytes(32)).decode(), "too weak"),
    ],
)
def test_bad_keys_are_refused_without_echoing_them(key: str, reason: str) -> None:
    for name in ("ICELOG_SECRETS_KEY", "ICELOG_SECRETS_OLD_KEYS"):
        env = {"ICELOG_SECRETS_KEY": GOOD, name: key}
        with pytest.raises(SettingsError, match=reason) as caught:
            Settings.from_env(env)
        assert key not in str(caught.value)
        assert name in str(caught.value)


def test_storage_validation_can_be_skipped() -> None:
    assert Settings.from_env({}).skip_storage_validation is False
    assert Settings.from_env({"ICELOG_SKIP_STORAGE_VALIDATION": "true"}).skip_storage_validation

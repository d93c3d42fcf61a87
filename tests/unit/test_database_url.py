"""ICELOG_DATABASE_URL as settings read it: mistakes are configuration errors, and libpq's
own forms (several hosts for failover) pass through to libpq."""

from __future__ import annotations

import pytest

from icelog.api.settings import Settings, SettingsError, redact_url
from tests.support.postgres import TEST_SECRETS_KEY

KEY = {"ICELOG_SECRETS_KEY": TEST_SECRETS_KEY}


def _url(url: str) -> str | None:
    return Settings.from_env({**KEY, "ICELOG_DATABASE_URL": url}).database_url


def test_a_multi_host_url_is_libpqs_to_parse() -> None:
    url = "postgresql://icelog@db1:5432,db2:5433/icelog?target_session_attrs=read-write"
    assert _url(url) == url


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://icelog@db:70000/icelog",
        "postgresql://icelog:pa/ss@db:5432/icelog",
        "postgresql://icelog@db:5432",
        "mysql://icelog@db/icelog",
    ],
)
def test_a_malformed_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(SettingsError) as raised:
        _url(url)
    assert "pa/ss" not in str(raised.value) and "ss@db" not in str(raised.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:s3cret@db/x", "postgresql://u:***@db/x"),
        ("postgresql://u:s3cret@[::1]:5432/x", "postgresql://u:***@[::1]:5432/x"),
        ("postgresql://u:s3cret@h1:5432,h2:5433/x", "postgresql://u:***@h1:5432,h2:5433/x"),
        ("postgresql://:s3cret@db/x", "postgresql://:***@db/x"),
        (
            "postgresql://u@db/x?password=s3cret&sslmode=require",
            "postgresql://u@db/x?password=***&sslmode=require",
        ),
    ],
)
def test_a_redacted_url_keeps_everything_but_the_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown

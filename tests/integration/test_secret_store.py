"""Encrypted storage credentials (both backends): never stored in clear, rotatable."""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest

from icelog.projections.secrets import SecretKeyError, SecretStore, SecretUnreadable, parse_key
from icelog.projections.sql import write_transaction
from tests.integration.conftest import Api

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def new_key() -> bytes:
    return parse_key(base64.b64encode(os.urandom(32)).decode())


def store(api: Api, key: bytes, *old: bytes) -> SecretStore:
    found = SecretStore(api.services.catalog.app.recorder.datastore, key, old)  # type: ignore[attr-defined]
    found.ensure_schema()
    return found


def raw_rows(api: Api) -> list[Any]:
    datastore = api.services.catalog.app.recorder.datastore  # type: ignore[attr-defined]
    with write_transaction(datastore) as cur:
        cur.execute("SELECT id, key_id, nonce, sealed FROM icelog_secrets")
        return [tuple(r) for r in cur.fetchall()]


def test_round_trip_and_nothing_in_clear(api: Api) -> None:
    secrets = store(api, new_key())
    credential = {"type": "s3", "access-key-id": "AKID", "secret-access-key": SECRET}
    secret_id = secrets.put(credential)
    assert secrets.get(secret_id) == credential
    assert all(SECRET not in str(row) for row in raw_rows(api))
    secrets.delete(secret_id)
    assert secrets.get(secret_id) is None


def test_wrong_key_altered_value_and_rotation(api: Api) -> None:
    old, new = new_key(), new_key()
    secret_id = store(api, old).put({"secret-access-key": SECRET})
    with pytest.raises(SecretUnreadable, match="unknown key"):
        store(api, new).get(secret_id)
    rotating = store(api, new, old)
    assert rotating.get(secret_id) == {"secret-access-key": SECRET}
    assert rotating.rotate() == 1
    assert store(api, new).get(secret_id) == {"secret-access-key": SECRET}, "old key not needed"
    assert rotating.rotate() == 0
    [(row_id, _kid, _nonce, sealed)] = raw_rows(api)
    flipped = bytearray(base64.b64decode(sealed))
    flipped[0] ^= 1
    datastore = api.services.catalog.app.recorder.datastore  # type: ignore[attr-defined]
    with write_transaction(datastore) as cur:
        marker = "%s" if api.services.settings.backend == "postgres" else "?"
        cur.execute(
            f"UPDATE icelog_secrets SET sealed = {marker} WHERE id = {marker}",
            (base64.b64encode(bytes(flipped)).decode(), row_id),
        )
    with pytest.raises(SecretUnreadable, match="altered") as raised:
        store(api, new).get(secret_id)
    assert SECRET not in str(raised.value)


def test_keys_are_checked() -> None:
    for bad in (
        "not base64!",
        base64.b64encode(b"short").decode(),
        base64.b64encode(bytes(32)).decode(),
    ):
        with pytest.raises(SecretKeyError):
            parse_key(bad)

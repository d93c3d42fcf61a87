"""Storage credentials, encrypted at rest, kept out of the event log.

A warehouse's profile (which is in the log) holds only a secret's id. The secret itself is
stored here, AES-256-GCM encrypted with a key from the settings; the key's id is stored
with it so that keys can be rotated (`rotate` re-encrypts everything under the new key).
Nothing here logs or raises with a secret's value.
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
from typing import Any
from uuid import UUID, uuid4

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from icelog.projections.sql import Datastore, SqlStore

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS icelog_secrets ("
    "id TEXT PRIMARY KEY, key_id TEXT NOT NULL, nonce TEXT NOT NULL, sealed TEXT NOT NULL, "
    "retire_at_ms BIGINT)"
)


def retire_column(dialect: str) -> list[str]:
    """Migration 8: when a replaced credential may be deleted (NULL: in use)."""
    if dialect == "postgres":
        return ["ALTER TABLE icelog_secrets ADD COLUMN IF NOT EXISTS retire_at_ms BIGINT"]
    return []  # SQLite: added by migrations._retire_column after a look at the table


KEY_BYTES = 32


class SecretKeyError(ValueError):
    """The configured key is missing, malformed or too weak (a start-up error)."""


class SecretUnreadable(ValueError):
    """A stored secret cannot be decrypted with the configured keys."""


def parse_key(encoded: str) -> bytes:
    """A key setting: 32 random bytes, base64 (e.g. `openssl rand -base64 32`)."""
    try:
        key = base64.b64decode(encoded, validate=True)
    except ValueError:
        raise SecretKeyError("the secrets key must be base64 (openssl rand -base64 32)") from None
    if len(key) != KEY_BYTES:
        raise SecretKeyError(f"the secrets key must be {KEY_BYTES} bytes, got {len(key)}")
    if len(set(key)) < 8:
        raise SecretKeyError("the secrets key is too weak (too few distinct bytes)")
    return key


def key_id(key: bytes) -> str:
    """Names a key without revealing it."""
    return hashlib.sha256(b"icelog-secrets-key:" + key).hexdigest()[:16]


class SecretStore(SqlStore):
    def __init__(self, datastore: Datastore, key: bytes, old_keys: tuple[bytes, ...] = ()) -> None:
        super().__init__(datastore)
        self._key = key
        self._keys = {key_id(k): k for k in (key, *old_keys)}

    def ensure_schema(self) -> None:
        self._run(SCHEMA, fetch=False)

    def _seal(self, secret_id: str, value: dict[str, Any]) -> tuple[str, str, str]:
        nonce = os.urandom(12)
        # The id is authenticated data: a sealed value cannot be moved to another id.
        sealed = AESGCM(self._key).encrypt(nonce, orjson.dumps(value), secret_id.encode())
        return (
            key_id(self._key),
            base64.b64encode(nonce).decode(),
            base64.b64encode(sealed).decode(),
        )

    def put(self, value: dict[str, Any]) -> UUID:
        secret_id = uuid4()
        kid, nonce, sealed = self._seal(str(secret_id), value)
        self._run(
            "INSERT INTO icelog_secrets (id, key_id, nonce, sealed) VALUES (?, ?, ?, ?)",
            (str(secret_id), kid, nonce, sealed),
            fetch=False,
        )
        return secret_id

    def get(self, secret_id: UUID) -> dict[str, Any] | None:
        rows = self._run(
            "SELECT key_id, nonce, sealed FROM icelog_secrets WHERE id = ?", (str(secret_id),)
        )
        if not rows:
            return None
        kid, nonce, sealed = rows[0]
        key = self._keys.get(kid)
        if key is None:
            raise SecretUnreadable(f"secret {secret_id} is sealed with an unknown key {kid}")
        try:
            plain = AESGCM(key).decrypt(
                base64.b64decode(nonce), base64.b64decode(sealed), str(secret_id).encode()
            )
        except InvalidTag:
            raise SecretUnreadable(f"secret {secret_id} does not decrypt (altered?)") from None
        found: dict[str, Any] = orjson.loads(plain)
        return found

    def delete(self, secret_id: UUID) -> None:
        self._run("DELETE FROM icelog_secrets WHERE id = ?", (str(secret_id),), fetch=False)

    def retire(self, secret_id: UUID, after_s: float) -> None:
        """Delete a replaced secret once no replica can still use it: other replicas read a
        warehouse's profile (and so which secret it names) from a short cache, and would
        fail to reach the storage if the secret they name were gone. Retired secrets whose
        time has come are deleted now."""
        now = int(time.time() * 1000)
        self._run(
            "UPDATE icelog_secrets SET retire_at_ms = ? WHERE id = ?",
            (now + int(after_s * 1000), str(secret_id)),
            fetch=False,
        )
        self.sweep(now)

    def sweep(self, now_ms: int) -> None:
        """Delete the retired secrets whose time has come."""
        self._run(
            "DELETE FROM icelog_secrets WHERE retire_at_ms IS NOT NULL AND retire_at_ms < ?",
            (now_ms,),
            fetch=False,
        )

    def rotate(self) -> int:
        """Re-encrypt every secret under the current key; returns how many changed."""
        current = key_id(self._key)
        rows = self._run("SELECT id FROM icelog_secrets WHERE key_id <> ?", (current,))
        for (secret_id,) in rows:
            value = self.get(UUID(secret_id))
            assert value is not None
            kid, nonce, sealed = self._seal(secret_id, value)
            self._run(
                "UPDATE icelog_secrets SET key_id = ?, nonce = ?, sealed = ? WHERE id = ?",
                (kid, nonce, sealed, secret_id),
                fetch=False,
            )
        return len(rows)

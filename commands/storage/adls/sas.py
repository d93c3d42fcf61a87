"""Directory-scoped SAS tokens for one table's folder, signed as ADLS Gen2 expects.

A SAS names its resource in its signature: a directory SAS (`sr=d`) signs the canonical
resource `/blob/<account>/<filesystem>/<directory>` and says with `sdd` how many path
segments deep the directory is, so the token opens that folder and what lies below it, and
nothing beside it: `db/t1`'s token never reaches `db/t10/...`. Directory SAS needs an account
with a hierarchical namespace (ADLS Gen2), which is what this storage kind is for.

- With a shared key the token is a service SAS, signed with the account key.
- With a service principal it is a user delegation SAS: the catalog asks the Blob service for
  a user delegation key with its Entra ID token (the principal needs a role that grants
  `generateUserDelegationKey`, e.g. Storage Blob Delegator, plus data rights for what it
  delegates), then signs with that key; the token cannot outlive the key (at most 7 days).

Signing is azure-storage-blob's (`generate_blob_sas`, `is_directory=True`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from azure.storage.blob import (
    BlobServiceClient,
    UserDelegationKey,
    generate_blob_sas,
    generate_container_sas,
)

READ_PERMISSIONS = "rl"
# What writing an Iceberg table needs: read, add, create, write, delete (expiring snapshots,
# orphan files) and list.
WRITE_PERMISSIONS = "racwdl"
# A start a minute back tolerates a client whose clock is behind the service's.
CLOCK_SKEW_S = 60


@dataclass(frozen=True, repr=False)
class SignedSas:
    """A SAS token and when it stops working. Never printed."""

    token: str
    expires_at: dt.datetime

    def __repr__(self) -> str:
        return f"SignedSas(expires_at={self.expires_at.isoformat()})"


def permissions(*, write: bool) -> str:
    return WRITE_PERMISSIONS if write else READ_PERMISSIONS


def validity_window(now: dt.datetime, validity_s: int) -> tuple[dt.datetime, dt.datetime]:
    """(start, expiry), whole seconds in UTC: started a minute back, valid `validity_s` from
    now."""
    now = now.astimezone(dt.UTC).replace(microsecond=0)
    return now - dt.timedelta(seconds=CLOCK_SKEW_S), now + dt.timedelta(seconds=validity_s)


def directory_sas(
    *,
    account: str,
    filesystem: str,
    directory: str,
    write: bool,
    start: dt.datetime,
    expiry: dt.datetime,
    account_key: str | None = None,
    delegation_key: UserDelegationKey | None = None,
) -> SignedSas:
    """A SAS for `directory` (a blob name prefix without outer '/') and everything below it."""
    if not directory or directory.startswith("/") or directory.endswith("/"):
        raise ValueError("a directory SAS needs a folder below the filesystem's root")
    if (account_key is None) == (delegation_key is None):
        raise ValueError("sign with exactly one of an account key or a user delegation key")
    token: str = generate_blob_sas(
        account_name=account,
        container_name=filesystem,
        blob_name=directory,
        account_key=account_key,
        user_delegation_key=delegation_key,
        permission=permissions(write=write),
        start=start,
        expiry=expiry,
        is_directory=True,
    )
    return SignedSas(token=token, expires_at=expiry)


def filesystem_sas(
    *,
    account: str,
    filesystem: str,
    write: bool,
    start: dt.datetime,
    expiry: dt.datetime,
    account_key: str | None = None,
    delegation_key: UserDelegationKey | None = None,
) -> SignedSas:
    """A SAS for the whole filesystem (`sr=c`): what a profile with `sas-scope: filesystem`
    vends, where directory SAS cannot be signed (emulators)."""
    if (account_key is None) == (delegation_key is None):
        raise ValueError("sign with exactly one of an account key or a user delegation key")
    token: str = generate_container_sas(
        account_name=account,
        container_name=filesystem,
        account_key=account_key,
        user_delegation_key=delegation_key,
        permission=permissions(write=write),
        start=start,
        expiry=expiry,
    )
    return SignedSas(token=token, expires_at=expiry)


def delegation_key(
    client: BlobServiceClient, start: dt.datetime, expiry: dt.datetime, **kwargs: Any
) -> UserDelegationKey:
    """A user delegation key valid from `start` to `expiry`, asked of the Blob service with
    the client's Entra ID token."""
    key: UserDelegationKey = client.get_user_delegation_key(start, expiry, **kwargs)
    return key

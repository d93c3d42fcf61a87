"""S3 storage (`s3://bucket/key` locations) through boto3 — the adapter issue 7 builds on.

Metadata files are written with a conditional put (`If-None-Match: *`), so an existing
object is never overwritten, as the local adapter's link() guarantees for files. boto3
retries throttling and transient errors itself (standard mode, several attempts).
Credentials are handed in by the caller and never appear in errors raised from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from domain.errors import BadRequestError, ConflictError

S3_SCHEMES = ("s3", "s3a", "s3n")


def split_location(location: str) -> tuple[str, str]:
    """`s3://bucket/a/b` (or s3a://, s3n://) → (`bucket`, `a/b`)."""
    parsed = urlparse(location)
    if parsed.scheme not in S3_SCHEMES or not parsed.netloc:
        raise BadRequestError(f"Not an S3 location: {location}")
    return parsed.netloc, parsed.path.lstrip("/")


@dataclass(frozen=True)
class S3Access:
    """How to reach the store. Secrets stay in this object, never in messages."""

    region: str
    endpoint: str | None = None
    path_style: bool = False
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None

    def __repr__(self) -> str:  # never print the secret
        return f"S3Access(region={self.region!r}, endpoint={self.endpoint!r})"


def client_for(access: S3Access, *, quick: bool = False) -> Any:
    """A boto3 S3 client. `quick` is for interactive checks (warehouse validation): a bad
    endpoint must fail in seconds, not after minutes of connect retries."""
    return boto3.client(
        "s3",
        region_name=access.region,
        endpoint_url=access.endpoint,
        aws_access_key_id=access.access_key_id,
        aws_secret_access_key=access.secret_access_key,
        aws_session_token=access.session_token,
        config=Config(
            retries={"mode": "standard", "max_attempts": 2 if quick else 5},
            connect_timeout=3 if quick else 10,
            read_timeout=10 if quick else 60,
            s3={"addressing_style": "path" if access.path_style else "auto"},
        ),
    )


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


class S3FileIO:
    def __init__(self, access: S3Access) -> None:
        self._client = client_for(access)

    def write_new(self, location: str, data: bytes) -> None:
        bucket, key = split_location(location)
        try:
            self._client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as exc:
            if _code(exc) in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise ConflictError(f"Object already exists: {location}") from None
            raise

    def read(self, location: str) -> bytes:
        bucket, key = split_location(location)
        try:
            body: bytes = self._client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404", "NotFound"):
                raise FileNotFoundError(location) from None
            raise
        return body

    def exists(self, location: str) -> bool:
        bucket, key = split_location(location)
        try:
            self._client.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404", "NotFound"):
                return False
            raise
        return True

    def delete(self, location: str) -> bool:
        """S3 deletes are idempotent and do not say whether the object existed: ask first,
        so that purge can still count what was already gone."""
        if not self.exists(location):
            return False
        bucket, key = split_location(location)
        self._client.delete_object(Bucket=bucket, Key=key)
        return True

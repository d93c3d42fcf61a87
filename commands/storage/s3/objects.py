"""S3 storage (`s3://bucket/key` locations) through boto3 — the adapter issue 7 builds on.

Metadata files are written with a conditional put (`If-None-Match: *`), so an existing
object is never overwritten, as the local adapter's link() guarantees for files. boto3
retries throttling and transient errors itself (standard mode, several attempts).
Credentials are handed in by the caller and never appear in errors raised from here.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from icelog.domain.errors import BadRequestError, ConflictError, ServiceUnavailableError
from icelog.domain.locations import Location
from icelog.domain.ports import OutsideStorageError, UnreadableFileError


def split_location(location: str) -> tuple[str, str]:
    """`s3://bucket/a/b` (or s3a://, s3n://) → (`bucket`, `a/b`), parsed by `Location`."""
    parsed = Location.parse(location, encoded_separators=True)
    if parsed.scheme != "s3":
        raise BadRequestError(f"Not an S3 location: {location}")
    return parsed.authority, parsed.key


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


# AWS error codes are words (AccessDenied, NoSuchBucket, InvalidAccessKeyId); a bare HTTP
# status as the code means the answer was not an AWS error document.
_AWS_CODE = re.compile(r"^[A-Za-z][A-Za-z0-9.]*$")
NOT_S3 = "no S3 service answered at the endpoint"


def failure_reason(exc: Exception, service: str = "S3") -> str:
    """What went wrong: the error code when an S3 (or STS) service answered, else one phrase
    for every other failure — a refused connection, a timeout, a name that does not resolve,
    a web server that is not S3 — so that a storage check cannot map a network
    (docs/security.md). Never anything that could be a secret."""
    if isinstance(exc, ClientError):
        code = _code(exc)
        if _AWS_CODE.fullmatch(code):
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return f"{code} (HTTP {status})"
    return NOT_S3 if service == "S3" else f"no {service} service answered at the endpoint"


def _storage_failure(action: str, location: str, exc: Exception) -> ServiceUnavailableError:
    """A store that refuses or cannot be reached is a 503 naming the object and the S3
    error code (never a credential); the command that needed it fails cleanly."""
    reason = failure_reason(exc)
    return ServiceUnavailableError(f"Storage error: could not {action} {location}: {reason}")


_MISSING = ("NoSuchKey", "404", "NotFound")


class S3FileIO:
    """Objects below one `s3://bucket/prefix`: locations outside it are refused before any
    request; reads are bounded in size (a ranged GET) and in time (a deadline on the body)."""

    def __init__(
        self,
        client: Any,
        root: Location,
        *,
        max_read_bytes: int = 64 << 20,
        read_timeout_s: float = 30.0,
    ) -> None:
        """`client`: a boto3 S3 client (`client_for`), shared by the warehouses that use
        the same credential and endpoint."""
        if root.scheme != "s3":
            raise BadRequestError(f"Not an S3 location: {root}")
        self._client = client
        self._root = root
        self._max_read_bytes = max_read_bytes
        self._read_timeout_s = read_timeout_s

    @property
    def root(self) -> Location:
        return self._root

    def _object(self, location: str) -> tuple[str, str]:
        """(bucket, key) of a location inside the root; OutsideStorageError otherwise."""
        parsed = Location.parse(location, encoded_separators=True)
        if not self._root.contains(parsed) or not parsed.key:
            raise OutsideStorageError(f"Location {location} is outside the warehouse {self._root}")
        return parsed.authority, parsed.key

    def write_new(self, location: str, data: bytes) -> None:
        bucket, key = self._object(location)
        try:
            self._client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as exc:
            if _code(exc) in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise ConflictError(f"Object already exists: {location}") from None
            raise _storage_failure("write", location, exc) from None
        except BotoCoreError as exc:
            raise _storage_failure("write", location, exc) from None

    def read(self, location: str) -> bytes:
        bucket, key = self._object(location)
        limit = self._max_read_bytes
        deadline = time.monotonic() + self._read_timeout_s
        try:
            # One byte more than allowed: receiving it means the object is too large.
            found = self._client.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{limit}")
        except ClientError as exc:
            code = _code(exc)
            if code in _MISSING:
                raise FileNotFoundError(location) from None
            if code == "InvalidRange":  # a ranged GET of an empty object
                return b""
            raise _storage_failure("read", location, exc) from None
        except BotoCoreError as exc:
            raise _storage_failure("read", location, exc) from None
        body = found["Body"]
        # A store that sends a byte now and then never trips a per-read timeout: the body
        # is closed at the deadline, which ends the read wherever it waits.
        watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), body.close)
        watchdog.daemon = True
        watchdog.start()
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in body.iter_chunks(1 << 16):
                size += len(chunk)
                if size > limit:
                    raise UnreadableFileError(location, f"larger than {limit} bytes")
                chunks.append(chunk)
        except (BotoCoreError, OSError, ValueError, AttributeError) as exc:
            if time.monotonic() >= deadline:
                raise UnreadableFileError(
                    location, f"not read within {self._read_timeout_s:g} s"
                ) from None
            raise _storage_failure("read", location, exc) from None
        finally:
            watchdog.cancel()
            body.close()
        if time.monotonic() >= deadline:
            raise UnreadableFileError(location, f"not read within {self._read_timeout_s:g} s")
        return b"".join(chunks)

    def exists(self, location: str) -> bool:
        bucket, key = self._object(location)
        try:
            self._client.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if _code(exc) in _MISSING:
                return False
            raise _storage_failure("check", location, exc) from None
        except BotoCoreError as exc:
            raise _storage_failure("check", location, exc) from None
        return True

    def holds_files(self, location: str) -> bool:
        """One listing of at most one key below `location/`."""
        bucket, key = self._object(location)
        try:
            found = self._client.list_objects_v2(Bucket=bucket, Prefix=f"{key}/", MaxKeys=1)
        except (ClientError, BotoCoreError) as exc:
            raise _storage_failure("list", location, exc) from None
        return bool(found.get("KeyCount") or found.get("Contents"))

    def delete(self, location: str) -> bool:
        """S3 deletes are idempotent and do not say whether the object existed: ask first,
        so that purge can still count what was already gone."""
        if not self.exists(location):
            return False
        bucket, key = self._object(location)
        try:
            self._client.delete_object(Bucket=bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise _storage_failure("delete", location, exc) from None
        return True

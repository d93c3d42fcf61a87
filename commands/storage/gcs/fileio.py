"""GCS objects below one `gs://bucket/prefix`, through the JSON API over httpx.

Why the JSON API and not google-cloud-storage: icelog needs five calls (insert, get media,
get metadata, list one, delete) with exact bounds — a byte cap and a deadline on every
read, no retry of a conditional insert — and one small dependency (httpx, which the
clients and tests already use) instead of google-api-core, protobuf and
google-resumable-media.

- Locations outside the root are refused (OutsideStorageError) before any request.
- `write_new` is a multipart insert with `ifGenerationMatch=0`: an existing object is never
  replaced (412 → ConflictError). fake-gcs-server enforces that precondition on multipart
  inserts but ignores it on `uploadType=media` ones, so the multipart form is what is tested.
- `read` is a ranged GET of at most `max_read_bytes + 1` bytes, sent with
  `Accept-Encoding: identity` (no decompression by the client; GCS ignores the range when it
  decompresses a gzip-stored object itself, so the byte count still bounds it), within
  `read_timeout_s`: at the deadline the socket is shut down, which ends the read wherever it
  waits.
- Every other answer (metadata, listings, errors) is read up to 1 MiB within the same
  deadline: a store cannot make the catalog hold a large or endless answer.
- Idempotent calls (reads, listings, deletes) are retried twice on 429 / 5xx / transport
  errors; an insert only on 429 (the store did nothing), since a retried insert that had
  succeeded would read as a conflict.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from icelog.commands.storage.gcs.failures import NOT_GCS, GoogleAuthFailure, gcs_reason
from icelog.domain.errors import BadRequestError, ConflictError, ServiceUnavailableError
from icelog.domain.locations import Location
from icelog.domain.ports import OutsideStorageError, UnreadableFileError

_RETRIED = frozenset({429, 500, 502, 503, 504})
_ATTEMPTS = 3
_BACKOFF_S = 0.2
_CONNECT_TIMEOUT_S = 5.0
_WRITE_TIMEOUT_S = 60.0
_MAX_ANSWER_BYTES = 1 << 20


class GcsStorageError(ServiceUnavailableError):
    """A store that refuses or cannot be reached: 503 naming the object and GCS's reason
    (never a token). `action`, `location` and `reason` are kept for the access check."""

    def __init__(self, action: str, location: str, reason: str) -> None:
        super().__init__(f"Storage error: could not {action} {location}: {reason}")
        self.action = action
        self.location = location
        self.reason = reason


@dataclass(frozen=True)
class _Answer:
    status: int
    body: bytes

    @property
    def reason(self) -> str:
        return gcs_reason(self.status, self.body)


def _bounded_answer(response: httpx.Response, deadline: float) -> bytes:
    """At most _MAX_ANSWER_BYTES of an answer's body, by `deadline`: JSON API answers are
    small, and a store must not make the catalog hold a large or endless one."""
    body = bytearray()
    with _shut_down_at(response, deadline):
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > _MAX_ANSWER_BYTES or time.monotonic() >= deadline:
                break
    return bytes(body)


class _Retry(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GcsFileIO:
    """Objects below one `gs://bucket[/prefix]` (see the module docstring)."""

    def __init__(
        self,
        root: Location,
        *,
        endpoint: str,
        token: Callable[[], str],
        http: httpx.Client,
        max_read_bytes: int = 64 << 20,
        read_timeout_s: float = 30.0,
    ) -> None:
        """`endpoint`: the JSON API's root (`https://storage.googleapis.com`); `token`:
        the catalog's bearer token (GoogleAuthFailure when none can be had)."""
        if root.scheme != "gs":
            raise BadRequestError(f"Not a GCS location: {root}")
        self._root = root
        self._endpoint = endpoint.rstrip("/")
        self._token = token
        self._http = http
        self._max_read_bytes = max_read_bytes
        self._read_timeout_s = read_timeout_s

    def __repr__(self) -> str:
        return f"GcsFileIO(root={str(self._root)!r}, endpoint={self._endpoint!r})"

    @property
    def root(self) -> Location:
        return self._root

    # -- addressing --------------------------------------------------------------------------
    def _object(self, location: str) -> tuple[str, str]:
        """(bucket, object name) of a location inside the root; OutsideStorageError
        otherwise (also for the root itself: it is a prefix, never an object)."""
        parsed = Location.parse(location, encoded_separators=True)
        if not self._root.contains(parsed) or parsed == self._root:
            raise OutsideStorageError(f"Location {location} is outside the warehouse {self._root}")
        return parsed.authority, parsed.key

    def _object_url(self, bucket: str, name: str) -> str:
        # Every character that is not unreserved is escaped, '/' included: the object name
        # is one path segment of the JSON API's URL.
        return f"{self._endpoint}/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}"

    def _headers(self, action: str, location: str) -> dict[str, str]:
        try:
            token = self._token()
        except GoogleAuthFailure as exc:
            raise GcsStorageError(
                action, location, f"no access token for the service account: {exc.reason}"
            ) from None
        return {"Authorization": f"Bearer {token}"}

    def _send(
        self,
        method: str,
        url: str,
        *,
        action: str,
        location: str,
        retried: frozenset[int] = _RETRIED,
        transport_retries: bool = True,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> _Answer:
        """One JSON API call (not a media read), retried as the module docstring says: its
        status and at most _MAX_ANSWER_BYTES of its body, within `read_timeout_s` per
        attempt; GcsStorageError when no answer came."""
        for attempt in range(_ATTEMPTS):
            last = attempt == _ATTEMPTS - 1
            try:
                answer = self._call_once(method, url, action, location, headers, kwargs)
            except httpx.HTTPError:
                if last or not transport_retries:
                    raise GcsStorageError(action, location, NOT_GCS) from None
            else:
                if last or answer.status not in retried:
                    return answer
            time.sleep(_BACKOFF_S * (2**attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def _call_once(
        self,
        method: str,
        url: str,
        action: str,
        location: str,
        headers: dict[str, str] | None,
        kwargs: dict[str, Any],
    ) -> _Answer:
        deadline = time.monotonic() + self._read_timeout_s
        with self._http.stream(
            method,
            url,
            headers={**(headers or {}), **self._headers(action, location)},
            timeout=httpx.Timeout(
                self._read_timeout_s, connect=_CONNECT_TIMEOUT_S, write=_WRITE_TIMEOUT_S
            ),
            follow_redirects=False,
            **kwargs,
        ) as response:
            return _Answer(response.status_code, _bounded_answer(response, deadline))

    # -- FileIO ------------------------------------------------------------------------------
    def write_new(self, location: str, data: bytes) -> None:
        bucket, name = self._object(location)
        boundary = f"icelog-{uuid.uuid4().hex}"
        while boundary.encode() in data:  # never in practice; a part must not hold it
            boundary = f"icelog-{uuid.uuid4().hex}"
        metadata = json.dumps({"name": name, "contentType": "application/octet-stream"})
        body = b"".join(
            (
                f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode(),
                metadata.encode(),
                f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode(),
                data,
                f"\r\n--{boundary}--\r\n".encode(),
            )
        )
        answer = self._send(
            "POST",
            f"{self._endpoint}/upload/storage/v1/b/{quote(bucket, safe='')}/o",
            action="write",
            location=location,
            retried=frozenset({429}),
            transport_retries=False,
            params={"uploadType": "multipart", "ifGenerationMatch": "0"},
            headers={"Content-Type": f"multipart/related; boundary={boundary}"},
            content=body,
        )
        if answer.status == 412:
            raise ConflictError(f"Object already exists: {location}")
        if answer.status != 200:
            raise GcsStorageError("write", location, answer.reason)

    def read(self, location: str) -> bytes:
        bucket, name = self._object(location)
        deadline = time.monotonic() + self._read_timeout_s
        for attempt in range(_ATTEMPTS):
            try:
                return self._read_once(bucket, name, location, deadline)
            except _Retry as retry:
                pause = _BACKOFF_S * (2**attempt)
                if attempt == _ATTEMPTS - 1 or time.monotonic() + pause >= deadline:
                    raise GcsStorageError("read", location, retry.reason) from None
            time.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover

    def _read_once(self, bucket: str, name: str, location: str, deadline: float) -> bytes:
        """The object's bytes; _Retry when the store answered with a passing failure (or
        not at all) before sending any of them."""
        headers = {
            **self._headers("read", location),
            # One byte more than allowed: receiving it means the object is too large.
            "Range": f"bytes=0-{self._max_read_bytes}",
            "Accept-Encoding": "identity",
        }
        remaining = max(0.001, deadline - time.monotonic())
        try:
            with self._http.stream(
                "GET",
                self._object_url(bucket, name),
                params={"alt": "media"},
                headers=headers,
                timeout=httpx.Timeout(remaining, connect=min(remaining, _CONNECT_TIMEOUT_S)),
                follow_redirects=False,
            ) as response:
                status = response.status_code
                if status == 404:
                    raise FileNotFoundError(location)
                if status == 416:  # a ranged GET of an empty object
                    return b""
                if status not in (200, 206):
                    reason = gcs_reason(status, _bounded_answer(response, deadline))
                    if status in _RETRIED:
                        raise _Retry(reason)
                    raise GcsStorageError("read", location, reason)
                return self._bounded_body(response, location, deadline)
        except httpx.HTTPError:
            if time.monotonic() >= deadline:
                raise UnreadableFileError(
                    location, f"not read within {self._read_timeout_s:g} s"
                ) from None
            raise _Retry(NOT_GCS) from None

    def _bounded_body(self, response: httpx.Response, location: str, deadline: float) -> bytes:
        limit = self._max_read_bytes
        chunks: list[bytes] = []
        size = 0
        with _shut_down_at(response, deadline):
            try:
                for chunk in response.iter_raw(1 << 16):
                    size += len(chunk)
                    if size > limit:
                        raise UnreadableFileError(location, f"larger than {limit} bytes")
                    if time.monotonic() >= deadline:
                        break  # the socket is being shut down: this read is over
                    chunks.append(chunk)
            except (httpx.HTTPError, OSError):
                if time.monotonic() >= deadline:
                    raise UnreadableFileError(
                        location, f"not read within {self._read_timeout_s:g} s"
                    ) from None
                raise GcsStorageError("read", location, NOT_GCS) from None
        if time.monotonic() >= deadline:
            raise UnreadableFileError(location, f"not read within {self._read_timeout_s:g} s")
        return b"".join(chunks)

    def exists(self, location: str) -> bool:
        bucket, name = self._object(location)
        answer = self._send(
            "GET",
            self._object_url(bucket, name),
            action="check",
            location=location,
            params={"fields": "name"},
        )
        if answer.status == 404:
            return False
        if answer.status != 200:
            raise GcsStorageError("check", location, answer.reason)
        return True

    def holds_files(self, location: str) -> bool:
        """One listing of at most one object below `location/`. The warehouse's root
        holds files by definition (as for `file` warehouses): a table placed there would
        cover every other table's."""
        if Location.parse(location, encoded_separators=True) == self._root:
            return True
        bucket, name = self._object(location)
        answer = self._send(
            "GET",
            f"{self._endpoint}/storage/v1/b/{quote(bucket, safe='')}/o",
            action="list",
            location=location,
            params={"prefix": f"{name}/", "maxResults": "1", "fields": "items(name)"},
        )
        if answer.status != 200:
            raise GcsStorageError("list", location, answer.reason)
        try:
            items = json.loads(answer.body).get("items")
        except (ValueError, AttributeError):
            raise GcsStorageError("list", location, NOT_GCS) from None
        return bool(items)

    def delete(self, location: str) -> bool:
        """GCS says whether the object was there: 404 is "already gone"."""
        bucket, name = self._object(location)
        answer = self._send(
            "DELETE", self._object_url(bucket, name), action="delete", location=location
        )
        if answer.status == 404:
            return False
        if answer.status not in (200, 204):
            raise GcsStorageError("delete", location, answer.reason)
        return True


@contextlib.contextmanager
def _shut_down_at(response: httpx.Response, deadline: float) -> Iterator[None]:
    """Shut the response's socket down at `deadline`: a store that sends a byte now and
    then never trips a per-read timeout, but a shut-down socket ends the read at once."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None

    def shut_down() -> None:
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), shut_down)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield
    finally:
        watchdog.cancel()

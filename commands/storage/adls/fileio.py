"""The catalog's FileIO on ADLS Gen2, through the Blob API, confined to one base location.

Locations are `abfss://<filesystem>@<account>.<host>/<path>` (a `wasbs://` spelling names the
same blob and is read the same way by `Location`); the filesystem is the container and the
path the blob name, as written. A location outside the root is refused before any request.

- New files are uploaded with `overwrite=False`, which the service turns into
  `If-None-Match: *`: an existing blob is never replaced (409 → ConflictError).
- Reads are one ranged download of at most the size limit plus one byte, and a watchdog
  closes the response at the deadline, so a store that drips bytes cannot hold a request.
- On an account with a hierarchical namespace a directory also shows in the Blob API, as an
  empty blob with the metadata `hdi_isfolder=true`: it is never a file here (not read, not
  counted as existing, not holding files).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

from azure.core.exceptions import (
    AzureError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.storage.blob import BlobServiceClient

from icelog.commands.storage.adls.clients import code_of, failure_reason, status_of
from icelog.domain.errors import BadRequestError, ConflictError, ServiceUnavailableError
from icelog.domain.locations import Location
from icelog.domain.ports import OutsideStorageError, UnreadableFileError

FOLDER_MARKER = "hdi_isfolder"
# How many names `holds_files` looks at in its one listing.
LISTING_PAGE = 100
_EXISTS_CODES = ("BlobAlreadyExists", "ConditionNotMet")


def is_folder(metadata: dict[str, str] | None) -> bool:
    """A directory entry of a hierarchical-namespace account, as the Blob API shows it."""
    return str((metadata or {}).get(FOLDER_MARKER, "")).lower() == "true"


def _storage_failure(action: str, location: str, exc: BaseException) -> ServiceUnavailableError:
    """A store that refuses or cannot be reached is a 503 naming the blob and Azure's error
    code (never a URL, which may carry a SAS, nor a credential)."""
    return ServiceUnavailableError(
        f"Storage error: could not {action} {location}: {failure_reason(exc)}"
    )


class _Watchdog:
    """Closes the responses of one read once its deadline has passed, including ones that a
    retry opens afterwards (they are closed as soon as their headers arrive)."""

    def __init__(self, timeout_s: float) -> None:
        self._lock = threading.Lock()
        self._responses: list[Any] = []
        self._expired = False
        self._timer = threading.Timer(max(0.0, timeout_s), self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._timer.cancel()

    def hook(self, pipeline_response: Any) -> None:
        """azure-core's `raw_response_hook`: called with each response, before its body."""
        response = pipeline_response.http_response
        with self._lock:
            self._responses.append(response)
            expired = self._expired
        if expired:
            _close(response)

    def _expire(self) -> None:
        with self._lock:
            self._expired = True
            responses = list(self._responses)
        for response in responses:
            _close(response)


def _close(response: Any) -> None:
    """End a read blocked on the response's socket. Closing a socket from another thread does
    not wake a thread blocked in recv(); shutting it down does. Only a body still being read
    has a file descriptor: a finished one has given its connection back to the pool (and
    `fileno()` raises), so no other request's socket is touched."""
    raw = getattr(getattr(response, "internal_response", None), "raw", None)
    try:
        fd = raw.fileno() if raw is not None else -1
    except (OSError, ValueError, AttributeError):
        fd = -1
    if fd >= 0:
        try:
            with socket.socket(fileno=os.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already gone: the read has ended anyway


class AdlsFileIO:
    """Blobs below one `abfss://<filesystem>@<account>.<host>[/prefix]`."""

    def __init__(
        self,
        client: BlobServiceClient,
        root: Location,
        *,
        max_read_bytes: int = 64 << 20,
        read_timeout_s: float = 30.0,
    ) -> None:
        """`client`: a Blob service client for the root's account (`clients.service_client`),
        shared by the warehouses that use the same endpoint and credential."""
        if root.scheme != "abfss":
            raise BadRequestError(f"Not an ADLS location: {root}")
        self._client = client
        self._root = root
        self._container = root.authority.split("@", 1)[0]
        self._max_read_bytes = max_read_bytes
        self._read_timeout_s = read_timeout_s

    @property
    def root(self) -> Location:
        return self._root

    def _inside(self, location: str) -> Location:
        """A location inside the root (or the root); OutsideStorageError otherwise."""
        parsed = Location.parse(location, encoded_separators=True)
        if not self._root.contains(parsed):
            raise OutsideStorageError(f"Location {location} is outside the warehouse {self._root}")
        return parsed

    def _name(self, location: str) -> str:
        """The blob name of a file location: inside the root, never the root itself (the
        warehouse folder is not a file)."""
        parsed = self._inside(location)
        if parsed == self._root or not parsed.key:
            raise OutsideStorageError(f"Location {location} is the warehouse folder itself")
        return parsed.key

    def _blob(self, name: str) -> Any:
        return self._client.get_blob_client(self._container, name)

    def write_new(self, location: str, data: bytes) -> None:
        name = self._name(location)
        try:
            self._blob(name).upload_blob(data, overwrite=False, length=len(data))
        except (ResourceExistsError, ResourceModifiedError) as exc:
            if isinstance(exc, ResourceExistsError) or code_of(exc) in _EXISTS_CODES:
                raise ConflictError(f"Object already exists: {location}") from None
            raise _storage_failure("write", location, exc) from None
        except AzureError as exc:
            if status_of(exc) == 409 or code_of(exc) in _EXISTS_CODES:
                raise ConflictError(f"Object already exists: {location}") from None
            raise _storage_failure("write", location, exc) from None

    def read(self, location: str) -> bytes:
        name = self._name(location)
        limit = self._max_read_bytes
        started = time.monotonic()
        with _Watchdog(self._read_timeout_s) as watchdog:
            try:
                # One byte more than allowed: receiving it means the blob is too large.
                download = self._blob(name).download_blob(
                    offset=0, length=limit + 1, raw_response_hook=watchdog.hook
                )
                if is_folder(download.properties.metadata):
                    raise UnreadableFileError(location, "a directory")
                if (download.properties.size or 0) > limit:
                    raise UnreadableFileError(location, f"larger than {limit} bytes")
                data = download.readall()
            except ResourceNotFoundError:
                if time.monotonic() - started >= self._read_timeout_s:
                    raise UnreadableFileError(
                        location, f"not read within {self._read_timeout_s:g} s"
                    ) from None
                raise FileNotFoundError(location) from None
            except UnreadableFileError:
                raise
            except Exception as exc:  # a socket closed by the watchdog surfaces as many types
                if time.monotonic() - started >= self._read_timeout_s:
                    raise UnreadableFileError(
                        location, f"not read within {self._read_timeout_s:g} s"
                    ) from None
                if isinstance(exc, AzureError) and code_of(exc) == "InvalidRange":
                    return self._empty(name, location)  # a ranged download of 0 bytes
                if isinstance(exc, AzureError):
                    raise _storage_failure("read", location, exc) from None
                raise
        if time.monotonic() - started >= self._read_timeout_s:
            raise UnreadableFileError(location, f"not read within {self._read_timeout_s:g} s")
        if len(data) > limit:
            raise UnreadableFileError(location, f"larger than {limit} bytes")
        return bytes(data)

    def _empty(self, name: str, location: str) -> bytes:
        """An empty blob's content, unless it is a directory entry (which is empty too)."""
        try:
            properties = self._blob(name).get_blob_properties()
        except ResourceNotFoundError:
            raise FileNotFoundError(location) from None
        except AzureError as exc:
            raise _storage_failure("read", location, exc) from None
        if is_folder(properties.metadata):
            raise UnreadableFileError(location, "a directory")
        return b""

    def exists(self, location: str) -> bool:
        parsed = self._inside(location)
        if parsed == self._root or not parsed.key:
            return False  # the warehouse folder is not a file
        try:
            properties = self._blob(parsed.key).get_blob_properties()
        except ResourceNotFoundError:
            return False
        except AzureError as exc:
            raise _storage_failure("check", location, exc) from None
        return not is_folder(properties.metadata)

    def holds_files(self, location: str) -> bool:
        """One listing of at most LISTING_PAGE names below `location/`: any blob that is not
        a directory entry holds files; a full page of directory entries counts as holding."""
        name = self._inside(location).key
        prefix = f"{name}/" if name else ""
        container = self._client.get_container_client(self._container)
        try:
            pages = container.list_blobs(
                name_starts_with=prefix, include=["metadata"], results_per_page=LISTING_PAGE
            ).by_page()
            page = list(next(pages, []))
            more = bool(getattr(pages, "continuation_token", None))
        except ResourceNotFoundError:
            return False  # no such filesystem: nothing is stored there
        except AzureError as exc:
            raise _storage_failure("list", location, exc) from None
        return more or any(not is_folder(blob.metadata) for blob in page)

    def delete(self, location: str) -> bool:
        """Azure says whether the blob was there (404 when not), so one request suffices."""
        name = self._name(location)
        try:
            self._blob(name).delete_blob()
        except ResourceNotFoundError:
            return False
        except AzureError as exc:
            if code_of(exc) in ("DirectoryIsNotEmpty", "OperationNotAllowedOnDirectory"):
                return False  # purge deletes files, never directories
            raise _storage_failure("delete", location, exc) from None
        return True

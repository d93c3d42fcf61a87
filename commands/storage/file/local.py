"""Local-filesystem storage (`file://` warehouses), confined to the warehouse's directory.

Every operation walks from the warehouse's root directory one segment at a time with
`openat`-style calls that never follow a symbolic link (O_NOFOLLOW), so neither `..` (refused
by `Location` anyway) nor a link planted inside the warehouse leads outside it, and there is
no window between a check and the use of a path. Reads take regular files only (a FIFO or a
device would hang or never end), bounded in size.

New files are written unnamed (O_TMPFILE) and linked into place when complete: readers never
see a partial file, link() never replaces an existing name, and a process killed mid-write
leaves nothing behind. Where the file system has no O_TMPFILE, a named `.tmp-*.part` file
is used instead, and leftovers older than a quarter of an hour are removed from the
directory the next time a file is written there. Files get mode 0666 minus the umask, as
any other program's files would.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
import uuid

from icelog.domain.errors import BadRequestError, ConflictError, ServiceUnavailableError
from icelog.domain.locations import Location
from icelog.domain.ports import OutsideStorageError, UnreadableFileError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TMPFILE = getattr(os, "O_TMPFILE", 0)
_STALE_TEMP_S = 15 * 60
_TEMP_PREFIX = ".tmp-"
_TEMP_SUFFIX = ".part"
# A path component that is a link, a file where a directory should be, or a directory
# where a file should be: the location is blocked, not missing.
_BLOCKED = (errno.ELOOP, errno.ENOTDIR, errno.EISDIR)
# How many directory entries `holds_files` looks at before it answers "holds files".
MAX_WALK_ENTRIES = 10_000


class LocalFileIO:
    """Reads and writes files below one local directory."""

    def __init__(self, root: Location, max_read_bytes: int = 64 << 20) -> None:
        if root.scheme != "file":
            raise BadRequestError(f"Not a file location: {root}")
        self._root = root
        self._max_read_bytes = max_read_bytes
        # The root is the operator's choice and may sit behind links (/tmp on some
        # systems); only what lies below it is walked without following any.
        self._root_path = os.path.realpath(root.path)

    @property
    def root(self) -> Location:
        return self._root

    # -- walking -----------------------------------------------------------------------------
    def _below_root(self, location: str) -> tuple[str, ...]:
        parsed = Location.parse(location, encoded_separators=True)
        if not self._root.contains(parsed):
            raise OutsideStorageError(f"Location {location} is outside the warehouse {self._root}")
        return parsed.relative_to(self._root)

    def _open_root(self, create: bool) -> int:
        try:
            return os.open(self._root_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            if not create:
                raise
            os.makedirs(self._root_path, exist_ok=True)
            return os.open(self._root_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def _open_dir(self, segments: tuple[str, ...], *, create: bool) -> int:
        """A descriptor of the directory `segments` below the root, walked without
        following links; created on the way when `create`."""
        fd = self._open_root(create)
        try:
            for segment in segments:
                try:
                    child = os.open(segment, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(segment, 0o777, dir_fd=fd)
                    child = os.open(segment, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- FileIO ------------------------------------------------------------------------------
    def read(self, location: str) -> bytes:
        segments = self._below_root(location)
        if not segments:
            raise UnreadableFileError(location, "the warehouse directory itself")
        try:
            directory = self._open_dir(segments[:-1], create=False)
        except NotADirectoryError:
            raise FileNotFoundError(location) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnreadableFileError(location, "a path component is a link") from None
            if isinstance(exc, FileNotFoundError):
                raise
            raise UnreadableFileError(location, exc.strerror or type(exc).__name__) from None
        try:
            fd = os.open(
                segments[-1],
                os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                dir_fd=directory,
            )
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise UnreadableFileError(location, exc.strerror or type(exc).__name__) from None
        finally:
            os.close(directory)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnreadableFileError(location, "not a regular file")
            if info.st_size > self._max_read_bytes:
                raise UnreadableFileError(location, f"larger than {self._max_read_bytes} bytes")
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(self._max_read_bytes + 1)
        if len(data) > self._max_read_bytes:
            raise UnreadableFileError(location, f"larger than {self._max_read_bytes} bytes")
        return data

    def write_new(self, location: str, data: bytes) -> None:
        segments = self._below_root(location)
        if not segments:
            raise BadRequestError(f"Cannot write {location}: it is the warehouse directory")
        try:
            directory = self._open_dir(segments[:-1], create=True)
        except OSError as exc:
            raise _write_failure(location, exc) from None
        try:
            if not self._write_unnamed(directory, segments[-1], data):
                self._write_named(directory, segments[-1], data)
        except FileExistsError:
            raise ConflictError(f"File already exists: {location}") from None
        except OSError as exc:
            raise _write_failure(location, exc) from None
        finally:
            os.close(directory)

    @staticmethod
    def _write_unnamed(directory: int, name: str, data: bytes) -> bool:
        """O_TMPFILE + linkat; False when the file system cannot (then nothing was made)."""
        if not _TMPFILE:
            return False
        try:
            fd = os.open(".", _TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o666, dir_fd=directory)
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                return False
            raise
        try:
            _write_all(fd, data)
            try:
                os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=directory, follow_symlinks=True)
            except FileExistsError:
                raise
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.EPERM, errno.EXDEV):
                    return False  # no /proc, or linkat refused: write it named instead
                raise
        finally:
            os.close(fd)
        return True

    @staticmethod
    def _write_named(directory: int, name: str, data: bytes) -> None:
        temp = f"{_TEMP_PREFIX}{uuid.uuid4().hex}{_TEMP_SUFFIX}"
        fd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o666,
            dir_fd=directory,
        )
        try:
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            os.link(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=directory)
        remove_stale_temporaries(directory)

    def delete(self, location: str) -> bool:
        segments = self._below_root(location)
        if not segments:
            raise OutsideStorageError("The warehouse directory itself is never deleted")
        try:
            directory = self._open_dir(segments[:-1], create=False)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno in _BLOCKED:
                return False
            raise _storage_failure("delete", location, exc) from None
        try:
            os.unlink(segments[-1], dir_fd=directory)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno in _BLOCKED:
                return False  # a directory: purge deletes files, never directories
            raise _storage_failure("delete", location, exc) from None
        finally:
            os.close(directory)
        return True

    def exists(self, location: str) -> bool:
        segments = self._below_root(location)
        if not segments:
            return False
        try:
            directory = self._open_dir(segments[:-1], create=False)
        except OSError:
            return False
        try:
            info = os.stat(segments[-1], dir_fd=directory, follow_symlinks=False)
        except OSError:
            return False
        finally:
            os.close(directory)
        return stat.S_ISREG(info.st_mode)

    def holds_files(self, location: str) -> bool:
        """Anything but a directory at or below `location` (a file, a link, a socket):
        empty directories (what a purge leaves) hold nothing. The walk follows no link and
        looks at no more than MAX_WALK_ENTRIES entries; a larger tree counts as holding."""
        segments = self._below_root(location)
        if not segments:
            return True
        try:
            fd = self._open_dir(segments, create=False)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno in _BLOCKED:
                return True  # a file or a link where the directory would be
            raise _storage_failure("list", location, exc) from None
        pending = [fd]
        seen = 0
        try:
            while pending:
                directory = pending.pop()
                try:
                    with os.scandir(directory) as entries:
                        for entry in entries:
                            seen += 1
                            if seen > MAX_WALK_ENTRIES or not entry.is_dir(follow_symlinks=False):
                                return True
                            with contextlib.suppress(FileNotFoundError):  # removed meanwhile
                                pending.append(os.open(entry.name, _DIR_FLAGS, dir_fd=directory))
                finally:
                    os.close(directory)
        except OSError as exc:
            if exc.errno in _BLOCKED:
                return True  # a directory turned into a link or a file while walked
            raise _storage_failure("list", location, exc) from None
        finally:
            for left in pending:
                os.close(left)
        return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def remove_stale_temporaries(directory: int, older_than_s: float = _STALE_TEMP_S) -> int:
    """Remove `.tmp-*.part` files left in a directory by a process killed while writing;
    how many were removed."""
    removed = 0
    cutoff = time.time() - older_than_s
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            if not (entry.name.startswith(_TEMP_PREFIX) and entry.name.endswith(_TEMP_SUFFIX)):
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.name, dir_fd=directory)
                    removed += 1
    return removed


def _write_failure(location: str, exc: OSError) -> Exception:
    if exc.errno in _BLOCKED:
        return BadRequestError(
            f"Cannot write {location}: a part of its path is a link or not a directory"
        )
    return _storage_failure("write", location, exc)


def _storage_failure(action: str, location: str, exc: OSError) -> ServiceUnavailableError:
    reason = exc.strerror or type(exc).__name__
    return ServiceUnavailableError(f"Storage error: could not {action} {location}: {reason}")


def check_writable_directory(base_location: Location) -> None:
    """Warehouse creation: the base directory must exist or be creatable, and be writable."""
    path = base_location.path
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".icelog-probe-{uuid.uuid4().hex}")
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise BadRequestError(
            f"Storage validation failed: base-location {base_location} is not a writable "
            f"directory ({exc.strerror})"
        ) from None

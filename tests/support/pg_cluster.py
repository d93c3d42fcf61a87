"""A private, throwaway PostgreSQL cluster for tests that stop or restart the database.

The machine's PostgreSQL (127.0.0.1:5432) is shared and must never be restarted; a test
that restarts PostgreSQL under a running catalog starts its own cluster instead:
`initdb` into a temporary directory, `pg_ctl start` on a free loopback port with the
unix socket in that directory, durability off (fsync, synchronous_commit,
full_page_writes: the data is thrown away) and trust authentication.

PostgreSQL refuses to run as root. When the tests run as root (as on the project's
machines) every `initdb`/`pg_ctl` call runs as the `postgres` user through `runuser`
(or `su`), and the directory is created outside pytest's per-user temp root (which is
mode 0700 for root) and handed to that user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from tests.support.server import free_port

PG_SERVICE_USER = "postgres"


class ClusterUnavailable(RuntimeError):
    """No PostgreSQL server binaries, or no unprivileged user to run them as."""


def find_bindir() -> Path:
    """`ICELOG_TEST_PG_BINDIR`, else the newest /usr/lib/postgresql/*/bin, else PATH."""
    configured = os.environ.get("ICELOG_TEST_PG_BINDIR")
    candidates = [configured] if configured else []
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    raise ClusterUnavailable("no PostgreSQL server binaries (initdb) found")


def _run_as() -> tuple[list[str] | None, pwd.struct_passwd | None]:
    """(command prefix, user) to run server binaries unprivileged; ([], None) when not root."""
    if os.geteuid() != 0:
        return [], None
    try:
        user = pwd.getpwnam(PG_SERVICE_USER)
    except KeyError:
        raise ClusterUnavailable(f"running as root and no {PG_SERVICE_USER!r} user") from None
    if shutil.which("runuser"):
        return ["runuser", "-u", PG_SERVICE_USER, "--"], user
    return None, user  # None: fall back to `su <user> -c '<command>'`


@dataclass
class PgCluster:
    root: Path
    port: int
    bindir: Path
    _prefix: list[str] | None
    user: str
    setup_seconds: float = 0.0

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        return self.root / "postgres.log"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def _cmd(self, args: list[str]) -> list[str]:
        if self._prefix is None:
            return ["su", PG_SERVICE_USER, "-c", shlex.join(args)]
        return [*self._prefix, *args]

    def _pg_ctl(self, *args: str, timeout: float = 60.0) -> None:
        # pg_ctl's own output (and, on restart, the server's log: `restart` has no -l)
        # goes to the log file. A pipe would be inherited by the postmaster and never close.
        with self.log_path.open("ab") as log:
            result = subprocess.run(
                self._cmd([str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), *args]),
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            )
        if result.returncode != 0:
            raise RuntimeError(
                f"pg_ctl {' '.join(args)} exited {result.returncode}:\n{self.log()[-4000:]}"
            )

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def start(self) -> None:
        options = " ".join(
            [
                f"-p {self.port}",
                f"-k {self.root}",
                "-c listen_addresses=127.0.0.1",
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=200",
            ]
        )
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.log_path), "-o", options)

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("stop", "-w", "-t", "60", "-m", mode)

    def restart(self, mode: str = "fast") -> None:
        """`pg_ctl restart -m <mode>`: every backend is terminated, the server comes back on
        the same port with the same options (read from postmaster.opts)."""
        self._pg_ctl("restart", "-w", "-t", "60", "-m", mode)

    def is_running(self) -> bool:
        return (self.data_dir / "postmaster.pid").exists()

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            if self.is_running():
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def create_cluster() -> PgCluster:
    """initdb + start; the caller must `destroy()` it."""
    bindir = find_bindir()
    prefix, user = _run_as()
    root = Path(tempfile.mkdtemp(prefix="icelog-pg-", dir="/tmp"))
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    root.chmod(0o700)
    cluster = PgCluster(root, free_port(), bindir, prefix, PG_SERVICE_USER)
    with cluster.log_path.open("ab"):
        pass
    if user is not None:
        os.chown(cluster.log_path, user.pw_uid, user.pw_gid)
    initdb = [
        str(bindir / "initdb"),
        "-D",
        str(cluster.data_dir),
        "-U",
        PG_SERVICE_USER,
        "-A",
        "trust",
        "-E",
        "UTF8",
        "--no-sync",
    ]
    started = time.monotonic()
    result = subprocess.run(
        cluster._cmd(initdb), capture_output=True, text=True, timeout=120, check=False
    )
    if result.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise ClusterUnavailable(f"initdb failed ({result.returncode}): {result.stderr[-2000:]}")
    try:
        cluster.start()
    except BaseException:
        cluster.destroy()
        raise
    cluster.setup_seconds = time.monotonic() - started
    return cluster


@contextlib.contextmanager
def private_cluster() -> Iterator[PgCluster]:
    cluster = create_cluster()
    try:
        yield cluster
    finally:
        cluster.destroy()

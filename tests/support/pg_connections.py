"""Run a command (a test run) while another workload holds PostgreSQL connections, and
measure the connections the command's own processes open.

    .venv/bin/python -m tests.support.pg_connections --hold 30 -- \\
        .venv/bin/python -m pytest tests/e2e/test_replicas.py

`--hold N` opens N idle connections first and keeps them to the end: the share of the
server's `max_connections` that other work takes on a shared PostgreSQL (the suite once
failed with 22 of 100 held). Every `--interval` seconds (0.2) the sampler reads
`pg_stat_activity` and attributes each client backend to the local process that owns
its TCP connection (through /proc), keeping those of the command's process tree only, so
that other users of the same server — other test runs, other developers — are never
counted. At the end it prints the peak of the whole tree, the peak of each process (an
`icelog serve`, a relay, the pytest process itself) and the server's busiest moment;
the exit status is the command's. Linux only (it reads /proc); the server must be
reached over TCP.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from tests.support.postgres import admin_url

PG_PORT_HEX = f"{int(os.environ.get('ICELOG_TEST_PGPORT', '5432')):04X}"


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The command name (field 2) may hold spaces: the parent comes after its ")".
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        found.setdefault(ppid, []).append(int(entry.name))
    return found


def process_tree(root: int) -> list[int]:
    """`root` and every process below it."""
    children = _children()
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


def _postgres_client_ports() -> dict[str, int]:
    """Socket inode -> local port, of the TCP connections to PostgreSQL's port."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            local, remote, inode = parts[1], parts[2], parts[9]
            if remote.rsplit(":", 1)[1] == PG_PORT_HEX:
                found[inode] = int(local.rsplit(":", 1)[1], 16)
    return found


def ports_by_process(pids: Sequence[int]) -> dict[int, int]:
    """Local port of each PostgreSQL connection -> the pid (of `pids`) that holds it."""
    ports = _postgres_client_ports()
    owners = {}
    for pid in pids:
        for inode in _socket_inodes(pid):
            if inode in ports:
                owners[ports[inode]] = pid
    return owners


def _describe(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [Path(a.decode(errors="replace")).name if i == 0 else a.decode(errors="replace")
             for i, a in enumerate(argv) if a]  # fmt: skip
    return " ".join(words)[:120]


@dataclass
class Peaks:
    tree: int = 0  # the command's processes together
    server: int = 0  # every client backend of the server
    by_process: Counter[int] = field(default_factory=Counter)
    names: dict[int, str] = field(default_factory=dict)
    samples: int = 0


class Sampler:
    def __init__(self, root: int, interval: float, exclude: set[int]) -> None:
        self.root, self.interval, self.exclude = root, interval, exclude
        self.peaks = Peaks()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with psycopg.connect(admin_url(), autocommit=True) as conn:
            self.exclude.add(conn.info.backend_pid)
            while not self._stop.is_set():
                self.sample(conn)
                self._stop.wait(self.interval)

    def sample(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        rows = conn.execute(
            "SELECT pid, client_port FROM pg_stat_activity WHERE backend_type = 'client backend'"
        ).fetchall()
        owners = ports_by_process(process_tree(self.root))
        mine: Counter[int] = Counter()
        for backend, port in rows:
            if backend in self.exclude or not isinstance(port, int):
                continue
            pid = owners.get(port)
            if pid is not None:
                mine[pid] += 1
        peaks = self.peaks
        peaks.samples += 1
        peaks.server = max(peaks.server, len(rows))
        peaks.tree = max(peaks.tree, sum(mine.values()))
        for pid, count in mine.items():
            if count > peaks.by_process[pid]:
                peaks.by_process[pid] = count
                peaks.names.setdefault(pid, _describe(pid))


def hold(n: int) -> list[psycopg.Connection[tuple[object, ...]]]:
    """`n` idle connections to the `postgres` database: another workload's share."""
    return [psycopg.connect(admin_url(), autocommit=True) for _ in range(n)]


def report(peaks: Peaks, held: int, max_connections: int) -> str:
    lines = [
        f"pg_connections: {peaks.samples} samples; held by the other workload: {held}; "
        f"max_connections: {max_connections}",
        f"pg_connections: peak of the command's processes together: {peaks.tree}",
        f"pg_connections: busiest moment of the server (every client): {peaks.server}",
        "pg_connections: peak per process (the 15 busiest):",
    ]
    for pid, count in peaks.by_process.most_common(15):
        lines.append(f"  {count:3d}  pid {pid}  {peaks.names.get(pid, '?')}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hold", type=int, default=0, help="connections to hold meanwhile")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    held = hold(args.hold)
    try:
        with psycopg.connect(admin_url(), autocommit=True) as conn:
            row = conn.execute("SHOW max_connections").fetchone()
            max_connections = int(str(row[0])) if row else 0
        process = subprocess.Popen(command)
        sampler = Sampler(process.pid, args.interval, {c.info.backend_pid for c in held})
        sampler.start()
        code = process.wait()
        sampler.stop()
    finally:
        for conn in held:
            conn.close()
    print(report(sampler.peaks, args.hold, max_connections), file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())

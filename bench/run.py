"""icelog benchmarks: loadTable throughput/latency, commit throughput, commit latency vs history.

    .venv/bin/python bench/run.py --backend sqlite|postgres [--duration 10] [--out FILE]

Starts its own `icelog serve` on a free loopback port (and, for postgres, a fresh
database on the local server), drives it with bench/loadgen.py and prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import build_request, run_clients

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {
    "type": "struct",
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "payload", "type": "string", "required": False},
    ],
}


def create_database(prefix: str) -> str:
    """A fresh, empty database for one benchmark run: its name (`prefix` and a token)."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(name: str) -> None:
    """Drop a benchmark's database, whoever is still connected to it."""
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(base: str, proc: subprocess.Popen[bytes], log: Path, seconds: float) -> None:
    """Until the server at `base` answers /health; its log as the error if it exits or
    does not answer in `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(base + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(log.read_text())
        time.sleep(0.05)


class Server:
    def __init__(self, backend: str, workers: int) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="icelog-bench-")
        self.port = free_port()
        env = dict(os.environ, ICELOG_DATA_DIR=self.tmp.name, ICELOG_LOG_LEVEL="warning")
        self.dbname = None
        if backend == "postgres":
            self.dbname = create_database("icelog_bench")
            env["ICELOG_DATABASE_URL"] = f"postgresql://postgres@127.0.0.1:5432/{self.dbname}"
            # A benchmark-only key (PostgreSQL mode requires one): 32 base64 bytes.
            env.setdefault("ICELOG_SECRETS_KEY", "BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY=")
        cmd = [str(ROOT / ".venv/bin/icelog"), "serve", "--port", str(self.port)]
        if workers > 1:
            cmd += ["--workers", str(workers)]
        t0 = time.perf_counter()
        # A file, not a pipe nobody reads: a full pipe would block the server mid-run.
        self.log = Path(self.tmp.name, "server.log").open("wb")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=self.log)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_healthy(self.base, self.proc, Path(self.tmp.name, "server.log"), 60)
        self.ready_s = time.perf_counter() - t0
        cfg = httpx.get(self.base + "/catalog/v1/config", params={"warehouse": "default"}).json()
        self.prefix = cfg["overrides"]["prefix"]
        self.http = httpx.Client(base_url=f"{self.base}/catalog/v1/{self.prefix}", timeout=60)

    def pids(self) -> list[int]:
        """The server and (with --workers) its worker processes."""
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            for task in Path(f"/proc/{pid}/task").glob("*/children"):
                todo += [int(c) for c in task.read_text().split()]
        return found

    def rss_mb(self) -> float:
        total = 0
        for pid in self.pids():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except FileNotFoundError:
                continue
            total += next(
                int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")
            )
        return round(total / 1024, 1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        if self.dbname:
            drop_database(self.dbname)
        self.tmp.cleanup()


def calibration(directory: Path) -> dict[str, float]:
    """How fast this machine is at the two things a commit leans on, so that runs on
    different machines can be compared: pure-Python speed (10 million additions; ~0.6 s
    on a current desktop core) and creating a small file (the metadata file of every
    commit; seen here from 0.04 to 1 ms on the same disk, depending on recent deletions)."""
    started = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    loop_s = time.perf_counter() - started
    probe = directory / "calibration"
    probe.mkdir()
    started = time.perf_counter()
    for i in range(200):
        (probe / f"f{i}").write_bytes(b"x" * 4096)
    create_us = (time.perf_counter() - started) / 200 * 1e6
    # Left in place until the run ends: deleting them now would itself slow the next
    # creates (ext4 without a journal skips recently freed inodes one by one).
    return {"python_loop_10m_s": round(loop_s, 2), "file_create_us": round(create_us)}


def append_body(parent: int | None, snap_id: int, seq: int) -> dict[str, Any]:
    snap: dict[str, Any] = {
        "snapshot-id": snap_id,
        "sequence-number": seq,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": f"file:///bench/snap-{snap_id}.avro",
        "summary": {"operation": "append", "added-records": "10"},
        "schema-id": 0,
    }
    if parent is not None:
        snap["parent-snapshot-id"] = parent
    return {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        "updates": [
            {"action": "add-snapshot", "snapshot": snap},
            {
                "action": "set-snapshot-ref",
                "ref-name": "main",
                "type": "branch",
                "snapshot-id": snap_id,
            },
        ],
    }


def make_table(server: Server, ns: str, name: str, snapshots: int = 0) -> None:
    r = server.http.post(f"/namespaces/{ns}/tables", json={"name": name, "schema": SCHEMA})
    r.raise_for_status()
    parent = None
    for i in range(1, snapshots + 1):
        snap_id = 10_000 + i
        server.http.post(
            f"/namespaces/{ns}/tables/{name}", json=append_body(parent, snap_id, i)
        ).raise_for_status()
        parent = snap_id


def _ms(text: str) -> float:
    value = float(text.rstrip("smun"))
    if text.endswith("us"):
        return round(value / 1000, 3)
    if text.endswith("ms"):
        return value
    return value * 1000


def bench_load_wrk(url: str, clients: int, duration: float) -> dict[str, Any]:
    """wrk (C, epoll) leaves the 2 cores to the server; the Python generator would not."""
    subprocess.run(["wrk", "-t2", f"-c{clients}", "-d2s", url], capture_output=True, check=True)
    out = subprocess.run(
        ["wrk", "-t2", f"-c{clients}", f"-d{int(duration)}s", "--latency", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, Any] = {"client": "wrk"}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("50%", "90%", "99%"):
            result[f"p{parts[0][:-1]}_ms"] = _ms(parts[1])
        elif line.startswith("Requests/sec:"):
            result["rps"] = float(parts[1])
        elif "requests in" in line:
            result["requests"] = int(parts[0])
        elif line.strip().startswith("Non-2xx"):
            result["non_2xx"] = int(parts[-1])
    return result


def bench_load(server: Server, name: str, clients: int, duration: float) -> dict[str, Any]:
    path = f"/catalog/v1/{server.prefix}/namespaces/bench/tables/{name}?snapshots=all"
    raw = build_request("GET", path, f"127.0.0.1:{server.port}")
    size = len(server.http.get(f"/namespaces/bench/tables/{name}").content)
    if shutil.which("wrk"):
        measured = bench_load_wrk(f"{server.base}{path}", clients, duration)
        return {**measured, "clients": clients, "response_bytes": size}
    asyncio.run(run_clients("127.0.0.1", server.port, clients, 1.0, lambda c, i: raw))  # warm-up
    result = asyncio.run(run_clients("127.0.0.1", server.port, clients, duration, lambda c, i: raw))
    return {**result.summary(), "clients": clients, "response_bytes": size}


class CpuAccount:
    """CPU seconds spent during a scenario by the server (and its workers), by PostgreSQL
    (every `postgres` process on the machine) and by this benchmark process, and how idle
    the machine stayed: says which of them a throughput figure is bound by."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, server: Server) -> None:
        self.server = server

    @classmethod
    def _cpu_s(cls, pid: int) -> float:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            return 0.0
        return (int(fields[11]) + int(fields[12])) / cls.TICK

    @staticmethod
    def _postgres_pids() -> list[int]:
        found = []
        for stat in Path("/proc").glob("[0-9]*/comm"):
            try:
                if stat.read_text().strip() == "postgres":
                    found.append(int(stat.parent.name))
            except OSError:
                continue
        return found

    def _sample(self) -> dict[str, float]:
        cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        ticks = [int(x) for x in cpu]
        return {
            "server": sum(self._cpu_s(p) for p in self.server.pids()),
            "postgres": sum(self._cpu_s(p) for p in self._postgres_pids()),
            "bench": self._cpu_s(os.getpid()),
            "machine": sum(ticks) / self.TICK,
            "idle": (ticks[3] + ticks[4]) / self.TICK,
        }

    def __enter__(self) -> CpuAccount:
        self._start = self._sample()
        return self

    def __exit__(self, *_: object) -> None:
        end = self._sample()
        self.spent = {k: end[k] - self._start[k] for k in end}

    def per_request_ms(self, requests: int) -> dict[str, float]:
        per = {
            f"{k}_cpu_ms": round(1000 * self.spent[k] / max(requests, 1), 2)
            for k in ("server", "postgres", "bench")
        }
        return {**per, "machine_idle_share": round(self.spent["idle"] / self.spent["machine"], 2)}


def bench_commits(server: Server, writers: int, duration: float) -> dict[str, Any]:
    for w in range(writers):
        make_table(server, "bench", f"w{w}")
    state: dict[int, dict[str, Any]] = {w: {"parent": None, "seq": 0} for w in range(writers)}

    def make(cid: int, i: int) -> bytes:
        st = state[cid]
        snap_id = (cid + 1) * 1_000_000 + i
        body = json.dumps(append_body(st["parent"], snap_id, st["seq"] + 1)).encode()
        st["next"] = snap_id
        return build_request(
            "POST",
            f"/catalog/v1/{server.prefix}/namespaces/bench/tables/w{cid}",
            f"127.0.0.1:{server.port}",
            body,
        )

    def done(cid: int, status: int, _body: bytes) -> None:
        if status == 200:
            st = state[cid]
            st["parent"], st["seq"] = st["next"], st["seq"] + 1

    with CpuAccount(server) as cpu:
        result = asyncio.run(run_clients("127.0.0.1", server.port, writers, duration, make, done))
    summary = result.summary()
    return {
        **summary,
        "writers": writers,
        "rss_mb_after": server.rss_mb(),
        "cpu_per_commit": cpu.per_request_ms(len(result.latencies_ms)),
    }


class PeakRss:
    """Samples the server's RSS while a scenario runs (memory under load)."""

    def __init__(self, server: Server) -> None:
        self.server, self.peak, self._stop = server, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            self.peak = max(self.peak, self.server.rss_mb())

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def bench_hot_table(server: Server, writers: int, duration: float) -> dict[str, Any]:
    """`writers` appenders on ONE table, as engines append: assert the branch head, and on
    409 reload the table and try again. Counts commits, conflicts (409) and retries."""
    make_table(server, "bench", "hot")
    path = f"/catalog/v1/{server.prefix}/namespaces/bench/tables/hot"
    host = f"127.0.0.1:{server.port}"
    head: dict[str, Any] = {"parent": None, "seq": 0}
    state: dict[int, dict[str, Any]] = {w: {"refresh": False, "kind": ""} for w in range(writers)}
    counts = {"committed": 0, "conflicts": 0, "reloads": 0, "other": 0}

    def make(cid: int, i: int) -> bytes:
        st = state[cid]
        if st["refresh"]:
            st["kind"] = "load"
            return build_request("GET", path, host)
        st["kind"] = "commit"
        st["snap"] = (cid + 1) * 1_000_000 + i
        st["seq"] = head["seq"] + 1
        body = append_body(st.get("parent", head["parent"]), st["snap"], st["seq"])
        return build_request("POST", path, host, json.dumps(body).encode())

    def done(cid: int, status: int, body: bytes) -> None:
        st = state[cid]
        if st["kind"] == "load":
            metadata = json.loads(body)["metadata"]
            st["parent"] = metadata.get("current-snapshot-id")
            head["seq"] = max(head["seq"], metadata.get("last-sequence-number", 0))
            st["refresh"] = False
            counts["reloads"] += 1
        elif status == 200:
            counts["committed"] += 1
            st["parent"] = st["snap"]
            head["seq"] = max(head["seq"], st["seq"])
        elif status == 409:
            counts["conflicts"] += 1
            st["refresh"] = True
        else:
            counts["other"] += 1
            st["refresh"] = True

    with PeakRss(server) as rss:
        result = asyncio.run(run_clients("127.0.0.1", server.port, writers, duration, make, done))
    summary = result.summary()
    return {
        "writers": writers,
        "duration_s": duration,
        "committed_per_s": round(counts["committed"] / duration, 1),
        "conflicts_409": counts["conflicts"],
        "retries": counts["reloads"],
        "other_errors": counts["other"],
        "request_p50_ms": summary.get("p50_ms"),
        "request_p99_ms": summary.get("p99_ms"),
        "rss_mb_peak": rss.peak,
    }


def bench_create_tables(server: Server, clients: int, duration: float) -> dict[str, Any]:
    """Create-table rate: `clients` creating distinct tables back to back."""
    server.http.post("/namespaces", json={"namespace": ["created"]}).raise_for_status()
    path = f"/catalog/v1/{server.prefix}/namespaces/created/tables"

    def make(cid: int, i: int) -> bytes:
        body = json.dumps({"name": f"t{cid}_{i}", "schema": SCHEMA}).encode()
        return build_request("POST", path, f"127.0.0.1:{server.port}", body)

    with PeakRss(server) as rss:
        result = asyncio.run(run_clients("127.0.0.1", server.port, clients, duration, make))
    return {**result.summary(), "clients": clients, "rss_mb_peak": rss.peak}


def commit_latency(server: Server, name: str, n: int) -> float:
    times = []
    for i in range(n):
        body = {
            "requirements": [],
            "updates": [
                {"action": "set-properties", "updates": {"counter": str(time.time_ns() + i)}}
            ],
        }
        t0 = time.perf_counter()
        server.http.post(f"/namespaces/bench/tables/{name}", json=body).raise_for_status()
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.mean(times), 3)


def bench_history(server: Server, history: int, sample: int) -> dict[str, Any]:
    make_table(server, "bench", "hist")
    at_10 = commit_latency(server, "hist", sample)
    build = history - sample
    body = {
        "requirements": [],
        "updates": [{"action": "set-properties", "updates": {"counter": "x"}}],
    }
    path = f"/catalog/v1/{server.prefix}/namespaces/bench/tables/hist"

    def make(cid: int, i: int) -> bytes:
        body["updates"][0]["updates"]["counter"] = f"{cid}-{i}"  # type: ignore[index]
        return build_request("POST", path, f"127.0.0.1:{server.port}", json.dumps(body).encode())

    asyncio.run(run_clients("127.0.0.1", server.port, 1, 3600, make, max_requests_per_client=build))
    at_high = commit_latency(server, "hist", sample)
    return {
        "mean_ms_at_history_~10": at_10,
        f"mean_ms_at_history_{history}": at_high,
        "ratio": round(at_high / at_10, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument(
        "--clients", default="16", help="loadTable client counts, comma list (e.g. 16,64)"
    )
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--history", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--scenarios",
        default="load,commits,hot,create,history",
        help="comma list: load,commits,hot,create,history",
    )
    args = parser.parse_args()
    server = Server(args.backend, args.workers)
    try:
        server.http.post("/namespaces", json={"namespace": ["bench"]}).raise_for_status()
        out: dict[str, Any] = {
            "backend": args.backend,
            "workers": args.workers,
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
                **calibration(Path(server.tmp.name)),
            },
            "ready_s": round(server.ready_s, 2),
            "rss_mb_idle": server.rss_mb(),
        }
        wanted = set(args.scenarios.split(","))
        if "load" in wanted:
            make_table(server, "bench", "one", snapshots=1)
            make_table(server, "bench", "thousand", snapshots=1000)
            for clients in (int(c) for c in args.clients.split(",")):
                suffix = "" if clients == 16 else f"_{clients}_clients"
                with PeakRss(server) as rss:
                    out[f"load_table_1_snapshot{suffix}"] = bench_load(
                        server, "one", clients, args.duration
                    )
                    out[f"load_table_1000_snapshots{suffix}"] = bench_load(
                        server, "thousand", clients, args.duration
                    )
                out[f"rss_mb_peak_loads{suffix}"] = rss.peak
            out["rss_mb_after_loads"] = server.rss_mb()
        if "commits" in wanted:
            with PeakRss(server) as rss:
                out["commits_distinct_tables"] = bench_commits(server, args.writers, args.duration)
            out["commits_distinct_tables"]["rss_mb_peak"] = rss.peak
        if "hot" in wanted:
            out["commits_hot_table"] = bench_hot_table(server, args.writers, args.duration)
        if "create" in wanted:
            out["create_tables"] = bench_create_tables(server, args.writers, args.duration)
        if "history" in wanted:
            out["commit_latency_vs_history"] = bench_history(server, args.history, 200)
        text = json.dumps(out, indent=2)
        print(text)
        if args.out:
            args.out.write_text(text + "\n")
    finally:
        server.stop()


if __name__ == "__main__":
    main()

"""icelog against Apache Iceberg's Java reference catalog, side by side in one run.

    apt-get install -y libpostgresql-jdbc-java libslf4j-java    # once (Java 17 is needed too)
    .venv/bin/python bench/reference_compare.py [--rounds 3] [--quick]

The reference is bench/reference/ReferenceCatalogServer.java: Iceberg's own
`CatalogHandlers` over `JdbcCatalog`, from the iceberg-spark-runtime jar the test dependencies
ship (PostgreSQL's JDBC driver and SLF4J from Debian), on the JDK's built-in HTTP server with a
16-thread executor, a JDBC pool of 16, a local-disk warehouse, no fsync. It is compiled on
demand into bench/reference/build/. icelog is one `icelog serve` process from this checkout
(or from `--tree`, e.g. an export of a commit, run with this checkout's virtualenv).
Each server has its own fresh database on the local PostgreSQL and its own warehouse in a
temporary directory.

Both are driven by the same Python load generator (bench/loadgen.py), in turns — icelog then
the reference in even rounds, the other way round in odd ones — so that the machine's drift
hits both alike. Scenarios (each round):

- `load-1`, `load-500`: loadTable of a table with 1 snapshot / 500 snapshots (seeded through
  commits), at 1, 8 and 32 clients; a warm-up, then `--duration` seconds.
- `commits-4`: 4 writers x 50 commits, each on its own table (`assert-ref-snapshot-id` +
  `add-snapshot` + `set-snapshot-ref`); `commits-shared`: the same on one shared table,
  where a writer that gets a 409 reloads the table and tries again at once (409s are
  counted); `commits-shared-backoff`: the same, but a writer waits after a 409 as Iceberg's
  Java client does (100 ms, doubling per failed try, 10 % jitter) — the reference server
  itself waits like that before answering a commit that lost a race at the database.
- `creates`: 8 clients x 300 createTable in one namespace (creates/s, p50).

For each, the server's CPU (utime + stime from /proc/<pid>/stat, before and after, and
after the server is idle again: icelog's followers catch up in the background) divided by
the requests it answered. Prints markdown tables (icelog, reference, icelog / reference;
ranges over the rounds, the ratio taken within each round) and writes them with every
round's raw figures to bench/results/<date>-reference-compare.txt.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))
from loadgen import Connection, Result, run_clients  # noqa: E402
from reference_servers import (  # noqa: E402
    THREADS,
    Target,
    pyiceberg_check,
    seed_table,
    start_icelog,
    start_reference,
)
from run import SCHEMA, CpuAccount, append_body, calibration  # noqa: E402

from icelog.api.clients import spark_runtime_jar  # noqa: E402


def postgres_cpu_s(db: str) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend connected to the server's database (`postgres:
    USER DB ...` in their command line), by pid: both servers keep their connections pooled,
    and other users of the same PostgreSQL are left out."""
    found: dict[int, float] = {}
    for pid in CpuAccount._postgres_pids():
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if f" {db} " in title:
            found[pid] = CpuAccount._cpu_s(pid)
    return found


class PostgresCpu:
    """CPU of the backends on one database across a block, read every 0.25 s in a thread so
    that a backend closing meanwhile (icelog replaces its read connections every minute)
    still counts up to its last reading rather than dropping out of the sum."""

    def __init__(self, db: str) -> None:
        self.db = db
        self.first = postgres_cpu_s(db)
        self.last = dict(self.first)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for pid, cpu in postgres_cpu_s(self.db).items():
            # 0.0: the backend exited between reading its command line and its times.
            if cpu > 0.0:
                self.last[pid] = max(cpu, self.last.get(pid, 0.0))

    def _watch(self) -> None:
        while not self._stop.wait(0.25):
            self._read()

    def spent(self) -> float:
        self._stop.set()
        self._thread.join()
        self._read()
        return sum(max(0.0, cpu - self.first.get(pid, 0.0)) for pid, cpu in self.last.items())


def settle(target: Target, limit_s: float = 120.0) -> float:
    """Wait until the server does no more work in the background (under 5 % of a core for
    a second): icelog's audit chain and event indexer follow the log after the answers went
    out. Returns the CPU seconds of that last, idle second (the followers polling), which
    is not the requests' work; 0 if the server never went idle within `limit_s`. Without
    this wait, one scenario's catch-up ran during the next one's measurement."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        before = CpuAccount._cpu_s(target.pid)
        time.sleep(1.0)
        idle = CpuAccount._cpu_s(target.pid) - before
        if idle < 0.05:
            return idle
    return 0.0


@contextmanager
def server_cpu(target: Target, out: dict[str, Any], requests: Callable[[], int]) -> Iterator[None]:
    """Server and PostgreSQL CPU per request answered: across the block AND the background
    catch-up after it (until the server is idle again), so work deferred past the answers
    is still charged to the requests that caused it. The catch-up's share is also given
    alone (`after_cpu_ms`). Rates are the clients' view and do not include the catch-up."""
    server0, pg = CpuAccount._cpu_s(target.pid), PostgresCpu(target.db)
    yield
    server1 = CpuAccount._cpu_s(target.pid)
    idle = settle(target)
    server2 = CpuAccount._cpu_s(target.pid)
    n = max(requests(), 1)
    out["server_cpu_ms"] = round(1000 * (server2 - server0 - idle) / n, 3)
    out["after_cpu_ms"] = round(1000 * (server2 - server1 - idle) / n, 3)
    out["postgres_cpu_ms"] = round(1000 * pg.spent() / n, 3)


def load(
    target: Target, table: str, clients: int, warmup: float, duration: float
) -> dict[str, Any]:
    raw = target.request("GET", f"/namespaces/bench/tables/{table}?snapshots=all")
    asyncio.run(run_clients("127.0.0.1", target.port, clients, warmup, lambda c, i: raw))
    out: dict[str, Any] = {}
    result = Result()
    with server_cpu(target, out, lambda: len(result.latencies_ms)):
        result = asyncio.run(
            run_clients("127.0.0.1", target.port, clients, duration, lambda c, i: raw)
        )
    summary = result.summary()
    out.update(rate=summary["rps"], p50_ms=summary["p50_ms"], p99_ms=summary["p99_ms"])
    if set(result.statuses) != {200}:
        out["statuses"] = result.statuses
    return out


async def _writers(
    target: Target, tables: list[str], commits: int, backoff: bool = False
) -> dict[str, Any]:
    """One writer per entry of `tables` (the same name repeated = a shared table), each
    committing `commits` snapshots; on a 409 it reloads the table and tries again — at
    once, or with `backoff` as Iceberg's Java client does (commit.retry.min-wait-ms 100,
    doubling per failed try, here capped at 1.6 s, plus up to 10 % jitter)."""
    conflicts, requests, latencies = 0, 0, Result()

    async def writer(w: int, table: str) -> None:
        nonlocal conflicts, requests
        conn = Connection("127.0.0.1", target.port)
        path = f"/namespaces/bench/tables/{table}"
        parent: int | None = None
        seq, done, attempt, failed = 0, 0, 0, 0
        try:
            while done < commits:
                attempt += 1
                snap = (w + 1) * 1_000_000 + attempt
                body = append_body(parent, snap, seq + 1)
                t0 = time.perf_counter()
                status, answer = await conn.request(target.request("POST", path, body))
                requests += 1
                if status == 200:
                    latencies.record(status, (time.perf_counter() - t0) * 1000)
                    parent, seq, done, failed = snap, seq + 1, done + 1, 0
                    continue
                if status != 409:
                    raise RuntimeError(f"{target.name}: commit {status} {answer[:300]!r}")
                conflicts += 1
                if backoff:
                    wait = min(0.1 * 2**failed, 1.6) * random.uniform(1.0, 1.1)
                    failed += 1
                    await asyncio.sleep(wait)
                status, answer = await conn.request(target.request("GET", path))
                requests += 1
                metadata = json.loads(answer)["metadata"]
                parent = metadata.get("current-snapshot-id")
                seq = metadata.get("last-sequence-number", 0)
        finally:
            await conn.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(writer(w, t) for w, t in enumerate(tables)))
    latencies.elapsed_s = time.perf_counter() - t0
    n = len(latencies.latencies_ms)
    return {
        "rate": round(n / latencies.elapsed_s, 1),
        "conflicts": conflicts,
        "requests": requests,
        "p50_ms": round(latencies.pct(50), 2),
        "p99_ms": round(latencies.pct(99), 2),
    }


def commit_run(
    target: Target, tag: str, commits: int, shared: bool, writers: int = 4, backoff: bool = False
) -> dict[str, Any]:
    tables = [f"{tag}_shared"] * writers if shared else [f"{tag}_{w}" for w in range(writers)]
    for name in sorted(set(tables)):
        seed_table(target, "bench", name)
    out: dict[str, Any] = {}
    found: dict[str, Any] = {}
    with server_cpu(target, out, lambda: int(found["requests"])):
        found = asyncio.run(_writers(target, tables, commits, backoff))
    return {**found, **out}


def create_run(target: Target, tag: str, per_client: int, clients: int = 8) -> dict[str, Any]:
    target.http.post("/namespaces", json={"namespace": [tag]}).raise_for_status()

    def make(cid: int, i: int) -> bytes:
        return target.request(
            "POST", f"/namespaces/{tag}/tables", {"name": f"t{cid}_{i}", "schema": SCHEMA}
        )

    out: dict[str, Any] = {}
    result = Result()
    with server_cpu(target, out, lambda: len(result.latencies_ms)):
        result = asyncio.run(
            run_clients("127.0.0.1", target.port, clients, 600, make, None, per_client)
        )
    summary = result.summary()
    out.update(rate=summary["rps"], p50_ms=summary["p50_ms"], p99_ms=summary["p99_ms"])
    if set(result.statuses) != {200}:
        out["statuses"] = result.statuses
    return out


def warm_up(target: Target, seconds: float, n: int) -> None:
    """Every code path the scenarios take, before anything is measured (the JVM compiles its
    hot methods in the first seconds; icelog fills its caches)."""
    commit_run(target, "warm", n, shared=False, writers=2)
    commit_run(target, "warm", n // 2, shared=True, writers=2)
    create_run(target, "warm", n // 4)
    load(target, "warm_0", 8, seconds / 2, seconds / 2)


# --- report ----------------------------------------------------------------------------------

LOAD_CLIENTS = (1, 8, 32)
SCENARIOS: list[tuple[str, str]] = [
    *[(f"load-1-c{c}", f"loadTable, 1 snapshot, {c} client{'s' * (c > 1)} (req/s)")
      for c in LOAD_CLIENTS],
    *[(f"load-500-c{c}", f"loadTable, 500 snapshots, {c} client{'s' * (c > 1)} (req/s)")
      for c in LOAD_CLIENTS],
    ("commits-4", "commits, 4 writers x {commits}, 4 tables (commits/s)"),
    ("commits-shared", "commits, 4 writers x {commits}, 1 shared table (commits/s)"),
    (
        "commits-shared-backoff",
        "commits, 4 writers x {commits}, 1 shared table, clients back off on 409 (commits/s)",
    ),
    ("creates", "createTable, 8 clients x {creates}, one namespace (creates/s)"),
]  # fmt: skip


def span(values: list[float], digits: int = 0) -> str:
    lo, hi = min(values), max(values)
    fmt = f"{{:,.{digits}f}}"
    return (
        fmt.format(lo)
        if fmt.format(lo) == fmt.format(hi)
        else f"{fmt.format(lo)}\u2013{fmt.format(hi)}"
    )


def report(rounds: list[dict[str, dict[str, dict[str, Any]]]], meta: dict[str, Any]) -> str:
    def values(key: str, server: str, metric: str) -> list[float]:
        return [float(r[key][server][metric]) for r in rounds if key in r]

    def ratios(key: str, metric: str) -> list[float]:
        return [
            float(r[key]["icelog"][metric]) / max(float(r[key]["reference"][metric]), 1e-9)
            for r in rounds
            if key in r
        ]

    header = ["| scenario | icelog | Java reference | icelog / reference |", "|---|---|---|---|"]
    present = [
        (key, label.format(**meta["counts"]))
        for key, label in SCENARIOS
        if any(key in r for r in rounds)
    ]
    lines = [
        f"icelog vs Iceberg's Java reference catalog — {meta['started']}, {len(rounds)} round(s)",
        f"icelog: {meta['icelog']}; reference: {meta['reference']}",
        f"machine: {meta['machine']}",
        f"note: {meta['note']}",
        "",
        *header,
    ]
    for key, label in present:
        ice, ref = values(key, "icelog", "rate"), values(key, "reference", "rate")
        cell_i, cell_r = span(ice), span(ref)
        if key.startswith(("commits", "creates")):
            extra = "conflicts" if key.startswith("commits") else "p50_ms"
            unit = " 409s" if extra == "conflicts" else " ms p50"
            cell_i += f"; {span(values(key, 'icelog', extra))}{unit}"
            cell_r += f"; {span(values(key, 'reference', extra))}{unit}"
        lines.append(f"| {label} | {cell_i} | {cell_r} | {span(ratios(key, 'rate'), 2)} |")
    lines += [
        "",
        "Server CPU per request (ms; utime + stime of the server process / requests answered,"
        " including its background catch-up after the run until it is idle again;"
        " in brackets the CPU of the PostgreSQL backends on its database, per request):",
        "",
        *header,
    ]
    for key, label in present:
        cells = [
            f"{span(values(key, s, 'server_cpu_ms'), 3)} "
            f"({span(values(key, s, 'postgres_cpu_ms'), 3)})"
            for s in ("icelog", "reference")
        ]
        lines.append(
            f"| {label.rsplit(' (', 1)[0]} | {cells[0]} | {cells[1]} "
            f"| {span(ratios(key, 'server_cpu_ms'), 2)} |"
        )
    sizes = meta.get("response_bytes", {})
    if sizes:
        lines += ["", f"loadTable response bytes: {json.dumps(sizes)}"]
    return "\n".join(lines)


# --- main ------------------------------------------------------------------------------------


def alternate(
    r: int, order: list[Target], runs: list[tuple[str, Callable[[Target], dict[str, Any]]]]
) -> dict[str, dict[str, dict[str, Any]]]:
    """One round: each scenario on each server in turn."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for key, run in runs:
        found[key] = {}
        for t in order:
            found[key][t.name] = run(t)
            print(f"round {r + 1} {key} {t.name}: {json.dumps(found[key][t.name])}", flush=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 round, short runs (a smoke test)")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per loadTable run")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds before each run")
    parser.add_argument(
        "--scenarios", default="load,commits,creates", help="comma list: load,commits,creates"
    )
    parser.add_argument("--snapshots", type=int, default=500, help="history of the large table")
    parser.add_argument("--note", default="", help="a line recorded with the results")
    parser.add_argument(
        "--out", type=Path, help="default bench/results/<date>-reference-compare.txt"
    )
    parser.add_argument(
        "--tree",
        type=Path,
        default=ROOT,
        help="the icelog source tree to serve (default this checkout; e.g. a `git archive HEAD`"
        " export when others edit the checkout)",
    )
    parser.add_argument("--no-check", action="store_true", help="skip the PyIceberg sanity check")
    parser.add_argument(
        "--java-opts", default="-Dsun.net.httpserver.nodelay=true", help="JVM options"
    )
    args = parser.parse_args()
    commits, creates = 50, 300
    if args.quick:
        args.rounds, args.duration, args.warmup = 1, 2.0, 0.5
        commits, creates = 20, 50
    wanted = set(args.scenarios.split(","))
    started = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        check=False,
        capture_output=True,
        text=True,
    ).stdout.strip()
    meta: dict[str, Any] = {
        "started": started,
        "note": args.note or "(none)",
        "counts": {"commits": commits, "creates": creates},
        "icelog": f"one `icelog serve` from {args.tree}"
        + (f" (checkout at {head})" if args.tree.resolve() == ROOT else ""),
        "reference": f"Iceberg {Path(spark_runtime_jar()).stem.rsplit('-', 1)[-1]} "
        f"CatalogHandlers + JdbcCatalog, JDK HttpServer, {THREADS} threads, {args.java_opts}",
    }

    targets: list[Target] = []
    try:
        targets.append(start_icelog(args.tree))
        targets.append(start_reference(args.java_opts.split()))
        checks = [] if args.no_check else [pyiceberg_check(t) for t in targets]
        for line in checks:
            print(line, flush=True)
        with tempfile.TemporaryDirectory(prefix="icelog-ref-calib-") as calib_dir:
            calib = calibration(Path(calib_dir))
        meta["machine"] = (
            f"{os.cpu_count()} cpus, Python {platform.python_version()}, "
            f"10M-add loop {calib['python_loop_10m_s']} s, "
            f"file create {calib['file_create_us']} us, "
            f"loadavg at start {Path('/proc/loadavg').read_text().split()[:3]}"
        )
        if "load" in wanted:
            meta["response_bytes"] = {}
            for t in targets:
                seed_table(t, "bench", "one", 1)
                seed_table(t, "bench", "big", args.snapshots)
                meta["response_bytes"][t.name] = {
                    name: len(t.http.get(f"/namespaces/bench/tables/{name}").content)
                    for name in ("one", "big")
                }
        w, d = args.warmup, args.duration
        for t in targets:
            warm_up(t, 2 * args.warmup, 20 if args.quick else 100)
        rounds: list[dict[str, dict[str, dict[str, Any]]]] = []
        for r in range(args.rounds):
            runs: list[tuple[str, Callable[[Target], dict[str, Any]]]] = []
            if "load" in wanted:
                runs += [
                    (f"{label}-c{c}", partial(load, table=table, clients=c, warmup=w, duration=d))
                    for table, label in (("one", "load-1"), ("big", "load-500"))
                    for c in LOAD_CLIENTS
                ]
            if "commits" in wanted:
                runs += [
                    ("commits-4", partial(commit_run, tag=f"r{r}d", commits=commits, shared=False)),
                    (
                        "commits-shared",
                        partial(commit_run, tag=f"r{r}s", commits=commits, shared=True),
                    ),
                    (
                        "commits-shared-backoff",
                        partial(
                            commit_run, tag=f"r{r}b", commits=commits, shared=True, backoff=True
                        ),
                    ),
                ]
            if "creates" in wanted:
                runs.append(("creates", partial(create_run, tag=f"r{r}c", per_client=creates)))
            rounds.append(alternate(r, targets if r % 2 == 0 else targets[::-1], runs))
        meta["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
        text = report(rounds, meta)
        print("\n" + text)
        out = args.out or BENCH / "results" / f"{started[:10]}-reference-compare.txt"
        if out.exists() and not args.out:
            out = out.with_name(f"{out.stem}-{started[11:].replace(':', '')}{out.suffix}")
        raw = "\n".join(json.dumps(r) for r in rounds)
        out.write_text(
            f"{text}\n\nloadavg at end: {meta['loadavg_end']}\n"
            + "".join(f"check: {c}\n" for c in checks)
            + f"\ncommand: {' '.join(sys.argv)}\n\nraw rounds (one JSON line each):\n{raw}\n"
        )
        print(f"\nwritten to {out}")
    finally:
        for t in targets:
            t.stop()


if __name__ == "__main__":
    main()

"""A/B (or A/B/C...) of source trees by the server's CPU per request, in turns.

    git worktree add /tmp/icelog-before <rev>
    .venv/bin/python bench/ab_cpu.py /tmp/icelog-before . --scenario load --clients 8 --rounds 4

bench/ab.py's servers and scenarios (each tree's `icelog serve` on its own fresh PostgreSQL
database, driven in turns so the machine's drift hits all alike), with two changes for a
machine shared with other work: besides throughput it reports the server process's CPU
(utime + stime from /proc/<pid>/stat) per answered request, which other processes' load
disturbs far less than requests per second; and `load` (loadTable of a 1-snapshot table)
is driven by wrk where it is installed and by bench/loadgen.py otherwise. Prints one line
per tree and round, then each tree's median and range.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab import TreeServer, commits, creates
from loadgen import build_request, run_clients

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def loads(server: TreeServer, clients: int, duration: float, what: str) -> dict[str, Any]:
    """GETs of one path (`load`: loadTable of a 1-snapshot table; `namespace`: loadNamespace,
    a light read the router dispatches): by wrk where it is installed (a cheap client: the
    server, not the load generator, is then what runs out of CPU), else by loadgen."""
    server.make_table()
    path = f"/catalog/v1/{server.prefix}/namespaces/bench"
    if what == "load":
        path += "/tables/one?snapshots=all"
    if shutil.which("wrk"):
        threads = min(2, clients)
        out = subprocess.run(
            ["wrk", f"-t{threads}", f"-c{clients}", f"-d{int(duration)}s", "--latency",
             server.base + path],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        count = re.search(r"(\d+) requests in ([\d.]+)s", out)
        p50 = re.search(r"^\s*50%\s+(\S+)", out, re.M)
        requests = int(count.group(1)) if count else 0
        seconds = float(count.group(2)) if count else duration
        return {
            "requests": requests,
            "rps": round(requests / seconds, 1),
            "p50": p50.group(1) if p50 else None,
            "client": "wrk",
        }
    raw = build_request("GET", path, f"127.0.0.1:{server.port}")
    return asyncio.run(
        run_clients("127.0.0.1", server.port, clients, duration, lambda _c, _i: raw)
    ).summary()


def measured(
    server: TreeServer, scenario: str, tag: str, clients: int, duration: float
) -> dict[str, Any]:
    before = cpu_seconds(server.proc.pid)
    if scenario == "commits":
        found = commits(server, tag, clients, duration)
    elif scenario == "create":
        found = creates(server, tag, clients, duration)
    else:
        found = loads(server, clients, duration, scenario)
    time.sleep(0.5)  # background work the requests left (followers) lands in this round
    used = cpu_seconds(server.proc.pid) - before
    requests = int(found.get("requests", 0)) or 1
    return {**found, "cpu_us_per_req": round(1e6 * used / requests, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trees", nargs="+", type=Path, help="source trees, the first is A")
    parser.add_argument(
        "--scenario", choices=["load", "namespace", "commits", "create"], default="load"
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    servers = [TreeServer(tree) for tree in args.trees]
    seen: dict[Path, list[dict[str, Any]]] = {s.tree: [] for s in servers}
    try:
        for server in servers:  # warm-up (imports, first plans, the table)
            measured(server, args.scenario, "w", args.clients, 2)
        for r in range(args.rounds):
            order = servers if r % 2 == 0 else servers[::-1]
            for server in order:
                found = measured(server, args.scenario, f"r{r}", args.clients, args.duration)
                seen[server.tree].append(found)
                print(f"{server.tree}: {json.dumps(found)}", flush=True)
    finally:
        for server in servers:
            server.stop()
    for tree, rows in seen.items():
        rps = [float(r["rps"]) for r in rows]
        cpu = [float(r["cpu_us_per_req"]) for r in rows]
        print(
            f"{tree}: rps median {statistics.median(rps):.0f} ({min(rps):.0f}-{max(rps):.0f}),"
            f" cpu/req median {statistics.median(cpu):.0f} us ({min(cpu):.0f}-{max(cpu):.0f})"
        )


if __name__ == "__main__":
    main()

"""The two servers bench/reference_compare.py puts side by side: icelog from a source tree,
and Apache Iceberg's Java reference catalog (bench/reference/ReferenceCatalogServer.java,
compiled on demand) — each on its own fresh PostgreSQL database — and what both are seeded
and checked with."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pyarrow as pa
from pyiceberg.catalog import load_catalog

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))
from ab import ADMIN, TreeServer  # noqa: E402
from loadgen import build_request  # noqa: E402
from run import SCHEMA, append_body, free_port  # noqa: E402

from icelog.api.clients import spark_runtime_jar  # noqa: E402

SOURCE = BENCH / "reference" / "ReferenceCatalogServer.java"
BUILD = BENCH / "reference" / "build"
DEBIAN_JARS = {
    "postgresql.jar": "libpostgresql-jdbc-java",
    "slf4j-api.jar": "libslf4j-java",
    "slf4j-simple.jar": "libslf4j-java",
}
THREADS = 16

# --- the two servers -------------------------------------------------------------------------


@dataclass
class Target:
    """One server under test, as the load sees it."""

    name: str
    port: int
    path: str  # the catalog's base path: /catalog/v1/{prefix} or /v1
    pid: int
    db: str
    stop: Callable[[], None]
    http: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}{self.path}", timeout=120)

    def request(self, method: str, path: str, body: Any = None) -> bytes:
        raw = b"" if body is None else json.dumps(body).encode()
        return build_request(method, self.path + path, f"127.0.0.1:{self.port}", raw)


def start_icelog(tree: Path) -> Target:
    server = TreeServer(tree)  # one `icelog serve` process, its own database; makes `bench`
    path = f"/catalog/v1/{server.prefix}"
    return Target("icelog", server.port, path, server.proc.pid, server.db, server.stop)


def reference_classpath() -> list[str]:
    missing = [p for j, p in DEBIAN_JARS.items() if not Path("/usr/share/java", j).exists()]
    if missing:
        sys.exit(f"missing Debian packages: apt-get install -y {' '.join(sorted(set(missing)))}")
    return [spark_runtime_jar(), "/usr/share/java/postgresql.jar", "/usr/share/java/slf4j-api.jar"]


def compile_reference() -> list[str]:
    """Compiles the reference server when its class is missing or older than its source;
    returns the classpath to run it with."""
    classpath = reference_classpath()
    built = BUILD / "ReferenceCatalogServer.class"
    if not built.exists() or built.stat().st_mtime < SOURCE.stat().st_mtime:
        BUILD.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-cp", ":".join(classpath), "-d", str(BUILD), str(SOURCE)], check=True
        )
    return [str(BUILD), *classpath, "/usr/share/java/slf4j-simple.jar"]


def start_reference(java_opts: list[str]) -> Target:
    classpath = compile_reference()
    db = f"icelog_ref_{secrets.token_hex(4)}"
    with psycopg.connect(ADMIN, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{db}"')
    tmp = tempfile.mkdtemp(prefix="icelog-ref-")
    port = free_port()
    log_path = Path(tmp, "server.log")
    log = log_path.open("wb")  # closed by stop()
    proc = subprocess.Popen(
        [
            "java", *java_opts, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp", ":".join(classpath), "ReferenceCatalogServer", str(port),
            f"jdbc:postgresql://127.0.0.1:5432/{db}", "postgres", f"{tmp}/warehouse",
            str(THREADS), str(THREADS),
        ],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip

    def stop() -> None:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        shutil.rmtree(tmp, ignore_errors=True)

    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/config", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop()
            raise RuntimeError(log_path.read_text())
        time.sleep(0.1)
    target = Target("reference", port, "/v1", proc.pid, db, stop)
    target.http.post("/namespaces", json={"namespace": ["bench"]}).raise_for_status()
    return target


# --- setup and checks ------------------------------------------------------------------------


def seed_table(target: Target, ns: str, name: str, snapshots: int = 0) -> None:
    target.http.post(
        f"/namespaces/{ns}/tables", json={"name": name, "schema": SCHEMA}
    ).raise_for_status()
    parent = None
    for i in range(1, snapshots + 1):
        body = append_body(parent, 10_000 + i, i)
        target.http.post(f"/namespaces/{ns}/tables/{name}", json=body).raise_for_status()
        parent = 10_000 + i


def pyiceberg_check(target: Target) -> str:
    """A real client against the server: create, append (writes Parquet, commits with
    requirements), load again and scan."""
    uri = f"http://127.0.0.1:{target.port}{target.path.split('/v1')[0]}"
    props = {"type": "rest", "uri": uri}
    if target.name == "icelog":
        props["warehouse"] = "default"
    catalog = load_catalog("check", **props)
    catalog.create_namespace("sanity")
    table = catalog.create_table(
        "sanity.events", pa.schema([("id", pa.int64()), ("kind", pa.string())])
    )
    table.append(pa.table({"id": [1, 2], "kind": ["a", "b"]}))
    table.append(pa.table({"id": [3], "kind": ["c"]}))
    rows = catalog.load_table("sanity.events").scan().to_arrow().to_pylist()
    snapshots = len(catalog.load_table("sanity.events").metadata.snapshots)
    if sorted(r["id"] for r in rows) != [1, 2, 3] or snapshots != 2:
        raise RuntimeError(f"{target.name}: PyIceberg read back {rows}, {snapshots} snapshots")
    stale = append_body(None, 1, 1)  # asserts `main` is absent: it is not any more
    status = target.http.post("/namespaces/sanity/tables/events", json=stale).status_code
    missing = target.http.get("/namespaces/sanity/tables/nope").status_code
    if (status, missing) != (409, 404):
        raise RuntimeError(f"{target.name}: stale commit {status}, missing table {missing}")
    return f"{target.name}: PyIceberg create/append x2/scan ok, stale commit 409, missing 404"


# --- measuring -------------------------------------------------------------------------------

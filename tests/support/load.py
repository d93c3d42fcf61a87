"""Client-side load for the resilience tests (soak, crash, PostgreSQL restart).

Plain Iceberg REST over httpx, one thread per virtual client. Every commit is
identifiable in the final table metadata, and every outcome goes into a `Ledger`:

- acknowledged (2xx): must be in the final metadata, whole;
- rejected (a 4xx, e.g. a 409 after the retries ran out): must not be there;
- unknown (5xx, connection error, timeout: CommitStateUnknown territory): may or may
  not be there, but never half.

An append is one commit of three updates: `add-snapshot` (summary `added-records=1`,
`total-records` = parent's + 1), `set-snapshot-ref main` and a `set-properties` with a
key naming the snapshot. It asserts the current main snapshot, so concurrent appends to
a table conflict (409) and the client reloads and retries; in the end the main branch's
ancestry must hold exactly the applied appends, and its `total-records` must equal the
ancestry's length (the "row count" proof), every snapshot with its property (not half
applied). A property commit sets one unique key without requirements (the server
rebases it). A transaction sets one key on two tables in one `transactions/commit`:
both or neither.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import httpx

from tests.support.server import ICELOG_BIN, REPO_ROOT, CatalogServer, store_env

SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "payload", "type": "string", "required": False},
    ],
}
PROP_PREFIX = "load.prop."
SNAP_PREFIX = "load.snap."
TXN_PREFIX = "load.txn."

# Outcome of one request, for the ledger.
OK, REJECTED, UNKNOWN = "ok", "rejected", "unknown"


def warehouse_prefix(base: str, warehouse: str = "default", timeout: float = 10.0) -> str:
    response = httpx.get(
        f"{base}/catalog/v1/config", params={"warehouse": warehouse}, timeout=timeout
    )
    response.raise_for_status()
    return str(response.json()["overrides"]["prefix"])


@dataclass(frozen=True)
class TableRef:
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}.{self.name}"


class RestClient:
    """A thin Iceberg REST client on one server; `base` can be swapped (failover)."""

    def __init__(self, base: str, prefix: str, timeout: float = 30.0) -> None:
        self.prefix = prefix
        # Idle keep-alive connections are dropped well before the server's 5 s
        # keep-alive timeout: reusing one the server is closing races into a reset.
        self.http = httpx.Client(timeout=timeout, limits=httpx.Limits(keepalive_expiry=2.0))
        self.base = base

    def url(self, path: str) -> str:
        return f"{self.base}/catalog/v1/{self.prefix}{path}"

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return self.http.request(method, self.url(path), json=body)

    def create_namespace(self, namespace: str) -> None:
        r = self.request("POST", "/namespaces", {"namespace": [namespace]})
        if r.status_code != 200:
            raise AssertionError(f"create namespace {namespace}: {r.status_code} {r.text}")

    def create_table(self, table: TableRef, properties: dict[str, str] | None = None) -> None:
        body = {
            "name": table.name,
            "schema": SCHEMA,
            "properties": {"format-version": "2", **(properties or {})},
        }
        r = self.request("POST", f"/namespaces/{table.namespace}/tables", body)
        if r.status_code != 200:
            raise AssertionError(f"create table {table.key}: {r.status_code} {r.text}")

    def load_table(self, table: TableRef) -> httpx.Response:
        return self.request("GET", f"/namespaces/{table.namespace}/tables/{table.name}")

    def load_metadata(self, table: TableRef) -> dict[str, Any]:
        r = self.load_table(table)
        if r.status_code != 200:
            raise AssertionError(f"load {table.key}: {r.status_code} {r.text[:500]}")
        body: dict[str, Any] = r.json()
        return body

    def commit(self, table: TableRef, body: dict[str, Any]) -> httpx.Response:
        return self.request("POST", f"/namespaces/{table.namespace}/tables/{table.name}", body)


def create_tables(client: RestClient, namespace: str, count: int, **props: str) -> list[TableRef]:
    client.create_namespace(namespace)
    tables = [TableRef(namespace, f"t{i:02d}") for i in range(count)]
    for table in tables:
        client.create_table(table, props)
    return tables


def append_body(metadata: dict[str, Any], snapshot_id: int, tag: str) -> dict[str, Any]:
    """An append on top of the main branch of `metadata` (asserted), one record."""
    main = metadata.get("refs", {}).get("main", {}).get("snapshot-id")
    if main is None:
        main = metadata.get("current-snapshot-id")
        main = None if main in (None, -1) else main
    total = 0
    if main is not None:
        parent = next(s for s in metadata["snapshots"] if s["snapshot-id"] == main)
        total = int(parent["summary"]["total-records"])
    snapshot: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "sequence-number": int(metadata.get("last-sequence-number", 0)) + 1,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": f"{metadata['location']}/metadata/snap-{snapshot_id}.avro",
        "summary": {
            "operation": "append",
            "added-records": "1",
            "total-records": str(total + 1),
            "load-tag": tag,
        },
        "schema-id": 0,
    }
    if main is not None:
        snapshot["parent-snapshot-id"] = main
    return {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": main}],
        "updates": [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
             "snapshot-id": snapshot_id},
            {"action": "set-properties", "updates": {f"{SNAP_PREFIX}{snapshot_id}": tag}},
        ],
    }  # fmt: skip


def _classify(response: httpx.Response | None, error: BaseException | None = None) -> str:
    if response is None:
        # A refused connection never carried the request; any other failure (reset,
        # timeout, the server died mid-request) leaves the outcome unknown.
        return REJECTED if isinstance(error, httpx.ConnectError) else UNKNOWN
    if response.status_code >= 500:
        return UNKNOWN
    return OK if response.status_code < 300 else REJECTED


@dataclass
class Ledger:
    """What the clients were told, per table (thread-safe)."""

    statuses: Counter[str] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    # 4xx other than a 409 conflict: none of the load's requests should get one.
    client_errors: list[str] = field(default_factory=list)
    transport_errors: list[str] = field(default_factory=list)
    stale_reads: list[str] = field(default_factory=list)
    props: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    snaps: dict[str, dict[str, set[int]]] = field(default_factory=dict)
    txns: dict[str, set[str]] = field(default_factory=lambda: {OK: set(), UNKNOWN: set()})
    conflicts: int = 0
    retries_exhausted: int = 0
    latencies: list[float] = field(default_factory=list)
    slowest: dict[str, float] = field(default_factory=dict)
    errors_after: list[tuple[float, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, op: str, response: httpx.Response | None, error: str = "") -> None:
        now = time.monotonic()
        with self._lock:
            if response is None:
                self.statuses[f"{op} error"] += 1
                self.transport_errors.append(f"{op}: {error}")
                self.errors_after.append((now, f"{op}: {error}"))
                return
            self.statuses[f"{op} {response.status_code}"] += 1
            if response.status_code >= 500:
                entry = f"{op} {response.status_code} {response.text[:300]}"
                self.server_errors.append(entry)
                self.errors_after.append((now, entry))
            elif response.status_code >= 400 and response.status_code != 409:
                entry = f"{op} {response.status_code} {response.text[:300]}"
                self.client_errors.append(entry)
                self.errors_after.append((now, entry))

    def record_prop(self, table: TableRef, key: str, outcome: str) -> None:
        with self._lock:
            self.props.setdefault(table.key, {OK: set(), UNKNOWN: set()}).setdefault(
                outcome, set()
            ).add(key)

    def record_snap(self, table: TableRef, snapshot_id: int, outcome: str) -> None:
        with self._lock:
            self.snaps.setdefault(table.key, {OK: set(), UNKNOWN: set()}).setdefault(
                outcome, set()
            ).add(snapshot_id)

    def record_txn(self, key: str, outcome: str) -> None:
        with self._lock:
            self.txns.setdefault(outcome, set()).add(key)

    def acknowledged(self) -> int:
        with self._lock:
            return (
                sum(len(v[OK]) for v in self.props.values())
                + sum(len(v[OK]) for v in self.snaps.values())
                + len(self.txns[OK])
            )


@dataclass
class Mix:
    """Relative weights of the operations a worker picks from."""

    load: int = 40
    list_tables: int = 10
    get_namespace: int = 10
    set_property: int = 20
    append: int = 15
    transaction: int = 5

    def ops(self) -> tuple[list[str], list[int]]:
        names = ["load", "list_tables", "get_namespace", "set_property", "append", "transaction"]
        return names, [getattr(self, n) for n in names]


class Worker(threading.Thread):
    """One virtual client: picks operations by weight until `stop` is set.

    `bases` are the servers it may talk to; it commits on one and, after an acknowledged
    commit, reads the table back from the next (read-your-writes across replicas).
    """

    def __init__(
        self,
        wid: int,
        bases: Sequence[str],
        prefix: str,
        tables: Sequence[TableRef],
        ledger: Ledger,
        stop: threading.Event,
        *,
        mix: Mix | None = None,
        think_s: float = 0.0,
        timeout: float = 30.0,
        max_conflict_retries: int = 50,
        check_read_your_writes: bool = True,
    ) -> None:
        super().__init__(name=f"load-{wid}", daemon=True)
        self.wid = wid
        self.bases = list(bases)
        self.clients = [RestClient(b, prefix, timeout) for b in bases]
        self.tables = list(tables)
        self.ledger = ledger
        self.stop_event = stop
        self.names, self.weights = (mix or Mix()).ops()
        self.think_s = think_s
        self.max_conflict_retries = max_conflict_retries
        self.check_ryw = check_read_your_writes and len(bases) > 1
        self.rng = random.Random(wid)
        self.seq = 0
        self.failure: BaseException | None = None
        self.last_error: httpx.HTTPError | None = None

    def _client(self) -> RestClient:
        return self.clients[self.rng.randrange(len(self.clients))]

    def retarget(self, bases: Sequence[str]) -> None:
        """Point the clients at other servers (a restarted one listens on a new port)."""
        for client, base in zip(self.clients, bases, strict=True):
            client.base = base

    def _call(self, op: str, fn: Callable[[], httpx.Response]) -> httpx.Response | None:
        """The response, or None when the request failed (the error in `last_error`)."""
        started = time.perf_counter()
        self.last_error = None
        try:
            response = fn()
        except httpx.HTTPError as exc:
            self.last_error = exc
            self.ledger.note(op, None, f"{type(exc).__name__}: {exc}")
            time.sleep(0.05)  # the server is down or restarting: do not spin
            return None
        finally:
            elapsed = time.perf_counter() - started
            with self.ledger._lock:
                self.ledger.latencies.append(elapsed)
                self.ledger.slowest[op] = max(elapsed, self.ledger.slowest.get(op, 0.0))
        self.ledger.note(op, response)
        return response

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                op = self.rng.choices(self.names, self.weights)[0]
                getattr(self, f"op_{op}")()
                if self.think_s:
                    time.sleep(self.think_s * (0.5 + self.rng.random()))
        except BaseException as exc:  # surfaced by the test
            self.failure = exc
        finally:
            for client in self.clients:
                client.close()

    def _tag(self) -> str:
        self.seq += 1
        return f"w{self.wid}-{self.seq}"

    # -- reads -------------------------------------------------------------------------------
    def op_load(self) -> None:
        table = self.rng.choice(self.tables)
        client = self._client()
        self._call("loadTable", lambda: client.load_table(table))

    def op_list_tables(self) -> None:
        ns = self.rng.choice(self.tables).namespace
        client = self._client()
        self._call("listTables", lambda: client.request("GET", f"/namespaces/{ns}/tables"))

    def op_get_namespace(self) -> None:
        ns = self.rng.choice(self.tables).namespace
        client = self._client()
        self._call("getNamespace", lambda: client.request("GET", f"/namespaces/{ns}"))

    def _read_back(self, writer: RestClient, table: TableRef, check: Callable[[Any], bool]) -> None:
        if not self.check_ryw:
            return
        reader = self.clients[(self.clients.index(writer) + 1) % len(self.clients)]
        response = self._call("loadTable", lambda: reader.load_table(table))
        if (
            response is not None
            and response.status_code == 200
            and not check(response.json()["metadata"])
        ):
            with self.ledger._lock:
                self.ledger.stale_reads.append(f"{table.key} from {reader.base}")

    # -- commits -------------------------------------------------------------------------------
    def op_set_property(self) -> None:
        table = self.rng.choice(self.tables)
        key = f"{PROP_PREFIX}{self._tag()}"
        client = self._client()
        body = {"requirements": [], "updates": [
            {"action": "set-properties", "updates": {key: "1"}}]}  # fmt: skip
        response = self._call("commit", lambda: client.commit(table, body))
        outcome = _classify(response, self.last_error)
        self.ledger.record_prop(table, key, outcome)
        if outcome == OK:
            self._read_back(client, table, lambda md: key in md.get("properties", {}))

    def op_append(self) -> None:
        table = self.rng.choice(self.tables)
        client = self._client()
        tag = self._tag()
        for _ in range(self.max_conflict_retries):
            loaded = self._call("loadTable", lambda: client.load_table(table))
            if loaded is None or loaded.status_code != 200:
                return  # nothing sent yet
            snapshot_id = self.rng.randrange(1, 2**62)
            body = append_body(loaded.json()["metadata"], snapshot_id, tag)
            response = self._call("commit", lambda: client.commit(table, body))  # noqa: B023
            outcome = _classify(response, self.last_error)
            if outcome == REJECTED and response is not None and response.status_code == 409:
                with self.ledger._lock:
                    self.ledger.conflicts += 1
                time.sleep(self.rng.random() * 0.02)
                continue  # somebody appended first: reload and retry
            self.ledger.record_snap(table, snapshot_id, outcome)
            if outcome == OK:
                self._read_back(
                    client,
                    table,
                    lambda md: any(s["snapshot-id"] == snapshot_id for s in md["snapshots"]),  # noqa: B023
                )
            return
        with self.ledger._lock:
            self.ledger.retries_exhausted += 1

    def op_transaction(self) -> None:
        first, second = self.rng.sample(self.tables, 2)
        key = f"{TXN_PREFIX}{self._tag()}"
        client = self._client()
        body = {
            "table-changes": [
                {
                    "identifier": {"namespace": [t.namespace], "name": t.name},
                    "requirements": [],
                    "updates": [{"action": "set-properties", "updates": {key: "1"}}],
                }
                for t in (first, second)
            ]
        }
        response = self._call(
            "transaction", lambda: client.request("POST", "/transactions/commit", body)
        )
        outcome = _classify(response, self.last_error)
        if outcome != REJECTED:
            self.ledger.record_txn(f"{key}|{first.key}|{second.key}", outcome)


@contextmanager
def running_load(
    bases: Sequence[str],
    prefix: str,
    tables: Sequence[TableRef],
    clients: int,
    ledger: Ledger,
    **worker_args: Any,
) -> Iterator[list[Worker]]:
    """Start `clients` workers (spread over `bases`); stop and join them on exit."""
    stop = threading.Event()
    workers = [
        Worker(i, [*bases[i % len(bases):], *bases[: i % len(bases)]], prefix, tables,
               ledger, stop, **worker_args)
        for i in range(clients)
    ]  # fmt: skip
    for w in workers:
        w.start()
    try:
        yield workers
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=120)
    stuck = [w.name for w in workers if w.is_alive()]
    assert not stuck, f"load workers did not finish (a request hung?): {stuck}"
    failed = [f"{w.name}: {w.failure!r}" for w in workers if w.failure is not None]
    assert not failed, f"load workers crashed: {failed}"


# -- final checks -------------------------------------------------------------------------------
def ancestry(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """Snapshots of the main branch, newest first."""
    by_id = {s["snapshot-id"]: s for s in metadata.get("snapshots", [])}
    current = metadata.get("refs", {}).get("main", {}).get("snapshot-id")
    chain: list[dict[str, Any]] = []
    while current is not None:
        snap = by_id.get(current)
        if snap is None:
            raise AssertionError(f"main ancestry names a missing snapshot {current}")
        chain.append(snap)
        current = snap.get("parent-snapshot-id")
    return chain


def check_tables(
    client: RestClient, tables: Sequence[TableRef], ledger: Ledger
) -> tuple[list[str], dict[str, int]]:
    """Compare the final metadata of every table with the ledger. Returns (problems,
    totals) where totals counts what was found (applied appends, properties, ...)."""
    problems: list[str] = []
    totals: Counter[str] = Counter()
    final: dict[str, dict[str, Any]] = {}
    for table in tables:
        md = client.load_metadata(table)["metadata"]
        final[table.key] = md
        props: dict[str, str] = md.get("properties", {})
        chain = ancestry(md)
        chain_ids = {s["snapshot-id"] for s in chain}
        all_ids = [s["snapshot-id"] for s in md.get("snapshots", [])]
        if len(all_ids) != len(set(all_ids)):
            problems.append(f"{table.key}: duplicate snapshot ids")
        if set(all_ids) != chain_ids:
            problems.append(f"{table.key}: snapshots outside main's ancestry")
        seqs = [s["sequence-number"] for s in reversed(chain)]
        if seqs != sorted(set(seqs)):
            problems.append(f"{table.key}: sequence numbers not increasing along main")
        if chain and int(chain[0]["summary"]["total-records"]) != len(chain):
            problems.append(
                f"{table.key}: total-records {chain[0]['summary']['total-records']} but "
                f"{len(chain)} appends on main"
            )
        snaps = ledger.snaps.get(table.key, {OK: set(), UNKNOWN: set()})
        if lost := snaps[OK] - chain_ids:
            problems.append(f"{table.key}: {len(lost)} acknowledged append(s) lost: {lost}")
        if phantom := chain_ids - snaps[OK] - snaps.get(UNKNOWN, set()):
            problems.append(f"{table.key}: appends nobody sent or that were rejected: {phantom}")
        snap_props = {int(k.removeprefix(SNAP_PREFIX)) for k in props if k.startswith(SNAP_PREFIX)}
        if snap_props != chain_ids:
            problems.append(
                f"{table.key}: half-applied append(s): snapshot without its property "
                f"{chain_ids - snap_props} / property without its snapshot {snap_props - chain_ids}"
            )
        keys = {k for k in props if k.startswith(PROP_PREFIX)}
        sent = ledger.props.get(table.key, {OK: set(), UNKNOWN: set()})
        if lost_keys := sent[OK] - keys:
            problems.append(f"{table.key}: {len(lost_keys)} acknowledged propert(ies) lost")
        if phantom_keys := keys - sent[OK] - sent.get(UNKNOWN, set()):
            problems.append(f"{table.key}: properties nobody sent: {sorted(phantom_keys)[:5]}")
        totals["appends"] += len(chain)
        totals["appends acknowledged"] += len(snaps[OK])
        totals["appends unknown"] += len(snaps.get(UNKNOWN, set()))
        totals["properties"] += len(keys)
        totals["properties acknowledged"] += len(sent[OK])
        totals["properties unknown"] += len(sent.get(UNKNOWN, set()))
    sent_txns = {e.split("|")[0] for o in (OK, UNKNOWN) for e in ledger.txns.get(o, set())}
    for key, md in final.items():
        if phantom_txns := {k for k in md["properties"] if k.startswith(TXN_PREFIX)} - sent_txns:
            problems.append(f"{key}: transactions nobody sent: {sorted(phantom_txns)[:5]}")
    for outcome in (OK, UNKNOWN):
        for entry in ledger.txns.get(outcome, set()):
            key, first, second = entry.split("|")
            present = [key in final[t]["properties"] for t in (first, second)]
            if outcome == OK and not all(present):
                problems.append(f"acknowledged transaction {key} lost: {present}")
            if any(present) and not all(present):
                problems.append(f"transaction {key} half-applied: {present}")
            totals[f"transactions {outcome}"] += 1
            totals["transactions applied"] += all(present)
    return problems, dict(totals)


def local_path(location: str) -> Path:
    parsed = urlparse(location)
    return Path(unquote(parsed.path))


def check_metadata_files(client: RestClient, tables: Sequence[TableRef]) -> list[str]:
    """Every table's current metadata file exists, parses and equals what loadTable
    serves; every file in its metadata-log exists."""
    problems: list[str] = []
    for table in tables:
        loaded = client.load_metadata(table)
        path = local_path(loaded["metadata-location"])
        try:
            on_disk = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            problems.append(f"{table.key}: current metadata file {path}: {exc!r}")
            continue
        if on_disk != loaded["metadata"]:
            problems.append(f"{table.key}: {path} differs from the served metadata")
        for entry in loaded["metadata"].get("metadata-log", []):
            if not local_path(entry["metadata-file"]).exists():
                problems.append(f"{table.key}: metadata-log file missing {entry['metadata-file']}")
    return problems


def check_event_files(base: str) -> tuple[list[str], int]:
    """Every metadata file a table event names (new and previous) exists. Returns
    (problems, files checked). Only for warehouses that keep old metadata files."""
    problems: list[str] = []
    checked: set[str] = set()
    after = 0
    while True:
        page = httpx.get(
            f"{base}/management/v1/events",
            params={"after": after, "limit": 1000, "type": "io.icelog.table."},
            timeout=60,
        )
        page.raise_for_status()
        body = page.json()
        for event in body["events"]:
            data = event.get("data") or {}
            for key in ("metadata-location", "previous-metadata-location"):
                location = data.get(key)
                if location and location not in checked:
                    checked.add(location)
                    if not local_path(location).exists():
                        problems.append(
                            f"event {event['position']} ({event['type']}) names missing "
                            f"{key} {location}"
                        )
        if body.get("next-after") is None:
            return problems, len(checked)
        after = body["next-after"]


def run_icelog(
    server: CatalogServer, *args: str, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """An `icelog` command (e.g. `projections verify`) on `server`'s store."""
    env = store_env(server)
    env.update(server.extra_env)
    return subprocess.run(
        [str(ICELOG_BIN), *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def verify_with_cli(server: CatalogServer) -> list[str]:
    """`icelog projections verify` and `icelog metadata verify`: problems if not exit 0."""
    problems = []
    for args in (("projections", "verify"), ("metadata", "verify")):
        done = run_icelog(server, *args)
        if done.returncode != 0:
            problems.append(
                f"icelog {' '.join(args)} exited {done.returncode}:\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
    return problems


def summary(ledger: Ledger, seconds: float) -> str:
    lat = sorted(ledger.latencies)
    n = len(lat)

    def pct(p: float) -> float:
        return lat[min(n - 1, int(p * n))] * 1000 if n else float("nan")

    return (
        f"{n} requests in {seconds:.0f} s ({n / max(seconds, 1e-9):.0f}/s), "
        f"p50 {pct(0.5):.1f} ms, p99 {pct(0.99):.1f} ms, max {pct(1.0):.0f} ms; "
        f"slowest by operation (s) { ({k: round(v, 2) for k, v in ledger.slowest.items()}) }; "
        f"{ledger.acknowledged()} commits acknowledged, {ledger.conflicts} 409s retried; "
        f"statuses {dict(sorted(ledger.statuses.items()))}"
    )


def run_for(threads: Sequence[threading.Thread], stop: threading.Event, seconds: float) -> None:
    """Start `threads` and let them run for `seconds` (less if one sets `stop`); then set
    `stop` and join each (30 s at the most)."""
    for thread in threads:
        thread.start()
    try:
        stop.wait(seconds)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)

"""Read-model rebuild benchmark: how fast the log folds back into the read-model tables.

    .venv/bin/python bench/rebuild.py --backend sqlite|postgres [--events 20000]
        [--tables 20,1000] [--repeat 3] [--out FILE]

For each table count, a log of N events is written first through the in-process commands
(one namespace, T tables, then set-properties commits round robin over the tables, 40
per append transaction), then:

1. fold: `projections.rebuild.rebuild` into fresh `bench_icelog_*` tables (best and median
   of --repeat runs), checked equal to the live tables (`differences` == []);
2. rebuild_and_swap: what `icelog projections rebuild` does (fold, indexes, the swap
   under the log's write lock);
3. verify: what `icelog projections verify` does (fold into temporary tables in one
   snapshot, compare every row).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from report import emit  # noqa: E402

from icelog.api.services import Services  # noqa: E402
from icelog.api.settings import Settings  # noqa: E402
from icelog.domain.identifiers import TabularName  # noqa: E402
from icelog.projections import maintenance  # noqa: E402
from icelog.projections.rebuild import differences, drop_tables, rebuild  # noqa: E402
from icelog.projections.sql import write_transaction  # noqa: E402
from tests.support import postgres  # noqa: E402
from tests.support.commands import bench_tables  # noqa: E402

PER_APPEND = 40


def fill_log(services: Services, events: int, tables: int) -> int:
    ctx, wid, names = bench_tables(services, tables)
    n = 0
    while int(services.catalog.app.recorder.max_notification_id() or 0) < events:
        changes: list[tuple[TabularName, list[dict[str, Any]], list[dict[str, Any]]]] = []
        for _ in range(PER_APPEND):
            updates = [{"action": "set-properties", "updates": {"n": str(n)}}]
            changes.append((names[n % tables], [], updates))
            n += 1
        services.catalog.tables.commit_transaction(ctx, wid, changes)
    return int(services.catalog.app.recorder.max_notification_id() or 0)


def rate(events: int, seconds: float) -> dict[str, Any]:
    return {"seconds": round(seconds, 3), "events_per_s": round(events / seconds)}


def scenario(backend: str, events: int, tables: int, repeat: int, work: Path) -> dict[str, Any]:
    url = postgres.create_database() if backend == "postgres" else None
    env = {"ICELOG_DATA_DIR": str(work / f"{backend}-{tables}"), "ICELOG_TASK_WORKERS": "0"}
    if url:
        env["ICELOG_DATABASE_URL"] = url
        env["ICELOG_SECRETS_KEY"] = postgres.TEST_SECRETS_KEY
    services = Services.build(Settings.from_env(env))
    try:
        services.ensure_defaults()
        started = time.perf_counter()
        head = fill_log(services, events, tables)
        fill_s = time.perf_counter() - started
        app = services.catalog.app
        datastore = app.recorder.datastore  # type: ignore[attr-defined]
        folds = []
        for _ in range(repeat):
            started = time.perf_counter()
            applied = rebuild(app.recorder, app.mapper, "bench_")
            folds.append(time.perf_counter() - started)
            assert applied == head, (applied, head)
        assert differences(app.recorder, "bench_") == []
        with write_transaction(datastore) as cur:
            cur.execute("SELECT AVG(LENGTH(metadata)) FROM icelog_tabulars")
            document_bytes = round(float(cur.fetchone()[0]))
            drop_tables(cur, "bench_")
        swapped = maintenance.rebuild_and_swap(app.recorder, app.mapper)
        verified = maintenance.verify(app.recorder, app.mapper)
        assert verified.differences == []
        return {
            "events": head,
            "tables": tables,
            "avg_document_bytes": document_bytes,
            "fill_seconds": round(fill_s, 1),
            "fold_best": rate(head, min(folds)),
            "fold_median": rate(head, statistics.median(folds)),
            "rebuild_and_swap": {
                **rate(swapped.events, swapped.seconds),
                "swap_ms": round(swapped.swap_seconds * 1000, 1),
            },
            "verify": rate(verified.applied, verified.seconds),
        }
    finally:
        services.close()
        if url:
            postgres.drop_database(url)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--tables", default="20,1000", help="table counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="icelog-bench-rebuild-") as tmp:
        result = {
            "benchmark": "rebuild",
            "backend": args.backend,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "scenarios": [
                scenario(args.backend, args.events, int(t), args.repeat, Path(tmp))
                for t in args.tables.split(",")
            ],
        }
    emit(result, args.out)


if __name__ == "__main__":
    main()

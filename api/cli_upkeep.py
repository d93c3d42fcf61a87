"""`icelog metadata verify`, `icelog projections …` and `icelog secrets rotate`: what is
derived from the log (metadata files, read-model tables) checked against it and rebuilt,
and the storage credentials sealed again under the current key."""

from __future__ import annotations

import argparse
import sys
from contextlib import closing
from typing import Any
from uuid import UUID

from icelog.api.services import Services
from icelog.api.settings import PREFIX, Settings
from icelog.projections import maintenance
from icelog.projections.schema import READ_MODEL_TABLES
from icelog.projections.secrets import SecretStore, SecretUnreadable


def add_commands(sub: Any) -> None:
    """The commands, on the `icelog` parser's subcommands."""
    metadata = sub.add_parser("metadata", help="metadata files against the log")
    metadata_sub = metadata.add_subparsers(dest="metadata_command", required=True)
    mverify = metadata_sub.add_parser(
        "verify", help="fold each table's events and compare with its metadata file"
    )
    mverify.add_argument("--warehouse-id", default=None)
    mverify.add_argument("-v", "--verbose", action="store_true", help="list every table")
    mverify.set_defaults(run=metadata_verify)
    projections = sub.add_parser("projections", help="the read-model tables against the log")
    projections_sub = projections.add_subparsers(dest="projections_command", required=True)
    prebuild = projections_sub.add_parser(
        "rebuild", help="rebuild from the log into new tables, swap them in atomically"
    )
    prebuild.add_argument(
        "--only",
        nargs="+",
        action="extend",
        choices=READ_MODEL_TABLES,
        metavar="TABLE",
        help=f"swap only these ({', '.join(READ_MODEL_TABLES)}); the fold reads the whole log",
    )
    prebuild.set_defaults(run=projections_rebuild)
    pverify = projections_sub.add_parser(
        "verify", help="fold the log into scratch tables and compare; exit 1 on a difference"
    )
    pverify.add_argument("--show", type=int, default=20, help="differences to print")
    pverify.set_defaults(run=projections_verify)
    secrets = sub.add_parser("secrets", help="storage credentials, encrypted at rest")
    secrets_sub = secrets.add_subparsers(dest="secrets_command", required=True)
    rotate = secrets_sub.add_parser(
        "rotate", help="re-encrypt every credential under ICELOG_SECRETS_KEY"
    )
    rotate.set_defaults(run=secrets_rotate)


def metadata_verify(args: argparse.Namespace, settings: Settings) -> int:
    """Each live table's and view's metadata file against what its events fold to."""
    with closing(Services.build(settings)) as services:
        warehouse = UUID(args.warehouse_id) if args.warehouse_id else None
        results = services.catalog.audit.verify_metadata(warehouse)
        bad = [r for r in results if r["status"] != "ok"]
        for r in results if args.verbose else bad:
            detail = f"  ({r['detail']})" if "detail" in r else ""
            print(f"{r['status']:<10} {r['kind']:<5} {r['name']}  {r['metadata-location']}{detail}")
        print(f"{len(results)} table(s) and view(s) checked; {len(bad)} problem(s)")
        return 1 if bad else 0


def projections_rebuild(args: argparse.Namespace, settings: Settings) -> int:
    """Rebuild read-model tables from the log, then swap them in (one transaction)."""
    services = Services.build(settings)
    progress = maintenance.ProgressLine(sys.stderr)
    try:
        app = services.catalog.app
        result = maintenance.rebuild_and_swap(app.recorder, app.mapper, args.only, progress)
    except maintenance.MaintenanceError as exc:
        progress.done()  # end the progress line before the message
        print(f"icelog: {exc}", file=sys.stderr)
        return 1
    finally:
        progress.done()
        services.close()
    rate = result.events / max(result.seconds, 1e-9)
    print(
        f"rebuilt {', '.join(result.tables)} from {result.events} event(s) in "
        f"{result.seconds:.2f} s ({rate:,.0f} events/s); swapped in "
        f"{result.swap_seconds * 1000:.0f} ms, {result.caught_up} event(s) caught up "
        "under the log's write lock"
    )
    return 0


def projections_verify(args: argparse.Namespace, settings: Settings) -> int:
    """Fold the log into scratch tables and compare with the live read model."""
    services = Services.build(settings)
    progress = maintenance.ProgressLine(sys.stderr)
    try:
        app = services.catalog.app
        result = maintenance.verify(app.recorder, app.mapper, progress)
    finally:
        progress.done()
        services.close()
    if not result.differences:
        print(
            f"read model matches the log: {result.applied} event(s) up to position "
            f"{result.head} ({result.seconds:.2f} s)"
        )
        return 0
    print(f"{len(result.differences)} row(s) differ from the log (position {result.head}):")
    for line in result.differences[: args.show]:
        print(f"  {line}")
    if len(result.differences) > args.show:
        print(f"  ... and {len(result.differences) - args.show} more")
    print("repair with: icelog projections rebuild")
    return 1


def secrets_rotate(_args: argparse.Namespace, settings: Settings) -> int:
    """Re-encrypt every storage credential under ICELOG_SECRETS_KEY (old keys from
    ICELOG_SECRETS_OLD_KEYS decrypt what is not yet under it)."""
    with closing(Services.build(settings)) as services:
        store = services.catalog.app.secrets
        assert isinstance(store, SecretStore)
        try:
            changed = store.rotate()
        except SecretUnreadable as exc:
            print(f"icelog: {exc}; add the key it was sealed with to {PREFIX}SECRETS_OLD_KEYS")
            return 1
    print(f"re-encrypted {changed} storage credential(s) under the current key")
    return 0

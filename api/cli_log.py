"""`icelog events tail`, `icelog audit …` and `icelog catalog at`: the event log at a
terminal — read as CloudEvents, its hash chain extended, checked and exported with the
events, and folded to the catalog as of a position or a time."""

from __future__ import annotations

import argparse
import string
import sys
import time
from contextlib import closing
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from icelog.api.audit import Chainer, recorded_heads
from icelog.api.event_log import AsOfRequest, Indexer, catalog_document
from icelog.api.http import ascii_int
from icelog.api.publishing import LogAccess
from icelog.api.services import Services
from icelog.api.settings import Settings
from icelog.projections.as_of import MAX_PAGE_SIZE
from icelog.projections.audit_chain import GENESIS, LINK_HEX_DIGITS, AuditChain
from icelog.publishers.cloud_events import to_cloud_event, to_json
from icelog.publishers.context import ContextResolver

MAX_LOG_POSITION = 2**63 - 1


def add_commands(sub: Any) -> None:
    """The commands, on the `icelog` parser's subcommands."""
    events = sub.add_parser("events", help="read the event log")
    events_sub = events.add_subparsers(dest="events_command", required=True)
    tail = events_sub.add_parser("tail", help="print the latest events (follow with -f)")
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    tail.add_argument("-n", "--lines", type=int, default=20, help="how many to start with")
    tail.add_argument("--after", type=int, default=None, help="start after this position")
    tail.add_argument("--type", default=None, help="only types containing this text")
    tail.add_argument("--json", action="store_true", help="whole CloudEvents as JSON lines")
    tail.set_defaults(run=events_tail)
    audit = sub.add_parser("audit", help="tamper evidence: the hash chain over the log")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    chain = audit_sub.add_parser("chain", help="chain the new events now")
    chain.add_argument("--anchor", action="store_true", help="also record the head as an event")
    chain.set_defaults(run=audit_chain)
    verify = audit_sub.add_parser("verify", help="recompute the chain; exit 1 if tampered")
    verify.add_argument(
        "--expect",
        type=expected_head,
        default=None,
        metavar="POSITION:LINK",
        help="a head held outside the catalog",
    )
    verify.set_defaults(run=audit_verify)
    export = audit_sub.add_parser("export-jsonl", help="a range of the log with chain links")
    export.add_argument("--after", type=int, default=0, help="start after this position")
    export.add_argument("--until", type=int, default=None, help="last position to export")
    export.add_argument("--out", default=None, help="file to write (default: stdout)")
    export.set_defaults(run=audit_export)
    iceberg = audit_sub.add_parser(
        "export", help="append the event log to an Iceberg table through the catalog"
    )
    iceberg.add_argument("--uri", default="http://127.0.0.1:8181/catalog", help="catalog URI")
    iceberg.add_argument("--warehouse", default="default", help="warehouse name")
    iceberg.add_argument("--table", default="audit.events", help="namespace.table")
    iceberg.set_defaults(run=audit_export_iceberg)
    catalog = sub.add_parser("catalog", help="the catalog's state from the log")
    catalog_sub = catalog.add_subparsers(dest="catalog_command", required=True)
    at = catalog_sub.add_parser("at", help="the catalog as of a log position or a time")
    at.add_argument("when", help="a log position (e.g. 1200) or an ISO-8601 time")
    at.add_argument("--warehouse-id", default=None, help="only this warehouse")
    at.add_argument(
        "--page-size",
        type=int,
        choices=range(1, MAX_PAGE_SIZE + 1),
        default=MAX_PAGE_SIZE,
        metavar=f"1..{MAX_PAGE_SIZE}",
        help="objects read per page (the output is one document either way)",
    )
    at.set_defaults(run=catalog_at)


def events_tail(args: argparse.Namespace, settings: Settings) -> int:
    """Print the log as CloudEvents, one line each (or whole JSON with --json)."""
    services = Services.build(settings)
    log = LogAccess(services)
    resolver = ContextResolver(log.load_at)
    position = max(0, log.head() - args.lines) if args.after is None else args.after
    try:
        while True:
            batch = log.read(position, 500)
            for item in batch:
                position = item.position
                context = resolver.resolve(item.event)
                cloud = to_cloud_event(
                    item.event,
                    topic=item.topic,
                    position=item.position,
                    context=context,
                    source=settings.publish.source,
                )
                if args.type and args.type not in cloud.get_type():
                    continue
                if args.json:
                    print(to_json(cloud).decode(), flush=True)
                else:
                    time_ = cloud.get_time()
                    warehouse = resolver.warehouse_name(context.warehouse_id)
                    print(
                        f"{item.position:>8}  {time_.isoformat() if time_ else '-'}  "
                        f"{cloud.get_type().removeprefix('io.icelog.'):<40} "
                        f"{warehouse or '-':<12} {cloud.get_subject() or '-'}  "
                        f"{cloud.get_extension('actor') or '-'}",
                        flush=True,
                    )
            if not batch:
                if not args.follow:
                    return 0
                time.sleep(0.5)
    except (KeyboardInterrupt, BrokenPipeError):
        return 0
    finally:
        services.close()


def audit_chain(args: argparse.Namespace, settings: Settings) -> int:
    """Chain the events not chained yet (and, with --anchor, record the head)."""
    with closing(Services.build(settings)) as services:
        chained, position, link = Chainer(services).round(anchor=args.anchor)
        print(f"chained {chained} event(s); head {position}:{link}")
        return 0


def audit_verify(args: argparse.Namespace, settings: Settings) -> int:
    """Recompute the chain from the stored events; exit 1 at the first broken link."""
    with closing(Services.build(settings)) as services:
        chain = AuditChain(services.catalog.app.recorder)
        verdict = chain.verify()
        problems = []
        if verdict.broken_at is not None:
            problems.append(f"broken link at position {verdict.broken_at}: {verdict.reason}")
        # Heads recorded in the log (and published) must still match the chain.
        for position, link in recorded_heads(services):
            if position <= verdict.head_position and chain.link_at(position) != link:
                problems.append(f"recorded head {position}:{link} no longer matches the chain")
        if args.expect is not None:
            expected, link = args.expect
            # Position 0 is the head of an empty log: the genesis link, before any event.
            held = GENESIS.hex() if expected == 0 else chain.link_at(expected)
            if held != link:
                problems.append(f"the chain does not contain the expected head {expected}:{link}")
        print(
            f"checked {verdict.checked} event(s); chain head "
            f"{verdict.head_position}:{verdict.head_link}"
        )
        for problem in problems:
            print(f"TAMPERED: {problem}")
        return 1 if problems else 0


def expected_head(text: str) -> tuple[int, str]:
    """`--expect POSITION:LINK`: a log position and the chain's link there, as `icelog audit
    chain` prints it. A typo is a usage error (exit 2), never a TAMPERED verdict."""
    position_text, colon, link = text.partition(":")
    position = ascii_int(position_text)
    hex_only = all(c in string.hexdigits for c in link)
    # A log position is a BIGINT: a larger one is a typo, not a head to look for (the
    # database driver would refuse it with a traceback).
    too_far = position is not None and position > MAX_LOG_POSITION
    if not colon or position is None or too_far or len(link) != LINK_HEX_DIGITS or not hex_only:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not POSITION:LINK (a log position, a colon, then the "
            f"{LINK_HEX_DIGITS} hex digits of the chain's link there)"
        )
    return position, link.lower()


def audit_export(args: argparse.Namespace, settings: Settings) -> int:
    """JSON Lines of a range of the log with its chain links (verify: scripts/verify_export.py)."""
    with closing(Services.build(settings)) as services:
        chain = AuditChain(services.catalog.app.recorder)
        chain.extend()
        out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout  # noqa: SIM115
        try:
            for line in chain.export_lines(args.after, args.until):
                out.write(line + "\n")
        except ValueError as exc:
            print(f"icelog: {exc}", file=sys.stderr)
            return 2
        finally:
            if out is not sys.stdout:
                out.close()
        return 0


def audit_export_iceberg(args: argparse.Namespace, settings: Settings) -> int:
    """The event log into an Iceberg table, through a running catalog (incremental)."""
    try:
        from icelog.api.audit_export import export_events  # noqa: PLC0415 - optional extra
    except ImportError:
        print(
            "icelog: audit export needs PyIceberg: pip install 'icelog[audit-export]'",
            file=sys.stderr,
        )
        return 2
    with closing(Services.build(settings)) as services:
        indexer = Indexer(services)
        indexer.index.ensure_schema()
        indexer.catch_up()
        appended, position = export_events(indexer.index, args.uri, args.warehouse, args.table)
        print(f"appended {appended} event(s) to {args.table}; exported up to position {position}")
        return 0


def catalog_at(args: argparse.Namespace, settings: Settings) -> int:
    """Print the catalog as of a log position or a time as one JSON document, written
    page by page (only one page in memory)."""
    try:
        warehouse = str(UUID(args.warehouse_id)) if args.warehouse_id else None
    except ValueError:
        print("icelog: --warehouse-id must be a UUID", file=sys.stderr)
        return 2
    position, time_us = ascii_int(args.when), None
    if position is None:
        try:
            moment = datetime.fromisoformat(args.when)
        except ValueError:
            print("icelog: give a log position or an ISO-8601 time", file=sys.stderr)
            return 2
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        position, time_us = None, int(moment.timestamp() * 1_000_000)
    ask = AsOfRequest(position, time_us, warehouse, page_size=args.page_size)
    with closing(Services.build(settings)) as services:
        indexer = Indexer(services)
        indexer.ensure_schema()
        for piece in catalog_document(indexer, ask):
            sys.stdout.write(piece)
        return 0

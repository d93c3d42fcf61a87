"""The `icelog` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import string
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
import uvicorn

from icelog.api import cli_browse
from icelog.api.app import create_app, freeze_startup_heap
from icelog.api.audit import Chainer, recorded_heads
from icelog.api.clients import (
    ClientPackageMissing,
    duckdb_load_statements,
    overview,
    spark_runtime_jar,
)
from icelog.api.database_check import describe_connection_error, probe
from icelog.api.dev_idp import command as dev_idp
from icelog.api.event_log import AsOfRequest, Indexer, catalog_document
from icelog.api.http import ascii_int
from icelog.api.listen import (
    CannotListen,
    address_text,
    bound_port,
    is_loopback,
    listening_sockets,
)
from icelog.api.logs import configure_logging, uvicorn_log_options
from icelog.api.publishing import LogAccess, build_relay, make_sink
from icelog.api.services import DEFAULT_WAREHOUSE_NAME, Services, open_catalog
from icelog.api.settings import MAX_PORT, PREFIX, Settings, SettingsError
from icelog.projections import maintenance
from icelog.projections.as_of import MAX_PAGE_SIZE
from icelog.projections.audit_chain import GENESIS, LINK_HEX_DIGITS, AuditChain
from icelog.projections.migrations import LATEST as LATEST_SCHEMA
from icelog.projections.migrations import MigrationBusyError, SchemaError
from icelog.projections.schema import READ_MODEL_TABLES
from icelog.projections.secrets import SecretStore, SecretUnreadable
from icelog.projections.sql import DatabaseUnavailableError
from icelog.publishers.cloud_events import to_cloud_event, to_json
from icelog.publishers.context import ContextResolver
from icelog.publishers.sinks import SinkConfigError


def unauthenticated_refusal(settings: Settings, host: str) -> str | None:
    """Why the server must not listen on `host`: without an identity provider every caller
    may do everything, which is only safe where nobody else can connect."""
    if settings.auth.enabled or settings.auth.allow_unauthenticated or is_loopback(host):
        return None
    return (
        f"refusing to listen on {host} without authentication: set "
        "ICELOG_OPENID_PROVIDER_URI (docs/auth.md), or ICELOG_ALLOW_UNAUTHENTICATED=true to "
        "let anyone who can reach the port do everything"
    )


def open_mode_warning(host: str) -> str:
    """The start-up warning without an identity provider: loopback-only is a bind check,
    not authentication."""
    return (
        "WARNING: authentication is OFF (no ICELOG_OPENID_PROVIDER_URI): every caller may do "
        f"everything (allow-all), listening on {host}. Listening on loopback keeps out only "
        "other machines: any process on this host can call icelog, and a reverse proxy, "
        "tunnel or port forward on this host (nginx, ssh -L, kubectl port-forward, a "
        "sidecar) hands that right to whoever reaches it. Set ICELOG_OPENID_PROVIDER_URI "
        "before exposing icelog in any way (docs/auth.md)."
    )


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    refusal = unauthenticated_refusal(settings, host)
    if refusal is not None:
        print(f"icelog: {refusal}", file=sys.stderr)
        return 2
    # The port first: nothing is announced (or migrated) for a server that cannot listen.
    try:
        sockets = listening_sockets(host, port)
    except CannotListen as exc:
        print(f"icelog: {exc}", file=sys.stderr)
        return 1
    port = bound_port(sockets, port)
    if not settings.auth.enabled:
        print(open_mode_warning(host), file=sys.stderr, flush=True)
    # Prepare the schema and the embedded defaults once, before any worker starts. SQLite:
    # migrated here (one command starts the catalog). PostgreSQL: an empty database is
    # initialised, an existing one is only ever upgraded by `icelog migrate`.
    try:
        services = Services.build(settings)
    except SchemaError as exc:
        print(f"icelog: {exc}", file=sys.stderr)
        return 2
    except MigrationBusyError as exc:
        print(f"icelog: could not prepare the schema: {exc}", file=sys.stderr)
        return 1
    for step in services.schema_applied:
        if step.does_work_on(settings.backend):
            print(f"schema: applied step {step.version} ({step.description})", flush=True)
    services.ensure_defaults()
    if args.workers > 1:
        services.close()
        _announce(settings, host, port, f", {args.workers} workers")
        sys.stderr.flush()
        os.execv(  # noqa: S606 - a fixed argument list, no shell
            sys.executable,
            [
                sys.executable,
                "-m",
                "icelog.api.supervise",
                host,
                str(port),
                str(args.workers),
                settings.log_level,
                settings.log_format,
                ",".join(str(sock.fileno()) for sock in sockets),
            ],
        )
    # uvicorn finishes in-flight requests on SIGTERM, then re-raises the signal it caught;
    # with the default handler that would kill the process before services.close().
    signal.signal(signal.SIGTERM, lambda *_: None)
    app = create_app(settings, services)
    freeze_startup_heap()
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, **uvicorn_options(settings)))
    _announce(settings, host, port)
    try:
        server.run(sockets=sockets)
    except KeyboardInterrupt:  # SIGINT, re-raised by uvicorn once it has shut down
        pass
    finally:
        for sock in sockets:
            sock.close()
        services.close()
    return 0 if server.started else 1


def _announce(settings: Settings, host: str, port: int, workers: str = "") -> None:
    """The banner, once the port is ours."""
    base = f"http://{address_text(host, port)}"
    print(f"icelog serving {base}/catalog ({settings.backend}{workers})", flush=True)
    print(f"console: open {base}/ui", flush=True)


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """How `icelog serve` runs uvicorn (besides the app, host and port). X-Forwarded-For is
    believed only from ICELOG_FORWARDED_ALLOW_IPS: uvicorn's default trusts it from
    loopback, and anything that reaches the server through a local port (ssh -L, kubectl
    port-forward, a sidecar) could then name any client address it liked — resetting the
    per-address rate limits (token endpoint, console login) with every request."""
    proxies = settings.forwarded_allow_ips
    return {
        "log_level": settings.log_level,
        "http": "httptools",
        "timeout_graceful_shutdown": 10,
        "proxy_headers": bool(proxies),
        "forwarded_allow_ips": list(proxies),
        **uvicorn_log_options(),
    }


def _migrate(_args: argparse.Namespace, settings: Settings) -> int:
    """Create or upgrade the schema (safe to repeat, and to run while servers serve)."""
    try:
        catalog, applied = open_catalog(settings, upgrade_schema=True)
    except SchemaError as exc:
        print(f"icelog: {exc}", file=sys.stderr)
        return 2
    except MigrationBusyError as exc:
        print(f"icelog: {exc}", file=sys.stderr)
        return 1
    catalog.close()
    for step in applied:
        if step.does_work_on(settings.backend):
            print(f"applied step {step.version}: {step.description}")
    state = f"applied {len(applied)} step(s)" if applied else "already up to date"
    print(f"schema at version {LATEST_SCHEMA} ({settings.backend}): {state}")
    return 0


def _tasks_run(args: argparse.Namespace, settings: Settings) -> int:
    """A worker process without the HTTP server: claims and runs due tasks."""
    services = Services.build(settings)
    tasks = services.tasks
    if args.once:
        done = tasks.run_until_idle()
        print(f"ran {done} task(s)", flush=True)
        services.close()
        return 0
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    tasks.threads = max(1, settings.task_workers)
    tasks.start()
    print(f"icelog task workers: {tasks.threads} ({settings.backend})", flush=True)
    stop.wait()
    services.close()  # finishes the tasks in hand
    return 0


def _publish(args: argparse.Namespace, settings: Settings) -> int:
    """Follow the log and publish CloudEvents to one sink until SIGTERM/SIGINT."""
    try:  # the sink's settings first: a configuration error is said before anything else
        sink = make_sink(args.sink, settings.publish)
    except ValueError as exc:
        print(f"icelog: configuration error: {exc}", file=sys.stderr)
        return 2
    refused = _database_refusal(settings, creates=False)
    if refused is not None:
        return refused
    services = Services.build(settings)
    relay = build_relay(services, args.sink, sink)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await relay.run(stop)

    print(f"icelog publishing to {relay.sink.name} ({settings.backend})", flush=True)
    try:
        asyncio.run(run())
    except SinkConfigError as exc:
        print(f"icelog: {exc}", file=sys.stderr)
        return 2
    finally:
        services.close()
    return 0


def _events_tail(args: argparse.Namespace, settings: Settings) -> int:
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


def _audit_chain(args: argparse.Namespace, settings: Settings) -> int:
    """Chain the events not chained yet (and, with --anchor, record the head)."""
    services = Services.build(settings)
    try:
        chained, position, link = Chainer(services).round(anchor=args.anchor)
        print(f"chained {chained} event(s); head {position}:{link}")
        return 0
    finally:
        services.close()


def _audit_verify(args: argparse.Namespace, settings: Settings) -> int:
    """Recompute the chain from the stored events; exit 1 at the first broken link."""
    services = Services.build(settings)
    try:
        chain = AuditChain(services.catalog.recorder)
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
    finally:
        services.close()


def port_number(text: str) -> int:
    """`--port`: 0 to 65535. The socket layer takes a larger number modulo 65536 (70000
    would listen, and be announced, on 4464)."""
    number = ascii_int(text)
    if number is None or number > MAX_PORT:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to {MAX_PORT})")
    return number


def worker_count(text: str) -> int:
    """`--workers`: at least 1, as ICELOG_SERVE_WORKERS (0 or less ran one, silently)."""
    number = ascii_int(text)
    if number is None or number < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers (1 or more)")
    return number


MAX_LOG_POSITION = 2**63 - 1


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


def _audit_export(args: argparse.Namespace, settings: Settings) -> int:
    """JSON Lines of a range of the log with its chain links (verify: scripts/verify_export.py)."""
    services = Services.build(settings)
    try:
        chain = AuditChain(services.catalog.recorder)
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
    finally:
        services.close()


def _catalog_at(args: argparse.Namespace, settings: Settings) -> int:
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
    services = Services.build(settings)
    try:
        indexer = Indexer(services)
        indexer.ensure_schema()
        for piece in catalog_document(indexer, ask):
            sys.stdout.write(piece)
        return 0
    finally:
        services.close()


def _metadata_verify(args: argparse.Namespace, settings: Settings) -> int:
    """Each live table's and view's metadata file against what its events fold to."""
    services = Services.build(settings)
    try:
        warehouse = UUID(args.warehouse_id) if args.warehouse_id else None
        results = services.catalog.verify_metadata(warehouse)
        bad = [r for r in results if r["status"] != "ok"]
        for r in results if args.verbose else bad:
            detail = f"  ({r['detail']})" if "detail" in r else ""
            print(f"{r['status']:<10} {r['kind']:<5} {r['name']}  {r['metadata-location']}{detail}")
        print(f"{len(results)} table(s) and view(s) checked; {len(bad)} problem(s)")
        return 1 if bad else 0
    finally:
        services.close()


def _projections_rebuild(args: argparse.Namespace, settings: Settings) -> int:
    """Rebuild read-model tables from the log, then swap them in (one transaction)."""
    services = Services.build(settings)
    progress = maintenance.ProgressLine(sys.stderr)
    try:
        app = services.catalog
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


def _projections_verify(args: argparse.Namespace, settings: Settings) -> int:
    """Fold the log into scratch tables and compare with the live read model."""
    services = Services.build(settings)
    progress = maintenance.ProgressLine(sys.stderr)
    try:
        app = services.catalog
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


def _audit_export_iceberg(args: argparse.Namespace, settings: Settings) -> int:
    """The event log into an Iceberg table, through a running catalog (incremental)."""
    try:
        from icelog.api.audit_export import export_events  # noqa: PLC0415 - optional extra
    except ImportError:
        print(
            "icelog: audit export needs PyIceberg: pip install 'icelog[audit-export]'",
            file=sys.stderr,
        )
        return 2
    services = Services.build(settings)
    try:
        indexer = Indexer(services)
        indexer.index.ensure_schema()
        indexer.catch_up()
        appended, position = export_events(indexer.index, args.uri, args.warehouse, args.table)
        print(f"appended {appended} event(s) to {args.table}; exported up to position {position}")
        return 0
    finally:
        services.close()


def _secrets_rotate(_args: argparse.Namespace, settings: Settings) -> int:
    """Re-encrypt every storage credential under ICELOG_SECRETS_KEY (old keys from
    ICELOG_SECRETS_OLD_KEYS decrypt what is not yet under it)."""
    services = Services.build(settings)
    try:
        store = services.catalog.secrets
        assert isinstance(store, SecretStore)
        changed = store.rotate()
    except SecretUnreadable as exc:
        print(f"icelog: {exc}; add the key it was sealed with to {PREFIX}SECRETS_OLD_KEYS")
        return 1
    finally:
        services.close()
    print(f"re-encrypted {changed} storage credential(s) under the current key")
    return 0


def _clients_spark_jar(_args: argparse.Namespace, _settings: Settings) -> int:
    try:
        print(spark_runtime_jar())
    except ClientPackageMissing as exc:
        print(f"icelog: install {exc} (pip install 'icelog[clients]')", file=sys.stderr)
        return 2
    return 0


def _clients_duckdb_load(_args: argparse.Namespace, _settings: Settings) -> int:
    try:
        statements = duckdb_load_statements()
    except ClientPackageMissing as exc:
        print(f"icelog: install {exc} (pip install 'icelog[clients]')", file=sys.stderr)
        return 2
    print(";\n".join(statements) + ";")
    return 0


def _dev_idp(args: argparse.Namespace, _settings: Settings) -> int:
    return dev_idp.run(args)


def _clients_overview(_args: argparse.Namespace, settings: Settings) -> int:
    """Every client at once: the catalog URI to give them, and where each one's parts are."""
    host = settings.host if settings.host not in ("0.0.0.0", "::", "") else "127.0.0.1"  # noqa: S104
    uri = f"http://{address_text(host, settings.port)}/catalog"
    print("\n".join(overview(uri, DEFAULT_WAREHOUSE_NAME)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="icelog", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the catalog server")
    serve.add_argument("--host", default=None, help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=port_number, default=None, help="listen port (default 8181)")
    serve.add_argument("--workers", type=worker_count, default=1, help="worker processes")
    serve.set_defaults(run=_serve)
    migrate = sub.add_parser("migrate", help="create or upgrade the database schema")
    migrate.set_defaults(run=_migrate)
    tasks = sub.add_parser("tasks", help="background tasks (expiration, purge)")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True)
    run = tasks_sub.add_parser(
        "run", help="run task workers without the HTTP server (ICELOG_TASK_WORKERS threads)"
    )
    run.add_argument("--once", action="store_true", help="run the due tasks, then exit")
    run.set_defaults(run=_tasks_run)
    publish = sub.add_parser("publish", help="publish the log as CloudEvents (until stopped)")
    publish.add_argument("sink", choices=["nats", "kafka"])
    publish.set_defaults(run=_publish)
    events = sub.add_parser("events", help="read the event log")
    events_sub = events.add_subparsers(dest="events_command", required=True)
    tail = events_sub.add_parser("tail", help="print the latest events (follow with -f)")
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    tail.add_argument("-n", "--lines", type=int, default=20, help="how many to start with")
    tail.add_argument("--after", type=int, default=None, help="start after this position")
    tail.add_argument("--type", default=None, help="only types containing this text")
    tail.add_argument("--json", action="store_true", help="whole CloudEvents as JSON lines")
    tail.set_defaults(run=_events_tail)
    audit = sub.add_parser("audit", help="tamper evidence: the hash chain over the log")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    chain = audit_sub.add_parser("chain", help="chain the new events now")
    chain.add_argument("--anchor", action="store_true", help="also record the head as an event")
    chain.set_defaults(run=_audit_chain)
    verify = audit_sub.add_parser("verify", help="recompute the chain; exit 1 if tampered")
    verify.add_argument(
        "--expect",
        type=expected_head,
        default=None,
        metavar="POSITION:LINK",
        help="a head held outside the catalog",
    )
    verify.set_defaults(run=_audit_verify)
    export = audit_sub.add_parser("export-jsonl", help="a range of the log with chain links")
    export.add_argument("--after", type=int, default=0, help="start after this position")
    export.add_argument("--until", type=int, default=None, help="last position to export")
    export.add_argument("--out", default=None, help="file to write (default: stdout)")
    export.set_defaults(run=_audit_export)
    iceberg = audit_sub.add_parser(
        "export", help="append the event log to an Iceberg table through the catalog"
    )
    iceberg.add_argument("--uri", default="http://127.0.0.1:8181/catalog", help="catalog URI")
    iceberg.add_argument("--warehouse", default="default", help="warehouse name")
    iceberg.add_argument("--table", default="audit.events", help="namespace.table")
    iceberg.set_defaults(run=_audit_export_iceberg)
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
    at.set_defaults(run=_catalog_at)
    cli_browse.add_commands(sub)  # namespaces, tables, history
    metadata = sub.add_parser("metadata", help="metadata files against the log")
    metadata_sub = metadata.add_subparsers(dest="metadata_command", required=True)
    mverify = metadata_sub.add_parser(
        "verify", help="fold each table's events and compare with its metadata file"
    )
    mverify.add_argument("--warehouse-id", default=None)
    mverify.add_argument("-v", "--verbose", action="store_true", help="list every table")
    mverify.set_defaults(run=_metadata_verify)
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
    prebuild.set_defaults(run=_projections_rebuild)
    pverify = projections_sub.add_parser(
        "verify", help="fold the log into scratch tables and compare; exit 1 on a difference"
    )
    pverify.add_argument("--show", type=int, default=20, help="differences to print")
    pverify.set_defaults(run=_projections_verify)
    secrets = sub.add_parser("secrets", help="storage credentials, encrypted at rest")
    secrets_sub = secrets.add_subparsers(dest="secrets_command", required=True)
    rotate = secrets_sub.add_parser(
        "rotate", help="re-encrypt every credential under ICELOG_SECRETS_KEY"
    )
    rotate.set_defaults(run=_secrets_rotate)
    clients = sub.add_parser(
        "clients",
        help="where the clients are (alone), or what Spark and DuckDB need, offline",
        description="Alone: the catalog URI, and where PyIceberg, Spark's Iceberg runtime jar "
        "and DuckDB's extensions are installed.",
    )
    clients.set_defaults(run=_clients_overview)
    clients_sub = clients.add_subparsers(dest="clients_command")
    jar = clients_sub.add_parser(
        "spark-jar", help="path of the Iceberg runtime jar for spark.jars (no Maven needed)"
    )
    jar.set_defaults(run=_clients_spark_jar)
    load = clients_sub.add_parser(
        "duckdb-load", help="DuckDB LOAD statements for the iceberg extension (no download)"
    )
    load.set_defaults(run=_clients_duckdb_load)
    idp = sub.add_parser(
        "dev-idp", help="a local OpenID provider for trying auth (development only)"
    )
    dev_idp.add_arguments(idp)
    idp.set_defaults(run=_dev_idp)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"icelog: configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level)
    if args.run is _serve:
        # The pools of each worker, its share of ICELOG_PG_MAX_CONNECTIONS: a budget the
        # workers cannot share is a configuration mistake, said before any connection.
        try:
            settings = settings.for_workers(args.workers)
        except SettingsError as exc:
            print(f"icelog: configuration error: {exc}", file=sys.stderr)
            return 2
    # Only `serve` and `migrate` create a catalog; every other command reads one, and must
    # not leave an empty catalog behind where there was none. `publish` says a mistake in
    # its sink's settings first, then asks itself.
    offline = (_clients_overview, _clients_spark_jar, _clients_duckdb_load, _dev_idp)
    if args.run not in (*offline, _publish):
        refused = _database_refusal(settings, creates=args.run in (_serve, _migrate))
        if refused is not None:
            return refused
    try:
        code: int = args.run(args, settings)
    except SchemaError as exc:  # any command on a database this version cannot use
        print(f"icelog: {exc}", file=sys.stderr)
        return 2
    except DatabaseUnavailableError as exc:  # reachable a moment ago, gone since
        print(f"icelog: {_unavailable_text(settings, exc)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`icelog catalog at … | head`): not an error of ours.
        _quiet_stdout()
        return 0
    return code


def _database_refusal(settings: Settings, *, creates: bool) -> int | None:
    """The exit status when the command cannot go on with the configured database (after
    saying why on stderr): 1 when it cannot be used (unreachable, missing, refused us),
    2 when it holds no catalog and the command would not create one."""
    found = probe(settings, creates=creates)
    if found.problem is not None:
        print(f"icelog: {found.problem}", file=sys.stderr)
        return 1
    if not creates and not found.catalog_found:
        return _no_catalog(settings)
    return None


def _unavailable_text(settings: Settings, exc: BaseException) -> str:
    """What became of the database: asked again now (the pool's timeout hides the cause),
    else the connection error underneath."""
    now = probe(settings, creates=True).problem
    if now is not None:
        return now
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, psycopg.OperationalError):
            return describe_connection_error(settings, seen)
        seen = seen.__cause__ or seen.__context__
    return f"{exc} ({settings.database_url_redacted or settings.sqlite_path})"


def _no_catalog(settings: Settings) -> int:
    where = settings.database_url_redacted or str(settings.sqlite_path)
    print(
        f"icelog: no catalog at {where} (set ICELOG_DATA_DIR or ICELOG_DATABASE_URL)",
        file=sys.stderr,
    )
    return 2


def _quiet_stdout() -> None:
    """After a broken pipe, send what is left of stdout nowhere, so that the interpreter's
    final flush does not print another traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())

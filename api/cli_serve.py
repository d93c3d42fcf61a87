"""`icelog serve`, `migrate`, `tasks run` and `publish`: the catalog's processes (the
server, its task workers, a publisher) and the schema they run on."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from typing import Any

import uvicorn

from icelog.api.app import create_app, freeze_startup_heap
from icelog.api.database_check import database_refusal
from icelog.api.http import ascii_int
from icelog.api.listen import (
    CannotListen,
    address_text,
    bound_port,
    is_loopback,
    listening_sockets,
)
from icelog.api.logs import uvicorn_log_options
from icelog.api.publishing import build_relay, make_sink
from icelog.api.services import Services, open_application
from icelog.api.settings import MAX_PORT, Settings
from icelog.projections.migrations import LATEST as LATEST_SCHEMA
from icelog.projections.migrations import MigrationBusyError
from icelog.publishers.sinks import SinkConfigError


def add_commands(sub: Any) -> None:
    """The commands, on the `icelog` parser's subcommands."""
    parser = sub.add_parser("serve", help="run the catalog server")
    parser.add_argument("--host", default=None, help="listen address (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=None, help="listen port (default 8181)")
    parser.add_argument("--workers", type=worker_count, default=1, help="worker processes")
    parser.set_defaults(run=serve)
    sub.add_parser("migrate", help="create or upgrade the database schema").set_defaults(
        run=migrate
    )
    tasks = sub.add_parser("tasks", help="background tasks (expiration, purge)")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True)
    run = tasks_sub.add_parser(
        "run", help="run task workers without the HTTP server (ICELOG_TASK_WORKERS threads)"
    )
    run.add_argument("--once", action="store_true", help="run the due tasks, then exit")
    run.set_defaults(run=tasks_run)
    parser = sub.add_parser("publish", help="publish the log as CloudEvents (until stopped)")
    parser.add_argument("sink", choices=["nats", "kafka"])
    parser.set_defaults(run=publish)


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


def serve(args: argparse.Namespace, settings: Settings) -> int:
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
    # A schema this version cannot use is said by `main`, as for every command.
    try:
        services = Services.build(settings)
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


def migrate(_args: argparse.Namespace, settings: Settings) -> int:
    """Create or upgrade the schema (safe to repeat, and to run while servers serve)."""
    try:  # a schema this version cannot use is said by `main`, as for every command
        app, applied = open_application(settings, upgrade_schema=True)
    except MigrationBusyError as exc:
        print(f"icelog: {exc}", file=sys.stderr)
        return 1
    app.close()
    for step in applied:
        if step.does_work_on(settings.backend):
            print(f"applied step {step.version}: {step.description}")
    state = f"applied {len(applied)} step(s)" if applied else "already up to date"
    print(f"schema at version {LATEST_SCHEMA} ({settings.backend}): {state}")
    return 0


def tasks_run(args: argparse.Namespace, settings: Settings) -> int:
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


def publish(args: argparse.Namespace, settings: Settings) -> int:
    """Follow the log and publish CloudEvents to one sink until SIGTERM/SIGINT."""
    try:  # the sink's settings first: a configuration error is said before anything else
        sink = make_sink(args.sink, settings.publish)
    except ValueError as exc:
        print(f"icelog: configuration error: {exc}", file=sys.stderr)
        return 2
    refused = database_refusal(settings, creates=False)
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

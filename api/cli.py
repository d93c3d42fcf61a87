"""The `icelog` command line."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

import uvicorn

from api.app import create_app
from api.services import Services
from api.settings import Settings, SettingsError


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    # Prepare the schema and the embedded defaults once, before any worker starts.
    services = Services.build(settings)
    services.ensure_defaults()
    if args.workers > 1:
        services.close()
        uvicorn.run(
            "api.app:create_app_from_env",
            factory=True,
            host=host,
            port=port,
            workers=args.workers,
            log_level=settings.log_level,
        )
        return 0
    print(f"icelog serving http://{host}:{port}/catalog ({settings.backend})", flush=True)
    uvicorn.run(
        create_app(settings, services),
        host=host,
        port=port,
        log_level=settings.log_level,
        timeout_graceful_shutdown=10,
    )
    services.close()
    return 0


def _migrate(_args: argparse.Namespace, settings: Settings) -> int:
    services = Services.build(settings)  # constructing the application creates the schema
    services.close()
    print(f"schema ready ({settings.backend})")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="icelog", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the catalog server")
    serve.add_argument("--host", default=None, help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="listen port (default 8181)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes")
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"icelog: configuration error: {exc}", file=sys.stderr)
        return 2
    code: int = args.run(args, settings)
    return code


if __name__ == "__main__":
    sys.exit(main())

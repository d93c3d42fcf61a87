"""The `icelog` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys

import psycopg

from icelog.api import cli_browse, cli_clients, cli_log, cli_serve, cli_upkeep
from icelog.api.cli_serve import open_mode_warning, unauthenticated_refusal, uvicorn_options
from icelog.api.database_check import database_refusal, describe_connection_error, probe
from icelog.api.logs import configure_logging
from icelog.api.settings import Settings, SettingsError
from icelog.projections.migrations import SchemaError
from icelog.projections.sql import DatabaseUnavailableError

# Re-exported: tests and tools import these from the command line's module.
__all__ = ["main", "open_mode_warning", "unauthenticated_refusal", "uvicorn_options"]

# The commands that create a catalog where there is none: every other one reads one, and
# must not leave an empty catalog behind. The database is checked before every command but
# those that never open it and `publish`, which says a mistake in its sink's settings
# first, then checks itself.
CREATING = ("serve", "migrate")
UNCHECKED = ("clients", "dev-idp", "publish")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="icelog", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    cli_serve.add_commands(sub)  # serve, migrate, tasks, publish
    cli_log.add_commands(sub)  # events, audit, catalog
    cli_browse.add_commands(sub)  # namespaces, tables, history
    cli_upkeep.add_commands(sub)  # metadata, projections, secrets
    cli_clients.add_commands(sub)  # clients, dev-idp
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"icelog: configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level)
    if args.command == "serve":
        # The pools of each worker, its share of ICELOG_PG_MAX_CONNECTIONS: a budget the
        # workers cannot share is a configuration mistake, said before any connection.
        try:
            settings = settings.for_workers(args.workers)
        except SettingsError as exc:
            print(f"icelog: configuration error: {exc}", file=sys.stderr)
            return 2
    if args.command not in UNCHECKED:
        refused = database_refusal(settings, creates=args.command in CREATING)
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


def _quiet_stdout() -> None:
    """After a broken pipe, send what is left of stdout nowhere, so that the interpreter's
    final flush does not print another traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())

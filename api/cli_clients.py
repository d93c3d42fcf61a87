"""`icelog clients` and `icelog dev-idp`: what the catalog's clients need (its URI, Spark's
Iceberg runtime jar, DuckDB's extensions), and a local identity provider for trying auth —
all offline, none of them opens the catalog's database."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from icelog.api.clients import (
    ClientPackageMissing,
    duckdb_load_statements,
    overview,
    spark_runtime_jar,
)
from icelog.api.dev_idp import command as dev_idp
from icelog.api.listen import address_text
from icelog.api.services import DEFAULT_WAREHOUSE_NAME
from icelog.api.settings import Settings


def add_commands(sub: Any) -> None:
    """The commands, on the `icelog` parser's subcommands."""
    clients = sub.add_parser(
        "clients",
        help="where the clients are (alone), or what Spark and DuckDB need, offline",
        description="Alone: the catalog URI, and where PyIceberg, Spark's Iceberg runtime jar "
        "and DuckDB's extensions are installed.",
    )
    clients.set_defaults(run=clients_overview)
    clients_sub = clients.add_subparsers(dest="clients_command")
    jar = clients_sub.add_parser(
        "spark-jar", help="path of the Iceberg runtime jar for spark.jars (no Maven needed)"
    )
    jar.set_defaults(run=clients_spark_jar)
    load = clients_sub.add_parser(
        "duckdb-load", help="DuckDB LOAD statements for the iceberg extension (no download)"
    )
    load.set_defaults(run=clients_duckdb_load)
    idp = sub.add_parser(
        "dev-idp", help="a local OpenID provider for trying auth (development only)"
    )
    dev_idp.add_arguments(idp)
    idp.set_defaults(run=run_dev_idp)


def clients_overview(_args: argparse.Namespace, settings: Settings) -> int:
    """Every client at once: the catalog URI to give them, and where each one's parts are."""
    host = settings.host if settings.host not in ("0.0.0.0", "::", "") else "127.0.0.1"  # noqa: S104
    uri = f"http://{address_text(host, settings.port)}/catalog"
    print("\n".join(overview(uri, DEFAULT_WAREHOUSE_NAME)))
    return 0


def _printed(lines: Callable[[], list[str]]) -> int:
    """What a client needs, printed; a missing client package is a usage error (exit 2)."""
    try:
        found = lines()
    except ClientPackageMissing as exc:
        print(f"icelog: install {exc} (pip install 'icelog[clients]')", file=sys.stderr)
        return 2
    print("\n".join(found))
    return 0


def clients_spark_jar(_args: argparse.Namespace, _settings: Settings) -> int:
    return _printed(lambda: [spark_runtime_jar()])


def clients_duckdb_load(_args: argparse.Namespace, _settings: Settings) -> int:
    return _printed(lambda: [";\n".join(duckdb_load_statements()) + ";"])


def run_dev_idp(args: argparse.Namespace, _settings: Settings) -> int:
    return dev_idp.run(args)

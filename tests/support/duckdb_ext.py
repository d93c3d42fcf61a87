"""DuckDB with the iceberg/httpfs/avro extensions loaded offline from their wheels."""

from __future__ import annotations

from typing import Any

from icelog.api.clients import duckdb_load_statements


def connect() -> Any:
    """An in-memory DuckDB connection with avro, httpfs and iceberg loaded (no network)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions=false")
    con.execute("SET autoload_known_extensions=false")
    for statement in duckdb_load_statements():
        con.execute(statement)
    return con

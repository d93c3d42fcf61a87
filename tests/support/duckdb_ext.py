"""DuckDB with the iceberg/httpfs/avro extensions loaded offline from their wheels."""

from __future__ import annotations

import glob
import importlib
import os
from typing import Any

_EXTENSIONS = ("avro", "httpfs", "iceberg")


def extension_path(name: str) -> str:
    module = importlib.import_module(f"duckdb_extension_{name}")
    assert module.__file__ is not None
    pattern = os.path.join(
        os.path.dirname(module.__file__), "extensions", "*", f"{name}.duckdb_extension"
    )
    matches = sorted(glob.glob(pattern))
    if not matches:
        raise FileNotFoundError(pattern)
    return matches[-1]


def connect() -> Any:
    """An in-memory DuckDB connection with avro, httpfs and iceberg loaded (no network)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions=false")
    con.execute("SET autoload_known_extensions=false")
    for name in _EXTENSIONS:
        con.execute(f"LOAD '{extension_path(name)}'")
    return con

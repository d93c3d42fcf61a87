"""What clients need to reach icelog without downloading anything at run time.

`icelog clients spark-jar` prints the path of the Iceberg Spark runtime jar shipped in the
PyPI package `snowpark-connect-deps-iceberg` (for `spark.jars` where Maven is out of
reach); `icelog clients duckdb-load` prints DuckDB `LOAD` statements for the iceberg, httpfs
and avro extensions shipped in their PyPI wheels (where DuckDB cannot download them). Both
come with `pip install 'icelog[clients]'`.
"""

from __future__ import annotations

import glob
import importlib
import os

SPARK_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
DUCKDB_EXTENSIONS = ("avro", "httpfs", "iceberg")


class ClientPackageMissing(Exception):
    """The optional client package is not installed (`pip install 'icelog[clients]'`)."""


def spark_runtime_jar() -> str:
    """The Iceberg 1.10.2 runtime jar for Spark 3.5 / Scala 2.12."""
    try:
        deps = importlib.import_module("snowpark_connect_deps_iceberg")
    except ImportError:
        raise ClientPackageMissing("snowpark-connect-deps-iceberg==1.0.2") from None
    return str(deps.get_jar_path(SPARK_RUNTIME_JAR))


def duckdb_extension(name: str) -> str:
    """The path of a DuckDB extension file shipped in the `duckdb-extension-<name>` wheel."""
    try:
        module = importlib.import_module(f"duckdb_extension_{name}")
    except ImportError:
        raise ClientPackageMissing(f"duckdb-extension-{name}==1.5.5") from None
    assert module.__file__ is not None
    pattern = os.path.join(
        os.path.dirname(module.__file__), "extensions", "*", f"{name}.duckdb_extension"
    )
    found = sorted(glob.glob(pattern))
    if not found:
        raise ClientPackageMissing(f"duckdb-extension-{name}==1.5.5 (no {pattern})")
    return found[-1]


def duckdb_load_statements() -> list[str]:
    """`LOAD '<path>'` for every extension the iceberg one needs, without downloads."""
    return [f"LOAD '{duckdb_extension(name)}'" for name in DUCKDB_EXTENSIONS]

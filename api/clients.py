"""What clients need to reach icelog without downloading anything at run time.

`icelog clients spark-jar` prints the path of the Iceberg Spark runtime jar shipped in the
PyPI package `snowpark-connect-deps-iceberg` (for `spark.jars` where Maven is out of
reach); `icelog clients duckdb-load` prints DuckDB `LOAD` statements for the iceberg, httpfs
and avro extensions shipped in their PyPI wheels (where DuckDB cannot download them). Both
come with `pip install 'icelog[clients]'`. `icelog clients` alone says all of it at once
(`overview`): the catalog URI, and each client with what is installed of it.
"""

from __future__ import annotations

import glob
import importlib
import importlib.metadata
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


INSTALL_HINT = "pip install 'icelog[clients]'"


def installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def overview(catalog_uri: str, warehouse: str) -> list[str]:
    """Where the clients are and how they connect: what `icelog clients` prints. A client
    that is not installed says how to install it (it is not an error)."""
    lines = [f'Iceberg REST catalog: {catalog_uri} (warehouse "{warehouse}")', ""]
    pyiceberg, core = installed_version("pyiceberg"), installed_version("pyiceberg-core")
    if pyiceberg is None:
        lines.append(f"PyIceberg: not installed ({INSTALL_HINT})")
    else:
        writes = f"pyiceberg-core {core}" if core else f"no pyiceberg-core: {INSTALL_HINT}"
        lines += [
            f"PyIceberg {pyiceberg} (partitioned writes: {writes})",
            f'  load_catalog("lake", type="rest", uri="{catalog_uri}", warehouse="{warehouse}")',
        ]
    lines.append("")
    pyspark = installed_version("pyspark")
    try:
        jar = spark_runtime_jar()
    except ClientPackageMissing as exc:
        jar = f"not installed: {exc} ({INSTALL_HINT})"
    lines += [
        f"Spark: pyspark {pyspark or f'not installed ({INSTALL_HINT})'}; the Iceberg runtime jar "
        "for spark.jars (icelog clients spark-jar):",
        f"  {jar}",
        "",
    ]
    duckdb = installed_version("duckdb")
    try:
        loads = [f"  {statement};" for statement in duckdb_load_statements()]
    except ClientPackageMissing as exc:
        loads = [f"  not installed: {exc} ({INSTALL_HINT})"]
    lines += [
        f"DuckDB {duckdb or f'not installed ({INSTALL_HINT})'}; its extensions from their wheels "
        "(icelog clients duckdb-load):",
        *loads,
    ]
    return lines

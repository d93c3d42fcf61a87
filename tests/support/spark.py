"""A local PySpark session with the Iceberg 1.10.2 runtime, and REST catalogs registered on it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from icelog.api.clients import spark_runtime_jar as runtime_jar

__all__ = ["build_spark_session", "register_rest_catalog", "runtime_jar"]

EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def build_spark_session(scratch: Path, app_name: str = "icelog-tests") -> Any:
    """Start (or reuse) the process-wide SparkSession: local[2], tiny shuffles, no UI."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    scratch.mkdir(parents=True, exist_ok=True)
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.jars", runtime_jar())
        .config("spark.sql.extensions", EXTENSIONS)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(scratch / "spark-warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={scratch}")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def register_rest_catalog(
    spark: Any, name: str, uri: str, warehouse: str = "default", token: str | None = None
) -> str:
    """Register an Iceberg REST catalog called ``name`` on a running SparkSession.

    Spark's CatalogManager reads ``spark.sql.catalog.<name>*`` when the catalog is first used,
    so catalogs can be added after the session started (one per test server).
    """
    prefix = f"spark.sql.catalog.{name}"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.type", "rest")
    spark.conf.set(f"{prefix}.uri", uri)
    spark.conf.set(f"{prefix}.warehouse", warehouse)
    spark.conf.set(f"{prefix}.cache-enabled", "false")
    if token:
        spark.conf.set(f"{prefix}.token", token)
    return name

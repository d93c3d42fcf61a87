"""Who changed a table last week? Spark SQL over icelog's exported audit table.

    .venv/bin/icelog audit export --uri http://127.0.0.1:8181/catalog --warehouse default
    .venv/bin/python examples/audit_who_changed.py sales.orders --days 7

`icelog audit export` appends the event log to the Iceberg table `audit.events` through the
catalog itself (again and again: each run appends only the new events). This job reads it
with Spark like any other table.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pyspark.sql import SparkSession

from icelog.api.clients import spark_runtime_jar

WHO_CHANGED = """
SELECT time, request_id, actor, type, data
FROM {catalog}.audit.events
WHERE subject = '{subject}'
  AND type LIKE 'io.icelog.table.%'
  AND time > current_timestamp() - INTERVAL {days} DAYS
ORDER BY position
"""


def who_changed(spark: Any, catalog: str, subject: str, days: int = 7) -> list[Any]:
    """Every change to table `subject` (`ns.table`) in the last `days` days, oldest first."""
    if "'" in subject:
        raise ValueError("a table identifier has no quotes")
    query = WHO_CHANGED.format(catalog=catalog, subject=subject, days=int(days))
    return list(spark.sql(query).collect())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", help="ns.table")
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--uri", default="http://127.0.0.1:8181/catalog")
    parser.add_argument("--warehouse", default="default")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", spark_runtime_jar())
        .config("spark.sql.catalog.icelog", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.icelog.type", "rest")
        .config("spark.sql.catalog.icelog.uri", args.uri)
        .config("spark.sql.catalog.icelog.warehouse", args.warehouse)
        .getOrCreate()
    )
    for row in who_changed(spark, "icelog", args.table, args.days):
        print(
            f"{row.time}  {row.type.removeprefix('io.icelog.'):<28} {row.actor}  {row.request_id}"
        )
    spark.stop()


if __name__ == "__main__":
    main()

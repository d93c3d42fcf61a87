r"""A small but realistic PySpark job against an icelog catalog.

1. generates a deterministic shop dataset (customers and orders),
2. ingests it into partitioned Iceberg tables through the icelog REST catalog,
3. upserts a batch of changes (updates, cancellations, new rows) with MERGE INTO,
4. reads the snapshot from before the upsert (VERSION AS OF) and prints before/after,
5. checks every number against what it generated; exits 1 if anything disagrees.

    .venv/bin/python examples/spark_pipeline.py \
        --uri http://127.0.0.1:8181/catalog --warehouse default
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import (
    DecimalType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from icelog.api.clients import spark_runtime_jar

COUNTRIES = ["DE", "FR", "NL", "PL", "SE", "US"]
STATUSES = ["placed", "paid", "shipped"]
START = datetime(2024, 3, 1, tzinfo=UTC)


@dataclass
class Order:
    order_id: int
    customer_id: int
    order_ts: datetime
    status: str
    amount: Decimal

    def row(self) -> tuple[Any, ...]:
        return (self.order_id, self.customer_id, self.order_ts, self.status, self.amount)


@dataclass
class Dataset:
    customers: dict[int, tuple[str, str, str, datetime]]
    orders: dict[int, Order]
    customer_changes: dict[int, tuple[str, str, str, datetime]] = field(default_factory=dict)
    order_changes: list[tuple[str, Order]] = field(default_factory=list)


def generate(customers: int, orders: int, seed: int) -> Dataset:
    """The dataset and a batch of changes, the same for the same seed."""
    rnd = random.Random(seed)  # noqa: S311 - reproducible test data, not secrets
    people = {
        cid: (
            f"customer-{cid:05d}",
            f"c{cid}@example.com",
            rnd.choice(COUNTRIES),
            START - timedelta(days=rnd.randrange(1, 900)),
        )
        for cid in range(1, customers + 1)
    }
    all_orders = {
        oid: Order(
            order_id=oid,
            customer_id=rnd.randrange(1, customers + 1),
            order_ts=START + timedelta(minutes=rnd.randrange(0, 14 * 24 * 60)),
            status=rnd.choice(STATUSES),
            amount=Decimal(rnd.randrange(500, 50_000)) / 100,
        )
        for oid in range(1, orders + 1)
    }
    data = Dataset(customers=people, orders=all_orders)

    # Changes: e-mail updates and new customers; order updates, cancellations, new orders.
    for cid in rnd.sample(sorted(people), k=max(1, customers // 20)):
        name, _, country, signup = people[cid]
        data.customer_changes[cid] = (name, f"new.{cid}@example.org", country, signup)
    for cid in range(customers + 1, customers + 1 + max(1, customers // 50)):
        data.customer_changes[cid] = (f"customer-{cid:05d}", f"c{cid}@example.com", "DE", START)
    touched = rnd.sample(sorted(all_orders), k=max(2, orders // 15))
    cancelled = set(touched[: len(touched) // 4])
    for oid in touched:
        old = all_orders[oid]
        if oid in cancelled:
            data.order_changes.append(("delete", old))
        else:
            new_amount = old.amount + Decimal(rnd.randrange(-300, 300)) / 100
            updated = Order(oid, old.customer_id, old.order_ts, "delivered", new_amount)
            data.order_changes.append(("upsert", updated))
    for oid in range(orders + 1, orders + 1 + max(1, orders // 30)):
        new = Order(
            oid,
            rnd.randrange(1, customers + 1),
            START + timedelta(days=14, minutes=rnd.randrange(0, 24 * 60)),
            "placed",
            Decimal(rnd.randrange(500, 50_000)) / 100,
        )
        data.order_changes.append(("upsert", new))
    return data


def expected_after(data: Dataset) -> dict[int, Order]:
    orders = dict(data.orders)
    for op, order in data.order_changes:
        if op == "delete":
            orders.pop(order.order_id, None)
        else:
            orders[order.order_id] = order
    return orders


def build_spark(uri: str, warehouse: str, catalog: str, master: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    prefix = f"spark.sql.catalog.{catalog}"
    spark = (
        SparkSession.builder.master(master)
        .appName("icelog-example-pipeline")
        .config("spark.jars", spark_runtime_jar())
        .config(
            "spark.sql.extensions",
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        )
        .config(prefix, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{prefix}.type", "rest")
        .config(f"{prefix}.uri", uri)
        .config(f"{prefix}.warehouse", warehouse)
        .config(f"{prefix}.cache-enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class Checks:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def equal(self, what: str, got: object, want: object) -> None:
        ok = got == want
        print(f"  [{'ok' if ok else 'FAIL'}] {what}: {got}" + ("" if ok else f" (expected {want})"))
        if not ok:
            self.failures.append(what)


def run(args: argparse.Namespace) -> int:
    data = generate(args.customers, args.orders, args.seed)
    after = expected_after(data)
    spark = build_spark(args.uri, args.warehouse, args.catalog, args.master)
    ns = f"{args.catalog}.{args.namespace}"
    customers_t, orders_t = f"{ns}.customers", f"{ns}.orders"
    checks = Checks()

    customer_schema = StructType(
        [
            StructField("customer_id", LongType(), False),
            StructField("name", StringType()),
            StructField("email", StringType()),
            StructField("country", StringType()),
            StructField("signup_ts", TimestampType()),
        ]
    )
    order_schema = StructType(
        [
            StructField("order_id", LongType(), False),
            StructField("customer_id", LongType()),
            StructField("order_ts", TimestampType()),
            StructField("status", StringType()),
            StructField("amount", DecimalType(12, 2)),
        ]
    )

    try:
        print(f"== 1. tables in {ns}")
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
        spark.sql(f"DROP TABLE IF EXISTS {orders_t} PURGE")
        spark.sql(f"DROP TABLE IF EXISTS {customers_t} PURGE")
        spark.sql(
            f"CREATE TABLE {customers_t} (customer_id BIGINT NOT NULL, name STRING, "
            "email STRING, country STRING, signup_ts TIMESTAMP) USING iceberg "
            "PARTITIONED BY (country)"
        )
        spark.sql(
            f"CREATE TABLE {orders_t} (order_id BIGINT NOT NULL, customer_id BIGINT, "
            "order_ts TIMESTAMP, status STRING, amount DECIMAL(12,2)) USING iceberg "
            "PARTITIONED BY (days(order_ts)) "
            "TBLPROPERTIES ('format-version' = '2', 'write.merge.mode' = 'merge-on-read')"
        )

        print(f"== 2. ingest {len(data.customers)} customers, {len(data.orders)} orders")
        customer_rows = [(cid, *v) for cid, v in sorted(data.customers.items())]
        spark.createDataFrame(customer_rows, customer_schema).writeTo(customers_t).append()
        order_rows = [o.row() for _, o in sorted(data.orders.items())]
        spark.createDataFrame(order_rows, order_schema).writeTo(orders_t).append()
        ingest_snapshot = spark.sql(
            f"SELECT snapshot_id FROM {orders_t}.snapshots ORDER BY committed_at DESC LIMIT 1"
        ).collect()[0][0]
        total_before = sum((o.amount for o in data.orders.values()), Decimal(0))
        row = spark.sql(f"SELECT count(*), sum(amount) FROM {orders_t}").collect()[0]
        checks.equal("orders after ingest", row[0], len(data.orders))
        checks.equal("revenue after ingest", row[1], total_before)
        days = spark.sql(f"SELECT count(*) FROM {orders_t}.partitions").collect()[0][0]
        checks.equal(
            "order partitions (days)", days, len({o.order_ts.date() for o in data.orders.values()})
        )

        print(
            f"== 3. upsert {len(data.order_changes)} order changes, "
            f"{len(data.customer_changes)} customer changes"
        )
        change_rows = [(op, *o.row()) for op, o in data.order_changes]
        change_schema = StructType([StructField("op", StringType()), *order_schema.fields])
        spark.createDataFrame(change_rows, change_schema).createOrReplaceTempView("order_changes")
        spark.sql(
            f"""MERGE INTO {orders_t} t USING order_changes c ON t.order_id = c.order_id
                WHEN MATCHED AND c.op = 'delete' THEN DELETE
                WHEN MATCHED THEN UPDATE SET t.status = c.status, t.amount = c.amount
                WHEN NOT MATCHED AND c.op = 'upsert' THEN INSERT
                  (order_id, customer_id, order_ts, status, amount)
                  VALUES (c.order_id, c.customer_id, c.order_ts, c.status, c.amount)"""
        )
        customer_change_rows = [(cid, *v) for cid, v in sorted(data.customer_changes.items())]
        spark.createDataFrame(customer_change_rows, customer_schema).createOrReplaceTempView(
            "customer_changes"
        )
        spark.sql(
            f"""MERGE INTO {customers_t} t USING customer_changes c
                ON t.customer_id = c.customer_id
                WHEN MATCHED THEN UPDATE SET t.email = c.email
                WHEN NOT MATCHED THEN INSERT *"""
        )

        print("== 4. before (VERSION AS OF the ingest snapshot) and after")
        total_after = sum((o.amount for o in after.values()), Decimal(0))
        before_row = spark.sql(
            f"SELECT count(*), sum(amount) FROM {orders_t} VERSION AS OF {ingest_snapshot}"
        ).collect()[0]
        after_row = spark.sql(f"SELECT count(*), sum(amount) FROM {orders_t}").collect()[0]
        print(f"  before: {before_row[0]} orders, revenue {before_row[1]}")
        print(f"  after:  {after_row[0]} orders, revenue {after_row[1]}")
        checks.equal("orders before (time travel)", before_row[0], len(data.orders))
        checks.equal("revenue before (time travel)", before_row[1], total_before)
        checks.equal("orders after upsert", after_row[0], len(after))
        checks.equal("revenue after upsert", after_row[1], total_after)

        status = dict(
            spark.sql(f"SELECT status, count(*) FROM {orders_t} GROUP BY status").collect()
        )
        checks.equal("orders per status", status, dict(Counter(o.status for o in after.values())))
        sample = next(
            o for op, o in data.order_changes if op == "upsert" and o.order_id in data.orders
        )
        old = spark.sql(
            f"SELECT status, amount FROM {orders_t} VERSION AS OF {ingest_snapshot} "
            f"WHERE order_id = {sample.order_id}"
        ).collect()
        new = spark.sql(
            f"SELECT status, amount FROM {orders_t} WHERE order_id = {sample.order_id}"
        ).collect()
        print(f"  order {sample.order_id}: before {tuple(old[0])} -> after {tuple(new[0])}")
        original = data.orders[sample.order_id]
        checks.equal("sample order before", tuple(old[0]), (original.status, original.amount))
        checks.equal("sample order after", tuple(new[0]), (sample.status, sample.amount))

        customers_after = {**data.customers, **data.customer_changes}
        checks.equal(
            "customers after upsert",
            spark.sql(f"SELECT count(*) FROM {customers_t}").collect()[0][0],
            len(customers_after),
        )
        changed = next(iter(sorted(data.customer_changes)))
        checks.equal(
            "changed e-mail",
            spark.sql(f"SELECT email FROM {customers_t} WHERE customer_id = {changed}").collect()[
                0
            ][0],
            customers_after[changed][1],
        )
        snapshots = spark.sql(
            f"SELECT operation FROM {orders_t}.snapshots ORDER BY committed_at"
        ).collect()
        checks.equal("orders snapshots", [r[0] for r in snapshots], ["append", "overwrite"])

        print("== 5. revenue by country (top 3)")
        top = spark.sql(
            f"""SELECT c.country, count(*) AS orders, sum(o.amount) AS revenue
                FROM {orders_t} o JOIN {customers_t} c ON o.customer_id = c.customer_id
                GROUP BY c.country ORDER BY revenue DESC LIMIT 3"""
        ).collect()
        for r in top:
            print(f"  {r.country}: {r.orders} orders, {r.revenue}")
        by_country: Counter[str] = Counter()
        for o in after.values():
            by_country[customers_after[o.customer_id][2]] += 1
        checks.equal(
            "orders of the top country",
            top[0].orders,
            by_country[top[0].country],
        )
    finally:
        spark.stop()

    if checks.failures:
        print(f"FAILED checks: {', '.join(checks.failures)}")
        return 1
    print("all checks passed")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--uri", default="http://127.0.0.1:8181/catalog", help="REST catalog URI")
    parser.add_argument("--warehouse", default="default")
    parser.add_argument("--catalog", default="icelog", help="Spark catalog name")
    parser.add_argument("--namespace", default="shop")
    parser.add_argument("--customers", type=int, default=500)
    parser.add_argument("--orders", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--master", default="local[2]")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

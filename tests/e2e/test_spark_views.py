"""Spark SQL views (Iceberg SQL extensions) through icelog's view endpoints."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_spark import SEED, sql

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(300)]


def test_create_select_alter_drop_view(spark: Any, spark_catalog: str, unique_name: str) -> None:
    ns = f"{spark_catalog}.vw_{unique_name}"
    spark.sql(f"CREATE NAMESPACE {ns}")
    spark.sql(f"CREATE TABLE {ns}.sales (id BIGINT, ts TIMESTAMP, category STRING, amount DOUBLE)")
    spark.sql(f"INSERT INTO {ns}.sales VALUES {SEED}")
    spark.sql(
        f"CREATE VIEW {ns}.totals AS "
        f"SELECT category, sum(amount) AS total FROM {ns}.sales GROUP BY category"
    )
    assert sorted(sql(spark, f"SELECT * FROM {ns}.totals")) == [("a", 60.0), ("b", 150.0)]
    assert [r[1] for r in sql(spark, f"SHOW VIEWS IN {ns}")] == ["totals"]
    # Tables and views share names: a table cannot take the view's name.
    with pytest.raises(Exception, match="already exists"):
        spark.sql(f"CREATE TABLE {ns}.totals (x INT)")

    spark.sql(f"ALTER VIEW {ns}.totals SET TBLPROPERTIES ('team' = 'finance')")
    props = dict(sql(spark, f"SHOW TBLPROPERTIES {ns}.totals"))
    assert props.get("team") == "finance"
    spark.sql(
        f"CREATE OR REPLACE VIEW {ns}.totals AS "
        f"SELECT category, max(amount) AS total FROM {ns}.sales GROUP BY category"
    )
    assert sorted(sql(spark, f"SELECT * FROM {ns}.totals")) == [("a", 30.0), ("b", 60.0)]
    spark.sql(f"ALTER VIEW {ns}.totals RENAME TO {ns}.maxima")
    assert sorted(sql(spark, f"SELECT * FROM {ns}.maxima")) == [("a", 30.0), ("b", 60.0)]
    spark.sql(f"DROP VIEW {ns}.maxima")
    assert sql(spark, f"SHOW VIEWS IN {ns}") == []
    spark.sql(f"DROP TABLE {ns}.sales")
    spark.sql(f"DROP NAMESPACE {ns}")

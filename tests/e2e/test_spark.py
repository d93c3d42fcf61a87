"""Spark 3.5 + Iceberg 1.10.2 (``SparkCatalog`` over REST) against ``icelog serve``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.clients import files_under, local_path, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(300)]

COLUMNS = "id BIGINT, ts TIMESTAMP, category STRING, amount DOUBLE"
SEED = """
    (1, TIMESTAMP '2024-01-02 10:00:00', 'a', 10.0),
    (2, TIMESTAMP '2024-01-03 11:00:00', 'a', 20.0),
    (3, TIMESTAMP '2024-01-01 12:00:00', 'a', 30.0),
    (4, TIMESTAMP '2024-01-02 13:00:00', 'b', 40.0),
    (5, TIMESTAMP '2024-01-03 14:00:00', 'b', 50.0),
    (6, TIMESTAMP '2024-01-01 15:00:00', 'b', 60.0)
"""


def sql(spark: Any, statement: str) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in spark.sql(statement).collect()]


def scalar(spark: Any, statement: str) -> Any:
    result = sql(spark, statement)
    assert len(result) == 1, result
    assert len(result[0]) == 1, result
    return result[0][0]


@pytest.fixture
def ns(spark: Any, spark_catalog: str, unique_name: str) -> str:
    """A fresh namespace, as ``<catalog>.<namespace>``."""
    name = f"{spark_catalog}.sp_{unique_name}"
    spark.sql(f"CREATE NAMESPACE {name}")
    return name


def table_location(spark: Any, table: str) -> str:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    locations = [r.data_type for r in rows if r.col_name == "Location"]
    assert len(locations) == 1, rows
    return str(locations[0])


def test_namespace_and_partitioned_table(spark: Any, spark_catalog: str, ns: str) -> None:
    short_ns = ns.split(".", 1)[1]
    namespaces = [r[0] for r in sql(spark, f"SHOW NAMESPACES IN {spark_catalog}")]
    assert short_ns in namespaces
    spark.sql(f"ALTER NAMESPACE {ns} SET PROPERTIES ('team' = 'analytics')")
    described = dict(sql(spark, f"DESCRIBE NAMESPACE EXTENDED {ns}"))
    assert "(team,analytics)" in described["Properties"], described

    table = f"{ns}.events"
    spark.sql(
        f"CREATE TABLE {table} ({COLUMNS}) USING iceberg PARTITIONED BY (days(ts)) "
        "TBLPROPERTIES ('format-version' = '2')"
    )
    assert [r[1] for r in sql(spark, f"SHOW TABLES IN {ns}")] == ["events"]
    spark.sql(f"INSERT INTO {table} VALUES {SEED}")

    assert sql(spark, f"SELECT count(*), sum(amount) FROM {table}") == [(6, 210.0)]
    assert sql(spark, f"SELECT id FROM {table} WHERE ts < TIMESTAMP '2024-01-02' ORDER BY id") == [
        (3,),
        (6,),
    ]
    partitions = sql(spark, f"SELECT partition.ts_day, record_count FROM {table}.partitions")
    assert sorted((str(day), count) for day, count in partitions) == [
        ("2024-01-01", 2),
        ("2024-01-02", 2),
        ("2024-01-03", 2),
    ]
    files = sql(spark, f"SELECT file_path, record_count FROM {table}.files")
    assert sum(count for _, count in files) == 6
    assert len(files) >= 3  # at least one file per day partition
    location = local_path(table_location(spark, table))
    for path, _ in files:
        assert local_path(path).is_relative_to(location)
        assert local_path(path).is_file()
    assert scalar(spark, f"SELECT count(*) FROM {table}.snapshots") == 1


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_update_delete_merge(spark: Any, ns: str, mode: str) -> None:
    table = f"{ns}.rows_{mode.replace('-', '_')}"
    spark.sql(
        f"CREATE TABLE {table} ({COLUMNS}) USING iceberg PARTITIONED BY (days(ts)) "
        "TBLPROPERTIES ('format-version' = '2', "
        f"'write.update.mode' = '{mode}', 'write.delete.mode' = '{mode}', "
        f"'write.merge.mode' = '{mode}')"
    )
    spark.sql(f"INSERT INTO {table} VALUES {SEED}")

    spark.sql(f"UPDATE {table} SET amount = amount + 1 WHERE category = 'a'")
    spark.sql(f"DELETE FROM {table} WHERE id = 5")
    spark.sql(
        f"""
        MERGE INTO {table} t
        USING (
            SELECT * FROM VALUES
                (2L, TIMESTAMP '2024-01-03 11:00:00', 'U', 200.0D),
                (4L, TIMESTAMP '2024-01-02 13:00:00', 'D', CAST(NULL AS DOUBLE)),
                (7L, TIMESTAMP '2024-01-04 09:00:00', 'I', 70.0D)
            AS s(id, ts, op, amount)
        ) s
        ON t.id = s.id
        WHEN MATCHED AND s.op = 'D' THEN DELETE
        WHEN MATCHED THEN UPDATE SET t.amount = s.amount
        WHEN NOT MATCHED THEN INSERT (id, ts, category, amount) VALUES (s.id, s.ts, 'c', s.amount)
        """
    )

    assert sql(spark, f"SELECT id, category, amount FROM {table} ORDER BY id") == [
        (1, "a", 11.0),
        (2, "a", 200.0),
        (3, "a", 31.0),
        (6, "b", 60.0),
        (7, "c", 70.0),
    ]
    snapshots = sql(spark, f"SELECT snapshot_id, parent_id FROM {table}.snapshots")
    assert len(snapshots) == 4  # insert, update, delete, merge
    delete_files = scalar(spark, f"SELECT count(*) FROM {table}.files WHERE content <> 0")
    if mode == "merge-on-read":
        assert delete_files > 0
    else:
        assert delete_files == 0
    properties = dict(sql(spark, f"SHOW TBLPROPERTIES {table}"))
    assert properties["write.merge.mode"] == mode


def test_schema_evolution(spark: Any, ns: str) -> None:
    table = f"{ns}.evolving"
    spark.sql(f"CREATE TABLE {table} ({COLUMNS}) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES {SEED}")

    spark.sql(f"ALTER TABLE {table} ADD COLUMN note STRING")
    spark.sql(f"ALTER TABLE {table} RENAME COLUMN amount TO price")
    spark.sql(f"INSERT INTO {table} VALUES (9, TIMESTAMP '2024-02-01 00:00:00', 'z', 9.5, 'new')")

    assert spark.table(table).columns == ["id", "ts", "category", "price", "note"]
    assert sql(spark, f"SELECT id, price, note FROM {table} WHERE id IN (1, 9) ORDER BY id") == [
        (1, 10.0, None),
        (9, 9.5, "new"),
    ]
    # Spark evolves the schema through REST commits: 3 schemas now (create, add, rename).
    history = sql(spark, f"SELECT count(*) FROM {table}.metadata_log_entries")
    assert history[0][0] >= 4


def test_time_travel_and_metadata_tables(spark: Any, ns: str) -> None:
    table = f"{ns}.travel"
    spark.sql(f"CREATE TABLE {table} ({COLUMNS}) USING iceberg PARTITIONED BY (days(ts))")
    spark.sql(f"INSERT INTO {table} VALUES {SEED}")
    spark.sql(f"INSERT INTO {table} VALUES (7, TIMESTAMP '2024-01-05 00:00:00', 'c', 70.0)")
    spark.sql(f"DELETE FROM {table} WHERE category = 'a'")

    snapshots = sql(
        spark,
        f"SELECT snapshot_id, parent_id, operation FROM {table}.snapshots ORDER BY committed_at",
    )
    assert len(snapshots) == 3
    first, second, third = (s[0] for s in snapshots)
    assert snapshots[0][1] is None
    assert snapshots[1][1] == first
    assert snapshots[2][1] == second
    assert snapshots[0][2] == "append"
    assert snapshots[1][2] == "append"

    assert scalar(spark, f"SELECT count(*) FROM {table} VERSION AS OF {first}") == 6
    assert scalar(spark, f"SELECT count(*) FROM {table} VERSION AS OF {second}") == 7
    assert scalar(spark, f"SELECT count(*) FROM {table} VERSION AS OF {third}") == 4
    assert scalar(spark, f"SELECT count(*) FROM {table}") == 4
    assert sql(spark, f"SELECT sum(amount) FROM {table} VERSION AS OF {first}") == [(210.0,)]

    history = sql(spark, f"SELECT snapshot_id, is_current_ancestor FROM {table}.history")
    assert [h[0] for h in history] == [first, second, third]
    assert all(h[1] for h in history)
    refs = sql(spark, f"SELECT name, type, snapshot_id FROM {table}.refs")
    assert refs == [("main", "BRANCH", third)]
    files = sql(spark, f"SELECT content, record_count FROM {table}.files")
    assert sum(r[1] for r in files) == 4
    assert scalar(spark, f"SELECT count(*) FROM {table}.manifests") >= 1


def test_expire_snapshots(spark: Any, spark_catalog: str, ns: str) -> None:
    table = f"{ns}.expiring"
    short = table.split(".", 1)[1]
    spark.sql(
        f"CREATE TABLE {table} ({COLUMNS}) USING iceberg "
        "TBLPROPERTIES ('write.delete.mode' = 'copy-on-write')"
    )
    spark.sql(f"INSERT INTO {table} VALUES (1, TIMESTAMP '2024-01-01 00:00:00', 'a', 1.0)")
    first_file = local_path(scalar(spark, f"SELECT file_path FROM {table}.files"))
    spark.sql(f"INSERT INTO {table} VALUES (2, TIMESTAMP '2024-01-01 00:00:00', 'b', 2.0)")
    spark.sql(f"DELETE FROM {table} WHERE id = 1")
    before = sql(
        spark, f"SELECT snapshot_id, manifest_list FROM {table}.snapshots ORDER BY committed_at"
    )
    assert len(before) == 3

    result = spark.sql(
        f"CALL {spark_catalog}.system.expire_snapshots("
        f"table => '{short}', older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
    ).collect()
    assert len(result) == 1
    outcome = result[0].asDict()
    assert outcome["deleted_manifest_lists_count"] == 2
    assert outcome["deleted_data_files_count"] == 1  # the file that held id 1

    after = sql(spark, f"SELECT snapshot_id FROM {table}.snapshots")
    assert after == [(before[2][0],)]
    assert sql(spark, f"SELECT id FROM {table}") == [(2,)]
    for _, manifest_list in before[:2]:
        assert not local_path(manifest_list).exists()
    assert local_path(before[2][1]).exists()
    assert not first_file.exists()
    with pytest.raises(Exception, match=r"(?i)snapshot|version"):
        spark.sql(f"SELECT * FROM {table} VERSION AS OF {before[0][0]}").collect()


def test_rewrite_data_files(spark: Any, spark_catalog: str, ns: str) -> None:
    table = f"{ns}.compact"
    short = table.split(".", 1)[1]
    spark.sql(f"CREATE TABLE {table} ({COLUMNS}) USING iceberg")
    for i in range(4):
        spark.sql(f"INSERT INTO {table} VALUES ({i}, TIMESTAMP '2024-01-01 00:00:00', 'x', {i}.0)")
    files_before = scalar(spark, f"SELECT count(*) FROM {table}.files")
    assert files_before >= 4

    result = spark.sql(
        f"CALL {spark_catalog}.system.rewrite_data_files("
        f"table => '{short}', options => map('min-input-files', '2'))"
    ).collect()
    outcome = result[0].asDict()
    assert outcome["rewritten_data_files_count"] == files_before
    assert 1 <= outcome["added_data_files_count"] < files_before

    files_after = scalar(spark, f"SELECT count(*) FROM {table}.files")
    assert files_after == outcome["added_data_files_count"]
    assert sql(spark, f"SELECT id, amount FROM {table} ORDER BY id") == [
        (0, 0.0),
        (1, 1.0),
        (2, 2.0),
        (3, 3.0),
    ]
    last_op = sql(spark, f"SELECT operation FROM {table}.snapshots ORDER BY committed_at DESC")
    assert last_op[0] == ("replace",)


def test_rename_drop_and_drop_purge(spark: Any, ns: str) -> None:
    kept = f"{ns}.kept"
    purged = f"{ns}.purged"
    for table in (kept, purged):
        spark.sql(f"CREATE TABLE {table} ({COLUMNS}) USING iceberg PARTITIONED BY (days(ts))")
        spark.sql(f"INSERT INTO {table} VALUES {SEED}")

    # Spark resolves the new name inside the table's catalog: no catalog prefix here.
    spark.sql(f"ALTER TABLE {kept} RENAME TO {ns.split('.', 1)[1]}.renamed")
    assert sorted(r[1] for r in sql(spark, f"SHOW TABLES IN {ns}")) == ["purged", "renamed"]
    assert scalar(spark, f"SELECT count(*) FROM {ns}.renamed") == 6

    kept_location = table_location(spark, f"{ns}.renamed")
    kept_files = files_under(kept_location)
    assert kept_files

    purged_location = table_location(spark, purged)
    purged_files = files_under(purged_location)
    assert any(p.suffix == ".parquet" for p in purged_files)

    spark.sql(f"DROP TABLE {purged} PURGE")
    assert [r[1] for r in sql(spark, f"SHOW TABLES IN {ns}")] == ["renamed"]
    data_and_metadata = [
        p for p in purged_files if p.suffix in (".parquet", ".avro") or p.name.endswith(".json")
    ]
    assert wait_until(lambda: not any(p.exists() for p in data_and_metadata)), [
        str(p) for p in data_and_metadata if p.exists()
    ]

    # A plain DROP leaves the files in place.
    spark.sql(f"DROP TABLE {ns}.renamed")
    assert sql(spark, f"SHOW TABLES IN {ns}") == []
    assert all(p.exists() for p in kept_files)
    spark.sql(f"DROP NAMESPACE {ns}")


def test_ctas_and_replace_table(spark: Any, ns: str) -> None:
    """CTAS and REPLACE TABLE AS SELECT go through staged create / replace transactions."""
    source = f"{ns}.source"
    spark.sql(f"CREATE TABLE {source} ({COLUMNS}) USING iceberg")
    spark.sql(f"INSERT INTO {source} VALUES {SEED}")

    copy = f"{ns}.copy"
    spark.sql(
        f"CREATE TABLE {copy} USING iceberg PARTITIONED BY (category) "
        f"AS SELECT id, category, amount FROM {source} WHERE amount > 15"
    )
    assert sql(spark, f"SELECT id FROM {copy} ORDER BY id") == [(i,) for i in (2, 3, 4, 5, 6)]
    assert scalar(spark, f"SELECT count(*) FROM {copy}.partitions") == 2

    spark.sql(
        f"REPLACE TABLE {copy} USING iceberg "
        f"AS SELECT id, amount * 2 AS doubled FROM {source} WHERE category = 'a'"
    )
    assert spark.table(copy).columns == ["id", "doubled"]
    assert sql(spark, f"SELECT id, doubled FROM {copy} ORDER BY id") == [
        (1, 20.0),
        (2, 40.0),
        (3, 60.0),
    ]
    # The replace kept the table's history: the CTAS snapshot is still there.
    assert scalar(spark, f"SELECT count(*) FROM {copy}.snapshots") == 2

    spark.sql(f"CREATE OR REPLACE TABLE {ns}.fresh USING iceberg AS SELECT 1L AS one")
    assert sql(spark, f"SELECT * FROM {ns}.fresh") == [(1,)]


def test_partition_evolution_branches_and_tags(spark: Any, ns: str) -> None:
    table = f"{ns}.branchy"
    spark.sql(f"CREATE TABLE {table} ({COLUMNS}) USING iceberg PARTITIONED BY (days(ts))")
    spark.sql(f"INSERT INTO {table} VALUES {SEED}")

    spark.sql(f"ALTER TABLE {table} ADD PARTITION FIELD category")
    spark.sql(f"ALTER TABLE {table} DROP PARTITION FIELD days(ts)")
    spark.sql(f"INSERT INTO {table} VALUES (7, TIMESTAMP '2024-01-09 00:00:00', 'c', 70.0)")
    spec_ids = sql(spark, f"SELECT DISTINCT spec_id FROM {table}.files ORDER BY spec_id")
    assert len(spec_ids) == 2
    assert scalar(spark, f"SELECT count(*) FROM {table}") == 7

    spark.sql(f"ALTER TABLE {table} CREATE TAG v1")
    spark.sql(f"ALTER TABLE {table} CREATE BRANCH dev")
    spark.sql(
        f"INSERT INTO {table}.branch_dev VALUES (8, TIMESTAMP '2024-01-10 00:00:00', 'd', 1.0)"
    )
    assert scalar(spark, f"SELECT count(*) FROM {table}.branch_dev") == 8
    assert scalar(spark, f"SELECT count(*) FROM {table}") == 7
    assert scalar(spark, f"SELECT count(*) FROM {table} VERSION AS OF 'v1'") == 7
    refs = dict(sql(spark, f"SELECT name, type FROM {table}.refs"))
    assert refs == {"main": "BRANCH", "dev": "BRANCH", "v1": "TAG"}

    spark.sql(f"DELETE FROM {table} WHERE id = 1")
    assert scalar(spark, f"SELECT count(*) FROM {table} VERSION AS OF 'v1'") == 7
    assert scalar(spark, f"SELECT count(*) FROM {table}") == 6

"""PyIceberg 0.12 against ``icelog serve`` over REST, on both backends (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import subprocess
import threading
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pytest
from pyiceberg.exceptions import (
    CommitFailedException,
    ForbiddenError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.table.sorting import SortDirection, SortField, SortOrder
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.types import StringType

from tests.support.clients import files_under, local_path, rest_catalog, wait_until
from tests.support.fixtures import writer_holds_on_warehouse
from tests.support.four_columns import four_columns
from tests.support.idp import TestIdentityProvider
from tests.support.server import ICELOG_BIN, CatalogServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SCHEMA, ARROW_SCHEMA = four_columns("category", "amount")
# Identity partitioning; time and bucket transforms: test_partitioned_by_day_and_bucket.
CATEGORY_SPEC = PartitionSpec(
    PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(), name="category")
)
ID_ORDER = SortOrder(SortField(source_id=1, transform=IdentityTransform()))


def rows(ids: range | list[int], category: str = "a", day: int = 1) -> pa.Table:
    ids = list(ids)
    return pa.Table.from_pylist(
        [
            {
                "id": i,
                "ts": datetime(2024, 1, day, i % 24),
                "category": category,
                "amount": float(i) * 1.5,
            }
            for i in ids
        ],
        schema=ARROW_SCHEMA,
    )


def ids_of(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def make_table(catalog: Any, identifier: str | tuple[str, ...], **kwargs: Any) -> Any:
    return catalog.create_table(identifier, schema=SCHEMA, **kwargs)


# --- namespaces ----------------------------------------------------------------------------------


def test_namespace_lifecycle(catalog: Any, unique_name: str) -> None:
    ns = f"ns_{unique_name}"
    catalog.create_namespace(ns, properties={"owner": "alice", "team": "data"})

    assert (ns,) in catalog.list_namespaces()
    assert catalog.namespace_exists(ns)
    props = catalog.load_namespace_properties(ns)
    assert props["owner"] == "alice"
    assert props["team"] == "data"

    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace(ns)

    summary = catalog.update_namespace_properties(
        ns, removals={"team", "does-not-exist"}, updates={"owner": "bob", "tier": "gold"}
    )
    assert sorted(summary.removed) == ["team"]
    assert sorted(summary.updated) == ["owner", "tier"]
    assert summary.missing == ["does-not-exist"]
    props = catalog.load_namespace_properties(ns)
    assert props["owner"] == "bob"
    assert props["tier"] == "gold"
    assert "team" not in props

    make_table(catalog, f"{ns}.t")
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace(ns)
    catalog.drop_table(f"{ns}.t")

    catalog.drop_namespace(ns)
    assert (ns,) not in catalog.list_namespaces()
    assert not catalog.namespace_exists(ns)
    with pytest.raises(NoSuchNamespaceError):
        catalog.load_namespace_properties(ns)
    with pytest.raises(NoSuchNamespaceError):
        catalog.drop_namespace(ns)


def test_nested_namespaces(catalog: Any, unique_name: str) -> None:
    parent = f"ns_{unique_name}"
    catalog.create_namespace(parent)
    catalog.create_namespace((parent, "child"))
    catalog.create_namespace((parent, "child", "leaf"))

    assert catalog.list_namespaces(parent) == [(parent, "child")]
    assert catalog.list_namespaces((parent, "child")) == [(parent, "child", "leaf")]
    assert (parent, "child") not in catalog.list_namespaces()

    table = make_table(catalog, (parent, "child", "leaf", "t"))
    table.append(rows(range(3)))
    loaded = catalog.load_table((parent, "child", "leaf", "t"))
    assert ids_of(loaded.scan().to_arrow()) == [0, 1, 2]
    assert catalog.list_tables((parent, "child", "leaf")) == [(parent, "child", "leaf", "t")]


def test_missing_namespace_and_table_errors(catalog: Any, namespace: str) -> None:
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{namespace}.missing")
    with pytest.raises(NoSuchTableError):
        catalog.load_table("no_such_namespace_xyz.missing")
    with pytest.raises(NoSuchNamespaceError):
        make_table(catalog, "no_such_namespace_xyz.t")
    with pytest.raises(NoSuchTableError):
        catalog.drop_table(f"{namespace}.missing")
    assert not catalog.table_exists(f"{namespace}.missing")
    assert catalog.list_tables(namespace) == []


# --- tables --------------------------------------------------------------------------------------


def test_create_table_with_partition_spec_and_sort_order(
    catalog: Any, namespace: str, catalog_server: CatalogServer
) -> None:
    ident = f"{namespace}.events"
    table = make_table(
        catalog, ident, partition_spec=CATEGORY_SPEC, sort_order=ID_ORDER, properties={"k": "v"}
    )
    assert catalog.table_exists(ident)
    assert catalog.list_tables(namespace) == [(namespace, "events")]
    with pytest.raises(TableAlreadyExistsError):
        make_table(catalog, ident)

    loaded = catalog.load_table(ident)
    assert loaded.metadata.format_version == 2
    assert [f.name for f in loaded.schema().fields] == ["id", "ts", "category", "amount"]
    assert [f.field_id for f in loaded.schema().fields] == [1, 2, 3, 4]
    spec = loaded.spec()
    assert spec.spec_id == 0
    assert len(spec.fields) == 1
    assert spec.fields[0].field_id == 1000
    assert spec.fields[0].source_id == 3
    assert spec.fields[0].name == "category"
    assert isinstance(spec.fields[0].transform, IdentityTransform)
    order = loaded.sort_order()
    assert order.order_id == 1
    assert len(order.fields) == 1
    assert order.fields[0].source_id == 1
    assert order.fields[0].direction == SortDirection.ASC
    assert loaded.properties["k"] == "v"
    assert loaded.current_snapshot() is None
    assert table.metadata.table_uuid == loaded.metadata.table_uuid

    # The default warehouse is a local directory under the server's data dir.
    assert str(local_path(loaded.location())).startswith(str(catalog_server.warehouse_dir))
    assert local_path(loaded.metadata_location).is_file()


def test_create_table_transaction(catalog: Any, namespace: str) -> None:
    """A staged create: nothing is visible until the transaction commits, then all of it is."""
    ident = f"{namespace}.staged"
    txn = catalog.create_table_transaction(ident, schema=SCHEMA, partition_spec=CATEGORY_SPEC)
    txn.set_properties(owner="etl")
    txn.append(rows(range(4), "s"))
    assert not catalog.table_exists(ident)
    txn.commit_transaction()

    table = catalog.load_table(ident)
    assert table.properties["owner"] == "etl"
    assert table.spec().fields[0].name == "category"
    assert ids_of(table.scan().to_arrow()) == [0, 1, 2, 3]
    assert len(table.snapshots()) == 1
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table_transaction(ident, schema=SCHEMA).commit_transaction()


def test_append_overwrite_delete(catalog: Any, namespace: str) -> None:
    ident = f"{namespace}.sales"
    table = make_table(catalog, ident, partition_spec=CATEGORY_SPEC)

    table.append(rows(range(10), "a", day=1))
    table.append(rows(range(10, 20), "b", day=2))
    table = catalog.load_table(ident)
    assert ids_of(table.scan().to_arrow()) == list(range(20))
    assert len(table.snapshots()) == 2

    # Overwrite only day 2 (category b) with new rows.
    table.overwrite(rows(range(100, 105), "b", day=2), overwrite_filter="category = 'b'")
    table = catalog.load_table(ident)
    assert ids_of(table.scan().to_arrow()) == [*range(10), *range(100, 105)]

    # Row-level delete inside a partition (copy-on-write rewrite by PyIceberg).
    table.delete("id < 3")
    table = catalog.load_table(ident)
    assert ids_of(table.scan().to_arrow()) == [*range(3, 10), *range(100, 105)]
    assert ids_of(table.scan(row_filter="category = 'b'").to_arrow()) == list(range(100, 105))

    # Full overwrite.
    table.overwrite(rows([7], "z", day=3))
    table = catalog.load_table(ident)
    result = table.scan().to_arrow()
    assert result.to_pylist() == [
        {"id": 7, "ts": datetime(2024, 1, 3, 7), "category": "z", "amount": 10.5}
    ]
    summary = table.current_snapshot().summary
    assert summary["total-records"] == "1"


def test_partitioned_by_day_and_bucket(catalog: Any, namespace: str) -> None:
    """PyIceberg computes time and bucket partition values with pyiceberg-core, which
    `pip install 'icelog[clients]'` brings along."""
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"),
        PartitionField(source_id=1, field_id=1001, transform=BucketTransform(4), name="id_b"),
    )
    ident = f"{namespace}.by_day"
    table = make_table(catalog, ident, partition_spec=spec)
    table.append(rows(range(8), day=1))
    table.append(rows(range(8, 16), day=2))
    table = catalog.load_table(ident)
    assert ids_of(table.scan().to_arrow()) == list(range(16))
    second_day = table.scan(row_filter="ts >= '2024-01-02T00:00:00'").to_arrow()
    assert ids_of(second_day) == list(range(8, 16))
    partitions = table.inspect.partitions().column("partition").to_pylist()
    assert {p["ts_day"] for p in partitions} == {date(2024, 1, 1), date(2024, 1, 2)}
    assert len(partitions) > 2, "the rows of each day spread over buckets"


def test_schema_evolution(catalog: Any, namespace: str) -> None:
    ident = f"{namespace}.evolve"
    table = make_table(catalog, ident)
    table.append(rows(range(3)))

    with table.update_schema() as update:
        update.add_column("note", StringType())
        update.rename_column("amount", "price")

    table = catalog.load_table(ident)
    assert [f.name for f in table.schema().fields] == ["id", "ts", "category", "price", "note"]
    assert table.schema().find_field("note").field_id == 5
    assert table.schema().find_field("price").field_id == 4
    assert table.metadata.current_schema_id == 1
    assert len(table.schemas()) == 2

    new_rows = pa.Table.from_pylist(
        [{"id": 9, "ts": datetime(2024, 2, 1), "category": "n", "price": 1.0, "note": "hi"}],
        schema=pa.schema(
            [
                ("id", pa.int64()),
                ("ts", pa.timestamp("us")),
                ("category", pa.string()),
                ("price", pa.float64()),
                ("note", pa.string()),
            ]
        ),
    )
    table.append(new_rows)
    table = catalog.load_table(ident)
    by_id = {r["id"]: r for r in table.scan().to_arrow().to_pylist()}
    assert sorted(by_id) == [0, 1, 2, 9]
    assert by_id[2]["price"] == 3.0  # old files are read through the renamed column
    assert by_id[2]["note"] is None
    assert by_id[9]["note"] == "hi"


def test_partition_evolution(catalog: Any, namespace: str) -> None:
    ident = f"{namespace}.partevolve"
    table = make_table(catalog, ident)
    assert table.spec().is_unpartitioned()
    table.append(rows(range(5), "a"))

    with table.update_spec() as update:
        update.add_identity("category")

    table = catalog.load_table(ident)
    spec = table.spec()
    assert spec.spec_id == 1
    assert [(f.name, f.field_id, f.source_id) for f in spec.fields] == [("category", 1000, 3)]
    assert sorted(table.specs()) == [0, 1]
    assert table.metadata.last_partition_id == 1000

    table.append(rows(range(5, 8), "b"))
    table = catalog.load_table(ident)
    assert ids_of(table.scan().to_arrow()) == list(range(8))
    assert ids_of(table.scan(row_filter="category = 'b'").to_arrow()) == [5, 6, 7]
    files = table.inspect.files().to_pylist()
    assert sorted({f["spec_id"] for f in files}) == [0, 1]


def test_snapshots_and_time_travel(catalog: Any, namespace: str) -> None:
    ident = f"{namespace}.history"
    table = make_table(catalog, ident)
    table.append(rows(range(3)))
    first = catalog.load_table(ident).current_snapshot()
    table.append(rows(range(3, 6)))
    table.delete("id = 0")
    table = catalog.load_table(ident)

    snapshots = table.snapshots()
    assert len(snapshots) == 3
    assert len({s.snapshot_id for s in snapshots}) == 3
    assert snapshots[0].snapshot_id == first.snapshot_id
    assert snapshots[1].parent_snapshot_id == snapshots[0].snapshot_id
    assert snapshots[2].parent_snapshot_id == snapshots[1].snapshot_id
    assert table.current_snapshot().snapshot_id == snapshots[2].snapshot_id
    assert [entry.snapshot_id for entry in table.history()] == [s.snapshot_id for s in snapshots]
    assert [s.sequence_number for s in snapshots] == [1, 2, 3]
    assert table.metadata.refs["main"].snapshot_id == snapshots[2].snapshot_id

    assert ids_of(table.scan(snapshot_id=snapshots[0].snapshot_id).to_arrow()) == [0, 1, 2]
    assert ids_of(table.scan(snapshot_id=snapshots[1].snapshot_id).to_arrow()) == list(range(6))
    assert ids_of(table.scan().to_arrow()) == [1, 2, 3, 4, 5]

    # Every commit produced a new metadata file; the log lists the previous ones.
    previous = [entry.metadata_file for entry in table.metadata.metadata_log]
    assert len(previous) == 3
    assert all(local_path(p).is_file() for p in previous)
    assert table.metadata_location not in previous


def test_rename_table(catalog: Any, namespace: str, unique_name: str) -> None:
    table = make_table(catalog, f"{namespace}.before")
    table.append(rows(range(4)))
    uuid = table.metadata.table_uuid

    catalog.rename_table(f"{namespace}.before", f"{namespace}.after")
    assert not catalog.table_exists(f"{namespace}.before")
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{namespace}.before")
    renamed = catalog.load_table(f"{namespace}.after")
    assert renamed.metadata.table_uuid == uuid
    assert ids_of(renamed.scan().to_arrow()) == [0, 1, 2, 3]
    assert catalog.list_tables(namespace) == [(namespace, "after")]

    # Across namespaces, and the old name can be reused afterwards.
    other = f"other_{unique_name}"
    catalog.create_namespace(other)
    catalog.rename_table(f"{namespace}.after", f"{other}.moved")
    assert catalog.list_tables(namespace) == []
    assert catalog.list_tables(other) == [(other, "moved")]
    assert catalog.load_table(f"{other}.moved").metadata.table_uuid == uuid
    make_table(catalog, f"{namespace}.before")

    with pytest.raises(NoSuchTableError):
        catalog.rename_table(f"{namespace}.nope", f"{namespace}.nope2")
    with pytest.raises(TableAlreadyExistsError):
        catalog.rename_table(f"{other}.moved", f"{namespace}.before")
    with pytest.raises(NoSuchNamespaceError):
        catalog.rename_table(f"{other}.moved", "no_such_namespace_xyz.moved")


def test_drop_keeps_files_and_register_table(
    catalog: Any,
    namespace: str,
    catalog_server: CatalogServer,
    e2e_idp: TestIdentityProvider,
) -> None:
    ident = f"{namespace}.dropme"
    table = make_table(catalog, ident, partition_spec=CATEGORY_SPEC)
    table.append(rows(range(5)))
    table.append(rows(range(5, 7)))
    table = catalog.load_table(ident)
    metadata_location = table.metadata_location
    snapshot_ids = [s.snapshot_id for s in table.snapshots()]
    before = files_under(table.location())

    catalog.drop_table(ident)
    assert not catalog.table_exists(ident)
    with pytest.raises(NoSuchTableError):
        catalog.load_table(ident)
    # A drop without purge must leave every file in place.
    assert files_under(table.location()) >= before

    if catalog_server.token is not None:
        # Registering places a table over files already in storage: with auth on that is
        # the warehouse's `modify`, more than the writer's `create` (docs/security.md).
        with pytest.raises(ForbiddenError):
            catalog.register_table(f"{namespace}.registered", metadata_location)
    with writer_holds_on_warehouse(catalog_server, e2e_idp, "modify"):
        registered = catalog.register_table(f"{namespace}.registered", metadata_location)
    assert registered.metadata_location == metadata_location
    reloaded = catalog.load_table(f"{namespace}.registered")
    assert reloaded.metadata.table_uuid == table.metadata.table_uuid
    assert [s.snapshot_id for s in reloaded.snapshots()] == snapshot_ids
    assert ids_of(reloaded.scan().to_arrow()) == list(range(7))
    assert reloaded.spec().fields[0].name == "category"

    # The registered table is a normal table: it accepts commits.
    reloaded.append(rows([42]))
    assert ids_of(catalog.load_table(f"{namespace}.registered").scan().to_arrow()) == [
        *range(7),
        42,
    ]
    with (
        writer_holds_on_warehouse(catalog_server, e2e_idp, "modify"),
        pytest.raises(TableAlreadyExistsError),
    ):
        catalog.register_table(f"{namespace}.registered", metadata_location)


def test_purge_table_deletes_its_files_only(catalog: Any, namespace: str) -> None:
    purged = make_table(catalog, f"{namespace}.purged", partition_spec=CATEGORY_SPEC)
    kept = make_table(catalog, f"{namespace}.kept", partition_spec=CATEGORY_SPEC)
    purged.append(rows(range(5)))
    purged.append(rows(range(5, 9), "b", day=2))
    purged.delete("id = 1")
    kept.append(rows(range(3)))
    purged = catalog.load_table(f"{namespace}.purged")
    kept = catalog.load_table(f"{namespace}.kept")

    purged_files = files_under(purged.location())
    kept_files = files_under(kept.location())
    assert any(p.suffix == ".parquet" for p in purged_files)
    assert any(p.name.endswith(".metadata.json") for p in purged_files)
    assert any(p.suffix == ".avro" for p in purged_files)
    assert not purged_files & kept_files

    catalog.purge_table(f"{namespace}.purged")
    assert not catalog.table_exists(f"{namespace}.purged")

    def purged_files_gone() -> bool:
        return not any(p.exists() for p in purged_files)

    assert wait_until(purged_files_gone), sorted(str(p) for p in purged_files if p.exists())
    assert all(p.exists() for p in kept_files)
    kept = catalog.load_table(f"{namespace}.kept")
    assert ids_of(kept.scan().to_arrow()) == [0, 1, 2]


def test_concurrent_appends_lose_no_rows(catalog_server: CatalogServer, namespace: str) -> None:
    threads_count, batches, batch_size = 8, 4, 5
    ident = f"{namespace}.concurrent"
    make_table(rest_catalog(catalog_server), ident)
    errors: list[BaseException] = []
    retries = [0] * threads_count
    start = threading.Barrier(threads_count)

    def worker(n: int) -> None:
        try:
            own_catalog = rest_catalog(catalog_server, name=f"w{n}")
            start.wait(timeout=30)
            for b in range(batches):
                first = (n * batches + b) * batch_size
                data = rows(range(first, first + batch_size), category=f"w{n}")
                for _ in range(200):
                    table = own_catalog.load_table(ident)
                    try:
                        table.append(data)
                        break
                    except CommitFailedException:
                        retries[n] += 1
                else:
                    raise AssertionError(f"worker {n} gave up after 200 conflicts")
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads_count)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=150)
    assert not any(t.is_alive() for t in workers)
    assert not errors, errors

    table = rest_catalog(catalog_server).load_table(ident)
    total = threads_count * batches * batch_size
    assert ids_of(table.scan().to_arrow()) == list(range(total))
    # One snapshot per successful append, in one linear history.
    snapshots = table.snapshots()
    assert len(snapshots) == threads_count * batches
    chain: list[int] = []
    current = table.current_snapshot()
    while current is not None:
        chain.append(current.snapshot_id)
        parent = current.parent_snapshot_id
        current = table.snapshot_by_id(parent) if parent is not None else None
    assert len(chain) == threads_count * batches
    assert table.current_snapshot().summary["total-records"] == str(total)


def test_state_survives_a_restart(backend: str, catalog_server_factory: Any) -> None:
    """The event log is the truth: a new server process on the same store sees everything."""
    first = catalog_server_factory(backend)
    catalog = rest_catalog(first)
    catalog.create_namespace("durable", properties={"k": "v"})
    table = make_table(catalog, "durable.t", partition_spec=CATEGORY_SPEC)
    table.append(rows(range(3)))
    table.append(rows(range(3, 5), "b"))
    with table.update_schema() as update:
        update.add_column("note", StringType())
    table = catalog.load_table("durable.t")
    catalog.rename_table("durable.t", "durable.renamed")
    first.stop()

    second = catalog_server_factory(
        backend, data_dir=first.data_dir, database_url=first.database_url
    )
    catalog = rest_catalog(second)
    assert catalog.load_namespace_properties("durable")["k"] == "v"
    assert catalog.list_tables("durable") == [("durable", "renamed")]
    reloaded = catalog.load_table("durable.renamed")
    assert reloaded.metadata_location == table.metadata_location
    assert reloaded.metadata.table_uuid == table.metadata.table_uuid
    assert [s.snapshot_id for s in reloaded.snapshots()] == [
        s.snapshot_id for s in table.snapshots()
    ]
    assert [f.name for f in reloaded.schema().fields][-1] == "note"
    assert ids_of(reloaded.scan().to_arrow()) == [0, 1, 2, 3, 4]
    reloaded.append(rows([9], "c"))
    assert ids_of(catalog.load_table("durable.renamed").scan().to_arrow()) == [0, 1, 2, 3, 4, 9]


@pytest.mark.postgres
def test_migrate_then_serve(
    pg_database_factory: Any, catalog_server_factory: Any, tmp_path: Path
) -> None:
    """``icelog migrate`` prepares an empty PostgreSQL database (twice is harmless)."""
    url = pg_database_factory()
    env = {**os.environ, "ICELOG_DATABASE_URL": url, "ICELOG_DATA_DIR": str(tmp_path / "m")}
    for _ in range(2):
        result = subprocess.run(
            [str(ICELOG_BIN), "migrate"], env=env, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr

    server = catalog_server_factory("postgres", database_url=url)
    catalog = rest_catalog(server)
    catalog.create_namespace("migrated")
    make_table(catalog, "migrated.t").append(rows(range(2)))
    assert ids_of(catalog.load_table("migrated.t").scan().to_arrow()) == [0, 1]

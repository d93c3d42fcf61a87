"""PyIceberg drop_table / purge_table with both delete profiles, against a live server
whose own task worker runs expirations and purges."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tests.support.clients import files_under, rest_catalog, wait_until
from tests.support.server import CatalogServer
from tests.support.warehouses import create_warehouse, deleted_tabulars, undrop

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def _namespace_db(server: CatalogServer, delete_profile: dict[str, Any]) -> tuple[Any, str]:
    """A new warehouse with `delete_profile` and its namespace `db`: a PyIceberg catalog on
    it, and the warehouse's id."""
    name, wid = create_warehouse(server, delete_profile)
    catalog = rest_catalog(server, warehouse=name)
    catalog.create_namespace("db")
    return catalog, wid


def _table_with_data(catalog: Any, identifier: str) -> Any:
    table = catalog.create_table(identifier, schema=SCHEMA)
    table.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}, schema=SCHEMA))
    table.append(pa.table({"id": [4], "name": ["d"]}, schema=SCHEMA))
    return catalog.load_table(identifier)


def test_soft_profile_drop_and_purge_then_undrop(catalog_server: CatalogServer) -> None:
    catalog, wid = _namespace_db(catalog_server, {"type": "soft", "expiration-seconds": 3600})
    dropped = _table_with_data(catalog, "db.dropped")
    purged = _table_with_data(catalog, "db.purged")
    dropped_files, purged_files = files_under(dropped.location()), files_under(purged.location())
    catalog.drop_table("db.dropped")
    catalog.purge_table("db.purged")
    assert not catalog.table_exists("db.dropped") and not catalog.table_exists("db.purged")
    kinds = {t["name"]: t["deletion-kind"] for t in deleted_tabulars(catalog_server, wid)}
    assert kinds == {"dropped": "default", "purged": "purge"}
    assert all(p.exists() for p in dropped_files | purged_files), "kept until expiry"
    # The name is free at once.
    catalog.create_table("db.dropped", schema=SCHEMA)
    ids = {t["name"]: t["id"] for t in deleted_tabulars(catalog_server, wid)}
    assert undrop(catalog_server, wid, {"type": "table", "id": ids["purged"]}).status_code == 204
    restored = catalog.load_table("db.purged")
    assert sorted(restored.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3, 4]


def test_soft_profile_one_second_expiry_removes_files_and_entry(
    catalog_server: CatalogServer,
) -> None:
    catalog, wid = _namespace_db(catalog_server, {"type": "soft", "expiration-seconds": 1})
    table = _table_with_data(catalog, "db.short_lived")
    files = files_under(table.location())
    assert any(p.suffix == ".parquet" for p in files)
    catalog.purge_table("db.short_lived")
    assert len(deleted_tabulars(catalog_server, wid)) == 1
    assert wait_until(lambda: not deleted_tabulars(catalog_server, wid), timeout=20)
    assert wait_until(lambda: not any(p.exists() for p in files), timeout=20), sorted(
        str(p) for p in files if p.exists()
    )
    catalog.drop_namespace("db")  # empty now: nothing soft-deleted is left in it


def test_hard_profile_purge_deletes_files_and_drop_keeps_them(
    catalog_server: CatalogServer,
) -> None:
    catalog, wid = _namespace_db(catalog_server, {"type": "hard"})
    kept = _table_with_data(catalog, "db.kept")
    gone = _table_with_data(catalog, "db.gone")
    kept_files, gone_files = files_under(kept.location()), files_under(gone.location())
    catalog.drop_table("db.kept")
    catalog.purge_table("db.gone")
    assert deleted_tabulars(catalog_server, wid) == [], "hard drops are final"
    assert wait_until(lambda: not any(p.exists() for p in gone_files), timeout=20)
    assert all(p.exists() for p in kept_files)

"""The rules the aggregates keep themselves: each method refuses, before its event is
triggered, what the catalog never allows, with the error a client sees for it."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any
from uuid import uuid4

import pytest

from icelog.domain.errors import (
    AlreadyExistsError,
    CatalogError,
    ConflictError,
    NoSuchFunctionError,
    NoSuchNamespaceError,
    NoSuchProjectError,
    NoSuchTableError,
    NoSuchViewError,
    NoSuchWarehouseError,
    NotEmptyError,
    NotFoundError,
)
from icelog.domain.function import Function
from icelog.domain.namespace import Namespace
from icelog.domain.project import Project
from icelog.domain.protection import ProtectedError
from icelog.domain.table import Table
from icelog.domain.tabular import NotSoftDeletedError
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse

WHO: dict[str, Any] = {"actor": "t", "request_id": "r"}
PLACE: dict[str, Any] = {
    "warehouse_id": uuid4(),
    "namespace_id": uuid4(),
    "namespace": ["db"],
    "name": "t",
    "location": "file:///w/db/t",
    "metadata_location": "file:///w/db/t/metadata/00000-a.metadata.json",
    "metadata": {},
}


def new_table() -> Table:
    return Table.create(table_id=uuid4(), updates=[], **PLACE, **WHO)


def new_view() -> View:
    return View.create(view_id=uuid4(), **PLACE, **WHO)


def change(tabular: Table | View) -> None:
    fields: dict[str, Any] = {
        "requirements": [],
        "updates": [],
        "metadata_location": "file:///w/db/t/metadata/00001-b.metadata.json",
        "applied_at_ms": 1,
        **WHO,
    }
    if isinstance(tabular, Table):
        tabular.commit(**fields)
    else:
        tabular.replace(**fields)


def drop(tabular: Table | View) -> None:
    if isinstance(tabular, Table):
        tabular.drop(purge_requested=False, **WHO)
    else:
        tabular.drop(**WHO)


def soft_drop(tabular: Table | View) -> None:
    extra: dict[str, Any] = {"purge_requested": False} if isinstance(tabular, Table) else {}
    tabular.soft_drop(
        deleted_at_ms=1, expiration_seconds=60, expiration_task_id=uuid4(), **WHO, **extra
    )


def rename(tabular: Table | View) -> None:
    tabular.rename(namespace_id=uuid4(), namespace=["db2"], name="u", **WHO)


def refused(action: Callable[[], None], error: type[CatalogError], message: str) -> None:
    """`action` raises `error` with `message`, and triggers nothing."""
    with pytest.raises(error) as raised:
        action()
    assert raised.value.message == message


KINDS = [(new_table, NoSuchTableError, "Table"), (new_view, NoSuchViewError, "View")]


@pytest.mark.parametrize(("new", "missing", "kind"), KINDS)
@pytest.mark.parametrize("gone", [drop, soft_drop])
def test_a_dropped_tabular_is_not_changed_renamed_or_dropped_again(
    new: Callable[[], Table | View],
    missing: type[NotFoundError],
    kind: str,
    gone: Callable[[Table | View], None],
) -> None:
    tabular = new()
    gone(tabular)
    version = tabular.version
    for action in (change, rename, drop, soft_drop):
        refused(partial(action, tabular), missing, f"{kind} does not exist: db.t")
    refused(
        lambda: tabular.set_protection(True, **WHO),
        NotFoundError,
        f"{kind} does not exist: {tabular.id}",
    )
    assert tabular.version == version


@pytest.mark.parametrize(("new", "missing", "kind"), KINDS)
def test_a_protected_tabular_is_not_dropped(
    new: Callable[[], Table | View], missing: type[NotFoundError], kind: str
) -> None:
    tabular = new()
    tabular.set_protection(True, **WHO)
    message = f"{kind} db.t is protected; remove the protection to drop it"
    refused(lambda: drop(tabular), ProtectedError, message)
    refused(lambda: soft_drop(tabular), ProtectedError, message)
    if isinstance(tabular, Table):
        refused(lambda: tabular.unregister(**WHO), ProtectedError, message)
    change(tabular)
    rename(tabular)
    tabular.set_protection(False, **WHO)
    drop(tabular)
    assert tabular.dropped


@pytest.mark.parametrize(("new", "missing", "kind"), KINDS)
def test_only_a_soft_dropped_tabular_is_undropped_or_expired(
    new: Callable[[], Table | View], missing: type[NotFoundError], kind: str
) -> None:
    tabular = new()
    refused(
        lambda: tabular.undrop(namespace_id=uuid4(), namespace=["db"], name="t", **WHO),
        NotSoftDeletedError,
        "db.t is not dropped",
    )
    refused(
        lambda: tabular.expire(reason="expired", purge_task_id=None, **WHO),
        NotSoftDeletedError,
        "db.t is not dropped",
    )
    soft_drop(tabular)
    tabular.undrop(namespace_id=uuid4(), namespace=["db"], name="t2", **WHO)
    change(tabular)  # live again, under its new name
    assert tabular.dotted == "db.t2"


def test_only_a_finally_dropped_table_is_purged_and_once() -> None:
    def purge(table: Table) -> None:
        table.mark_purged(deleted_files=1, missing_files=0, **WHO)

    table = new_table()
    message = "Table db.t is not awaiting a purge"
    refused(lambda: purge(table), ConflictError, message)
    soft_drop(table)
    refused(lambda: purge(table), ConflictError, message)
    table.expire(reason="expired", purge_task_id=uuid4(), **WHO)
    purge(table)
    refused(lambda: purge(table), ConflictError, message)


def new_namespace() -> Namespace:
    return Namespace.create(
        namespace_id=uuid4(), warehouse_id=uuid4(), levels=["a", "b"], properties={}, **WHO
    )


def test_namespace_rules() -> None:
    ns = new_namespace()
    refused(lambda: ns.recreate({}, **WHO), AlreadyExistsError, "Namespace already exists: a.b")
    ns.set_protection(True, **WHO)
    refused(
        lambda: ns.drop(**WHO),
        ProtectedError,
        "Namespace a.b is protected; remove the protection to drop it",
    )
    ns.set_protection(False, **WHO)
    ns.drop(**WHO)
    gone = "Namespace does not exist: a.b"
    refused(lambda: ns.drop(**WHO), NoSuchNamespaceError, gone)
    refused(lambda: ns.update_properties({"k": "v"}, [], **WHO), NoSuchNamespaceError, gone)
    ns.recreate({}, **WHO)
    ns.update_properties({"k": "v"}, [], **WHO)


def new_warehouse() -> Warehouse:
    return Warehouse.create(
        warehouse_id=uuid4(),
        project_id=uuid4(),
        name="w",
        storage_profile={"type": "local", "base-location": "file:///w"},
        delete_profile={"type": "hard"},
        **WHO,
    )


def test_warehouse_rules() -> None:
    warehouse = new_warehouse()
    warehouse.add_namespace(uuid4(), **WHO)
    refused(
        lambda: warehouse.delete(**WHO),
        NotEmptyError,
        "Warehouse w is not empty: it has 1 namespace(s)",
    )
    warehouse.remove_namespace(uuid4(), **WHO)
    warehouse.set_protection(True, **WHO)
    refused(
        lambda: warehouse.delete(**WHO),
        ProtectedError,
        "Warehouse w is protected; remove the protection to drop it",
    )
    warehouse.set_protection(False, **WHO)
    warehouse.delete(**WHO)
    gone = f"Warehouse does not exist: {warehouse.id}"
    for action in (
        lambda: warehouse.rename("w2", **WHO),
        lambda: warehouse.delete(**WHO),
        lambda: warehouse.add_namespace(uuid4(), **WHO),
        lambda: warehouse.change_storage_profile({}, **WHO),
        lambda: warehouse.change_delete_profile({}, **WHO),
    ):
        refused(action, NoSuchWarehouseError, gone)
    refused(
        lambda: warehouse.set_protection(True, **WHO),
        NotFoundError,
        f"Warehouse does not exist: {warehouse.id}",
    )


def test_a_dropped_function_is_not_replaced_or_dropped_again() -> None:
    function = Function.create(function_id=uuid4(), **PLACE, **WHO)
    function.drop(**WHO)
    gone = "Function does not exist: db.t"
    refused(lambda: function.drop(**WHO), NoSuchFunctionError, gone)
    refused(
        lambda: function.replace(
            changes={}, metadata_location="file:///m.json", applied_at_ms=1, **WHO
        ),
        NoSuchFunctionError,
        gone,
    )


def test_project_rules() -> None:
    project = Project.create(project_id=uuid4(), name="p", **WHO)
    warehouse_id = uuid4()
    project.add_warehouse(warehouse_id, **WHO)
    refused(
        lambda: project.delete(**WHO),
        NotEmptyError,
        f"Project {project.id} still has 1 warehouse(s)",
    )
    project.remove_warehouse(warehouse_id, **WHO)
    project.delete(**WHO)
    gone = f"Project does not exist: {project.id}"
    for action in (
        lambda: project.rename("q", **WHO),
        lambda: project.delete(**WHO),
        lambda: project.add_warehouse(uuid4(), **WHO),
        lambda: project.remove_warehouse(warehouse_id, **WHO),
    ):
        refused(action, NoSuchProjectError, gone)

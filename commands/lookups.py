"""Loading the aggregates every command group starts from, with their 404s."""

from __future__ import annotations

from uuid import UUID

from icelog.commands.application import CatalogApplication
from icelog.domain.errors import NoSuchNamespaceError, NoSuchProjectError, NoSuchWarehouseError
from icelog.domain.identifiers import NamespaceName, namespace_id
from icelog.domain.namespace import Namespace
from icelog.domain.project import Project
from icelog.domain.warehouse import Warehouse


def get_project(app: CatalogApplication, project_id: UUID) -> Project:
    project = app.get_or_none(project_id, Project)
    if project is None or project.deleted:
        raise NoSuchProjectError(f"Project does not exist: {project_id}")
    return project


def get_warehouse(app: CatalogApplication, warehouse_id: UUID) -> Warehouse:
    warehouse = app.get_or_none(warehouse_id, Warehouse)
    if warehouse is None or warehouse.deleted:
        raise NoSuchWarehouseError(f"Warehouse does not exist: {warehouse_id}")
    return warehouse


def find_namespace(
    app: CatalogApplication, warehouse_id: UUID, name: NamespaceName
) -> Namespace | None:
    ns = app.get_or_none(namespace_id(warehouse_id, name), Namespace)
    return None if ns is None or ns.dropped else ns


def get_namespace(app: CatalogApplication, warehouse_id: UUID, name: NamespaceName) -> Namespace:
    ns = find_namespace(app, warehouse_id, name)
    if ns is None:
        raise NoSuchNamespaceError(f"Namespace does not exist: {name.dotted}")
    return ns


class KnownNamespaces:
    """Namespaces this process saw exist, so that a create need not read its namespace
    again (see TabularCore.existing_namespace_id); a namespace this process drops is
    forgotten before its drop is saved."""

    def __init__(self, limit: int = 100_000) -> None:
        self._known: set[tuple[UUID, NamespaceName]] = set()
        self._limit = limit

    def __contains__(self, key: tuple[UUID, NamespaceName]) -> bool:
        return key in self._known

    def add(self, key: tuple[UUID, NamespaceName]) -> None:
        if len(self._known) > self._limit:
            self._known.clear()
        self._known.add(key)

    def forget(self, key: tuple[UUID, NamespaceName]) -> None:
        self._known.discard(key)

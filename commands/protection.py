"""Protection and delete profiles: rules about what may be dropped."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from icelog.commands.idempotency import IdempotencyCommands
from icelog.commands.management import validate_delete_profile
from icelog.domain.context import RequestContext
from icelog.domain.errors import NotFoundError
from icelog.domain.identifiers import NamespaceName, TabularName
from icelog.domain.namespace import Namespace
from icelog.domain.table import Table
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse

_KINDS: dict[str, type[Table] | type[View] | type[Namespace] | type[Warehouse]] = {
    "table": Table,
    "view": View,
    "namespace": Namespace,
    "warehouse": Warehouse,
}


class ProtectionCommands(IdempotencyCommands):
    def _protectable(
        self, warehouse_id: UUID, kind: str, entity_id: UUID
    ) -> Table | View | Namespace | Warehouse:
        entity = self.get_or_none(entity_id, _KINDS[kind])
        gone = (
            entity is None or getattr(entity, "dropped", False) or getattr(entity, "deleted", False)
        )
        if entity is not None and not isinstance(entity, Warehouse):
            gone = gone or entity.warehouse_id != warehouse_id
        if gone or entity is None:
            raise NotFoundError(f"{kind.capitalize()} does not exist: {entity_id}")
        return entity

    def protection(self, warehouse_id: UUID, kind: str, entity_id: UUID) -> tuple[bool, datetime]:
        entity = self._protectable(warehouse_id, kind, entity_id)
        return entity.is_protected, entity.modified_on

    def set_protection(
        self, ctx: RequestContext, warehouse_id: UUID, kind: str, entity_id: UUID, protected: bool
    ) -> tuple[bool, datetime]:
        def attempt() -> tuple[bool, datetime]:
            entity = self._protectable(warehouse_id, kind, entity_id)
            if entity.is_protected != protected:
                entity.set_protection(protected, actor=ctx.actor, request_id=ctx.request_id)
                self.save_all(entity)
            return entity.is_protected, entity.modified_on

        return self.retrying(attempt)

    def change_delete_profile(
        self, ctx: RequestContext, warehouse_id: UUID, delete_profile: Any
    ) -> dict[str, Any]:
        profile = validate_delete_profile(delete_profile)

        def attempt() -> dict[str, Any]:
            warehouse = self.get_warehouse(warehouse_id)
            if warehouse.delete_profile != profile:
                warehouse.change_delete_profile(profile, actor=ctx.actor, request_id=ctx.request_id)
                self.save_all(warehouse)
            return profile

        return self.retrying(attempt)

    def tabular_protected(self, warehouse_id: UUID, name: TabularName, kind: str) -> bool:
        found = (
            self.find_table(warehouse_id, name)
            if kind == "table"
            else self.find_view(warehouse_id, name)
        )
        return found is not None and found.is_protected

    def namespace_protected(self, warehouse_id: UUID, name: NamespaceName) -> bool:
        found = self.find_namespace(warehouse_id, name)
        return found is not None and found.is_protected

    def namespace_name(self, warehouse_id: UUID, namespace_id: UUID) -> NamespaceName:
        """The path of a live namespace of `warehouse_id`, by its id."""
        ns = self._protectable(warehouse_id, "namespace", namespace_id)
        assert isinstance(ns, Namespace)
        return NamespaceName(tuple(ns.levels))

"""Namespace commands."""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

import orjson

from icelog.commands.application import CatalogApplication
from icelog.commands.lookups import (
    KnownNamespaces,
    find_namespace,
    get_namespace,
    get_warehouse,
)
from icelog.commands.ports import ReadPorts
from icelog.domain.context import RequestContext
from icelog.domain.errors import (
    AlreadyExistsError,
    BadRequestError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NotFoundError,
    UnprocessableEntityError,
)
from icelog.domain.identifiers import NamespaceName, namespace_id, properties_hint_key
from icelog.domain.namespace import Namespace
from icelog.domain.properties import reject_secret_properties
from icelog.domain.protection import ensure_unprotected


def not_empty_message(contents: Mapping[str, int], name: NamespaceName) -> str:
    parts = []
    labels = {
        "table": "table(s)",
        "view": "view(s)",
        "function": "function(s)",
        "namespace": "child namespace(s)",
        # Soft-dropped tabulars stay until they expire: undrop them, wait, or drop the
        # namespace recursively through the management API.
        "soft-deleted": "soft-deleted table(s) or view(s)",
    }
    for kind, label in labels.items():
        if contents.get(kind, 0) > 0:
            parts.append(f"{contents[kind]} {label}")
    return f"Namespace {name.dotted} is not empty. Contains {', '.join(parts)}."


class NamespaceCommands:
    def __init__(
        self, app: CatalogApplication, ports: ReadPorts, known_namespaces: KnownNamespaces
    ) -> None:
        self.app = app
        self.ports = ports
        self._known_namespaces = known_namespaces

    def find_namespace(self, warehouse_id: UUID, name: NamespaceName) -> Namespace | None:
        return find_namespace(self.app, warehouse_id, name)

    def get_namespace(self, warehouse_id: UUID, name: NamespaceName) -> Namespace:
        return get_namespace(self.app, warehouse_id, name)

    def namespace_name(self, warehouse_id: UUID, namespace_id: UUID) -> NamespaceName:
        """The path of a live namespace of `warehouse_id`, by its id."""
        ns = self.app.get_or_none(namespace_id, Namespace)
        if ns is None or ns.dropped or ns.warehouse_id != warehouse_id:
            raise NotFoundError(f"Namespace does not exist: {namespace_id}")
        return NamespaceName(tuple(ns.levels))

    def namespace_protected(self, warehouse_id: UUID, name: NamespaceName) -> bool:
        found = self.find_namespace(warehouse_id, name)
        return found is not None and found.is_protected

    def create_namespace(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: NamespaceName,
        properties: dict[str, str],
    ) -> Namespace:
        if not name.levels or any(not level for level in name.levels):
            raise BadRequestError("Namespace must have at least one level, none of them empty")
        reject_secret_properties(properties, "Namespace")

        def attempt() -> Namespace:
            warehouse = get_warehouse(self.app, warehouse_id)
            nid = namespace_id(warehouse_id, name)
            existing = self.app.get_or_none(nid, Namespace)
            if existing is not None and not existing.dropped:
                raise AlreadyExistsError(f"Namespace already exists: {name.dotted}")
            parent_name = name.parent
            parent = None
            if parent_name is not None:
                parent = self.find_namespace(warehouse_id, parent_name)
                if parent is None:
                    raise NoSuchNamespaceError(f"Namespace does not exist: {parent_name.dotted}")
            if existing is None:
                ns = Namespace.create(
                    namespace_id=nid,
                    warehouse_id=warehouse_id,
                    levels=name.as_list(),
                    properties=properties,
                    actor=ctx.actor,
                    request_id=ctx.request_id,
                )
            else:
                ns = existing
                ns.recreate(properties, actor=ctx.actor, request_id=ctx.request_id)
            if parent is not None:
                # The append checks that the parent still exists (ADR 0018).
                self.app.save_all(ns)
            else:
                warehouse.add_namespace(nid, actor=ctx.actor, request_id=ctx.request_id)
                self.app.save_all(ns, warehouse)
            return ns

        return self.app.retrying(attempt)

    def drop_namespace(self, ctx: RequestContext, warehouse_id: UUID, name: NamespaceName) -> None:
        def attempt() -> None:
            warehouse = get_warehouse(self.app, warehouse_id)
            ns = self.get_namespace(warehouse_id, name)
            ensure_unprotected(ns.is_protected, f"Namespace {name.dotted}")
            # The append checks again that it is empty (ADR 0018): a create that lands
            # between this read and the drop makes the drop a conflict, and the retry
            # answers 409 here.
            contents = self.ports.namespace_contents(str(warehouse_id), name.key)
            if any(contents.values()):
                raise NamespaceNotEmptyError(not_empty_message(contents, name))
            ns.drop(actor=ctx.actor, request_id=ctx.request_id)
            # No longer known to exist here: a create must read it again (and answer 404).
            self._known_namespaces.forget((warehouse_id, name))
            if name.parent is not None:
                self.app.save_all(ns)
            else:
                warehouse.remove_namespace(ns.id, actor=ctx.actor, request_id=ctx.request_id)
                self.app.save_all(ns, warehouse)

        self.app.retrying(attempt)

    def update_namespace_properties(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        name: NamespaceName,
        updates: dict[str, str],
        removals: list[str],
    ) -> tuple[list[str], list[str], list[str]]:
        """Returns (updated, removed, missing) as the REST response lists them."""
        both = sorted(set(updates) & set(removals))
        if both:
            raise UnprocessableEntityError(
                f"Properties present in both updates and removals: {', '.join(both)}"
            )
        reject_secret_properties(updates, "Namespace")

        def attempt() -> tuple[list[str], list[str], list[str]]:
            get_warehouse(self.app, warehouse_id)
            ns = self.get_namespace(warehouse_id, name)
            removed = [key for key in removals if key in ns.properties]
            missing = [key for key in removals if key not in ns.properties]
            changed = {k: v for k, v in updates.items() if ns.properties.get(k) != v}
            if changed or removed:
                ns.update_properties(changed, removed, actor=ctx.actor, request_id=ctx.request_id)
                self.app.save_all(
                    ns, hints={properties_hint_key(ns.id): orjson.dumps(ns.properties)}
                )
            return sorted(updates), removed, missing

        return self.app.retrying(attempt)

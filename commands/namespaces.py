"""Namespace commands."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from uuid import UUID

import orjson

from icelog.commands.management import ManagementCommands
from icelog.domain.context import RequestContext
from icelog.domain.errors import (
    AlreadyExistsError,
    BadRequestError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
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


class NamespaceCommands(ManagementCommands):
    # What a namespace holds, by kind (table, view, function, namespace, soft-deleted),
    # from the read model on the primary; replaced by the composition root.
    namespace_contents: Callable[[str, str], dict[str, int]] = staticmethod(
        lambda _warehouse_id, _ns_key: {}
    )

    def find_namespace(self, warehouse_id: UUID, name: NamespaceName) -> Namespace | None:
        ns = self.get_or_none(namespace_id(warehouse_id, name), Namespace)
        return None if ns is None or ns.dropped else ns

    def get_namespace(self, warehouse_id: UUID, name: NamespaceName) -> Namespace:
        ns = self.find_namespace(warehouse_id, name)
        if ns is None:
            raise NoSuchNamespaceError(f"Namespace does not exist: {name.dotted}")
        return ns

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
            warehouse = self.get_warehouse(warehouse_id)
            nid = namespace_id(warehouse_id, name)
            existing = self.get_or_none(nid, Namespace)
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
                self.save_all(ns)
            else:
                warehouse.add_namespace(nid, actor=ctx.actor, request_id=ctx.request_id)
                self.save_all(ns, warehouse)
            return ns

        return self.retrying(attempt)

    def drop_namespace(self, ctx: RequestContext, warehouse_id: UUID, name: NamespaceName) -> None:
        def attempt() -> None:
            warehouse = self.get_warehouse(warehouse_id)
            ns = self.get_namespace(warehouse_id, name)
            ensure_unprotected(ns.is_protected, f"Namespace {name.dotted}")
            # The append checks again that it is empty (ADR 0018): a create that lands
            # between this read and the drop makes the drop a conflict, and the retry
            # answers 409 here.
            contents = self.namespace_contents(str(warehouse_id), name.key)
            if any(contents.values()):
                raise NamespaceNotEmptyError(not_empty_message(contents, name))
            ns.drop(actor=ctx.actor, request_id=ctx.request_id)
            if name.parent is not None:
                self.save_all(ns)
            else:
                warehouse.remove_namespace(ns.id, actor=ctx.actor, request_id=ctx.request_id)
                self.save_all(ns, warehouse)

        self.retrying(attempt)

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
            self.get_warehouse(warehouse_id)
            ns = self.get_namespace(warehouse_id, name)
            removed = [key for key in removals if key in ns.properties]
            missing = [key for key in removals if key not in ns.properties]
            changed = {k: v for k, v in updates.items() if ns.properties.get(k) != v}
            if changed or removed:
                ns.update_properties(changed, removed, actor=ctx.actor, request_id=ctx.request_id)
                self.save_all(ns, hints={properties_hint_key(ns.id): orjson.dumps(ns.properties)})
            return sorted(updates), removed, missing

        return self.retrying(attempt)

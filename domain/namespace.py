"""Namespaces (nested) and their properties."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

from eventsourcing.domain import Aggregate

from icelog.domain import protection
from icelog.domain.attributed import AttributedEvent, fixed
from icelog.domain.errors import AlreadyExistsError, NoSuchNamespaceError
from icelog.domain.protection import Protectable, ensure_unprotected
from icelog.domain.removal import Removable

CHILD_KINDS = ("namespace", "table", "view")


class _ChildCounted(AttributedEvent):
    """The body of `ChildAdded` and `ChildRemoved`: one child of `child_kind` more or
    fewer (`STEP`)."""

    child_kind: str
    child_id: UUID

    STEP: ClassVar[int]

    def apply(self, aggregate: Any) -> None:
        children = aggregate.children
        aggregate.children = {
            **children,
            self.child_kind: children.get(self.child_kind, 0) + self.STEP,
        }


class Namespace(Protectable, Removable, Aggregate):
    """A namespace. Its id is derived from (warehouse, path), so a dropped namespace that is
    created again continues the same stream (`Recreated`).

    What a namespace holds is not counted here any more: the append itself refuses a
    child in a namespace that is gone and the drop of a namespace that holds something
    (ADR 0018). `ChildAdded` / `ChildRemoved` are no longer appended; they stay so that
    logs holding them replay (`children` is folded from them and read by nothing).
    """

    TOPIC = "icelog.namespace"
    NOT_FOUND = NoSuchNamespaceError

    class Event(AttributedEvent):
        TOPIC = "icelog.namespace.event.v1"

    class Created(Event, Aggregate.Created):
        """`createNamespace` (`POST …/namespaces`) for a path that never existed in the warehouse.
        Appended with `warehouse.namespace-added` (top level); a nested one's append checks that its
        parent still exists (ADR 0018).

        Data fields:
            levels: The namespace path, e.g. `["sales", "eu"]`.
            properties: Its properties.
        """

        TOPIC = "icelog.namespace.created.v1"
        warehouse_id: UUID
        levels: list[str]
        properties: dict[str, str]

        COPIES = ("warehouse_id", "levels", "properties")
        SETS = fixed(dropped=False)

        def apply(self, aggregate: Any) -> None:
            super().apply(aggregate)
            aggregate.children = dict.fromkeys(CHILD_KINDS, 0)

    class Recreated(Event):
        """`createNamespace` for a path that existed before and was dropped: the stream of the old
        namespace continues (same id), with fresh properties and no children.

        Data fields:
            levels: The namespace path.
            properties: Its properties (nothing of the dropped namespace's).
        """

        TOPIC = "icelog.namespace.recreated.v1"
        warehouse_id: UUID
        levels: list[str]
        properties: dict[str, str]

        COPIES = ("properties",)
        SETS = fixed(dropped=False)

        def apply(self, aggregate: Any) -> None:
            super().apply(aggregate)
            aggregate.children = dict.fromkeys(CHILD_KINDS, 0)

    class PropertiesUpdated(Event):
        """`updateProperties` (`POST …/namespaces/{ns}/properties`) changed something (a request
        that changes nothing appends nothing).

        Data fields:
            updated: Properties set: new keys and changed values only.
            removed: Keys that were present and are now gone.
        """

        TOPIC = "icelog.namespace.properties-updated.v1"
        updated: dict[str, str]
        removed: list[str]

        def apply(self, aggregate: Any) -> None:
            props = dict(aggregate.properties)
            for key in self.removed:
                props.pop(key, None)
            props.update(self.updated)
            aggregate.properties = props

    class ChildAdded(Event, _ChildCounted):
        """Bookkeeping, written before ADR 0018 (logs that hold it still replay): a table, view,
        function or sub-namespace came to live in this namespace (created, registered, renamed into
        it, undropped), or a soft-dropped table or view was set aside in it (`child-kind`
        `soft-deleted`). What a namespace holds is now checked in the append of the child's own
        event and of the namespace's drop.

        Data fields:
            child-kind: `namespace`, `table`, `view` or `soft-deleted`.
            child-id: The child's id.
        """

        TOPIC = "icelog.namespace.child-added.v1"

        STEP = 1

    class ChildRemoved(Event, _ChildCounted):
        """Bookkeeping, written before ADR 0018: the reverse of `child-added` (the child was
        dropped, renamed away, soft-dropped, undropped or expired).

        Data fields:
            child-kind: `namespace`, `table`, `view` or `soft-deleted`.
            child-id: The child's id.
        """

        TOPIC = "icelog.namespace.child-removed.v1"

        STEP = -1

    class Dropped(Event):
        """`dropNamespace` (`DELETE …/namespaces/{ns}`, or the management API by id): an empty
        namespace was dropped; with `?recursive=true` after everything inside was.
        """

        TOPIC = "icelog.namespace.dropped.v1"
        SETS = fixed(dropped=True)

    class ProtectionChanged(Event, protection.ProtectionChanged):
        """Protection switched on or off (`…/namespace/{namespace-id}/protection`). A protected
        namespace cannot be dropped.
        """

        TOPIC = "icelog.namespace.protection-changed.v1"

    # State is set by the events' apply(); declared for type checkers only, because
    # class annotations would make the library generate an __init__ from them.
    if TYPE_CHECKING:
        warehouse_id: UUID
        levels: list[str]
        properties: dict[str, str]
        children: dict[str, int]
        dropped: bool

    @classmethod
    def create(cls, *, namespace_id: UUID, **fields: Any) -> Namespace:
        """Create one; `fields` as on `Created`."""
        return cls._create(cls.Created, id=namespace_id, **fields)

    @property
    def dotted(self) -> str:
        """The namespace's name as Iceberg messages print it (`a.b`)."""
        return ".".join(self.levels)

    @property
    def label(self) -> str:
        return self.dotted

    # -- commands --------------------------------------------------------------------------
    def recreate(self, properties: dict[str, str], *, actor: str, request_id: str) -> None:
        # Only a dropped namespace is created again (its id is derived from its name).
        if not self.dropped:
            raise AlreadyExistsError(f"Namespace already exists: {self.dotted}")
        self.trigger_event(
            self.Recreated,
            warehouse_id=self.warehouse_id,
            levels=self.levels,
            properties=properties,
            actor=actor,
            request_id=request_id,
        )

    def update_properties(
        self, updated: dict[str, str], removed: list[str], *, actor: str, request_id: str
    ) -> None:
        self._change(
            self.PropertiesUpdated,
            updated=updated,
            removed=removed,
            actor=actor,
            request_id=request_id,
        )

    def drop(self, *, actor: str, request_id: str) -> None:
        self.ensure_live()
        ensure_unprotected(self.is_protected, f"Namespace {self.dotted}")
        self.trigger_event(self.Dropped, actor=actor, request_id=request_id)

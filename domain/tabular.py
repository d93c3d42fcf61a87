"""The tabular core: what tables and views share, events and rules.

A table and a view are both a name in a warehouse namespace pointing at a metadata
file; both are created or registered, changed by appending updates, renamed, dropped
(hard, or soft: set aside until an expiration task makes the drop final, undroppable
meanwhile) and protected. This module holds those events' bodies and the rules that
guard them; `Table` and `View` add what only one of them has (purge and unregister,
commit vs replace) and give every event class its own topic. A function (domain/function.py)
is placed the same way and shares the first event's body.

The shared event bodies are plain module-level classes, not classes nested in an
aggregate: the library re-creates in each subclass every event class nested in an
aggregate base that the subclass does not define itself, and such a copy has no topic
of its own. Each concrete event (`Table.Renamed`, `View.Renamed`, ...) derives from
its aggregate's `Event` first and the shared body second, which keeps its fields in
the order they have always been stored in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

from eventsourcing.domain import Aggregate

from icelog.domain.attributed import AttributedEvent, fixed
from icelog.domain.errors import ConflictError
from icelog.domain.locations import location_set_by, normalize_location
from icelog.domain.metadata_rules import CURRENT, LEGACY
from icelog.domain.protection import Protectable, ensure_unprotected
from icelog.domain.removal import Removable


class NotSoftDeletedError(ConflictError, error_type="NotSoftDeletedException"): ...


class TabularEvent(AttributedEvent):
    """A table's, view's or function's event."""


class Placed(TabularEvent, Aggregate.Created):
    """The first event of a name in a namespace pointing at metadata files (a table, view
    or function, created or registered): its place, and its first metadata document,
    written to `metadata_location`."""

    warehouse_id: UUID
    namespace_id: UUID
    namespace: list[str]
    name: str
    location: str
    metadata_location: str
    metadata: dict[str, Any]

    COPIES = ("warehouse_id", "namespace_id", "namespace", "name", "location", "metadata_location")
    SETS = fixed(dropped=False)

    def apply(self, aggregate: Any) -> None:
        super().apply(aggregate)
        self.place_more(aggregate)

    def place_more(self, aggregate: Any) -> None:
        """What a kind sets beyond the shared state."""


class TabularPlaced(Placed):
    """A table's or view's first event."""

    # The creating event of a tabular registered from a client's metadata file.
    registers: ClassVar[bool] = False

    def place_more(self, aggregate: Any) -> None:
        # A registered file is the client's, not the catalog's: it may change after the
        # register, so the logged document is the tabular's first state, not the file.
        aggregate.registered_location = self.metadata_location if self.registers else None


class Changed(TabularEvent):
    """`updates` were applied at `applied_at_ms` to the metadata at
    `previous_metadata_location`, producing `metadata_location`."""

    requirements: list[dict[str, Any]]
    updates: list[dict[str, Any]]
    previous_metadata_location: str
    metadata_location: str
    applied_at_ms: int
    # The metadata rules the updates were applied under (domain/metadata_rules.py):
    # a replay applies the same ones. Events from before the field are rules 1.
    rules: int

    class_version = 2

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["rules"] = LEGACY

    def apply(self, aggregate: Any) -> None:
        aggregate.metadata_location = self.metadata_location
        moved = location_set_by(self.updates)
        if moved is not None:  # purge and undrop act on where the tabular is now
            aggregate.location = normalize_location(moved)


class Moved(TabularEvent):
    """Renamed or undropped: from `from_namespace`.`from_name` to `namespace`.`name`.

    Data fields:
        namespace-id: Id of the namespace it is in now.
        namespace: Namespace levels now.
        name: Name now.
    """

    from_namespace: list[str]
    from_name: str
    namespace_id: UUID
    namespace: list[str]
    name: str

    COPIES = ("namespace_id", "namespace", "name")


class Dropped(TabularEvent):
    SETS = fixed(dropped=True)


class SoftDropped(TabularEvent):
    """Dropped in a soft-delete warehouse: kept until `expires_at_ms`, when task
    `expiration_task_id` makes the drop final."""

    deleted_at_ms: int
    expiration_seconds: int
    expires_at_ms: int
    expiration_task_id: UUID

    COPIES = ("deleted_at_ms", "expires_at_ms", "expiration_task_id")
    SETS = fixed(dropped=True, soft_deleted=True)

    def apply(self, aggregate: Any) -> None:
        super().apply(aggregate)
        # A view's soft drop carries no purge_requested field.
        aggregate.purge_requested = bool(getattr(self, "purge_requested", False))


class Undropped(Moved):
    """A soft-dropped tabular restored.

    Data fields:
        namespace: Namespace levels it is restored into (the one it was dropped from).
        name: Name it is restored under.
        from-namespace: Namespace levels when it was dropped.
        from-name: Name when it was dropped.
    """

    SETS = fixed(dropped=False, soft_deleted=False, expiration_task_id=None)


class Expired(TabularEvent):
    """A soft drop became final (`reason`: "expired" or "dropped" by a recursive
    namespace drop); `purge_task_id` is the purge that follows, if requested."""

    reason: str
    purge_task_id: UUID | None

    SETS = fixed(soft_deleted=False, expiration_task_id=None)


class PlacedState(Removable):
    """What a `Placed` event sets: a table's, view's or function's name and place. Declared
    for type checkers only, because class annotations would make the library generate an
    __init__ from them."""

    if TYPE_CHECKING:
        warehouse_id: UUID
        namespace_id: UUID
        namespace: list[str]
        name: str
        location: str
        metadata_location: str
        dropped: bool

    @property
    def dotted(self) -> str:
        """The name as Iceberg messages print it (`a.b.t`)."""
        return ".".join([*self.namespace, self.name])

    @property
    def label(self) -> str:
        return self.dotted


class Tabular(PlacedState, Protectable, Aggregate):
    """Base of `Table` and `View`: the shared commands, each checking its rule before
    it triggers its event (a dropped tabular is not changed, renamed or dropped again;
    a protected one is not dropped; only a soft-dropped one is undropped or expired)."""

    # State is set by the events' apply(); declared for type checkers only, because
    # class annotations would make the library generate an __init__ from them.
    if TYPE_CHECKING:
        # The kind's one `Changed` event (a table's commit, a view's replace).
        CHANGE_EVENT: ClassVar[type[Changed]]
        Renamed: Any
        SoftDropped: Any
        Undropped: Any
        Expired: Any

        soft_deleted: bool
        deleted_at_ms: int
        expires_at_ms: int
        expiration_task_id: UUID | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        changes = [
            event
            for event in vars(cls).values()
            if isinstance(event, type) and issubclass(event, Changed)
        ]
        if changes:
            (cls.CHANGE_EVENT,) = changes

    @property
    def is_soft_deleted(self) -> bool:
        # Aggregates (and snapshots) from before soft deletion existed have no attribute.
        return bool(getattr(self, "soft_deleted", False))

    @property
    def pending_expiration(self) -> UUID | None:
        found = getattr(self, "expiration_task_id", None)
        return found if isinstance(found, UUID) else None

    # -- rules -----------------------------------------------------------------------------
    # A dropped tabular (soft-dropped, expired or purged included) is gone under its name:
    # `ensure_live` (from Removable) answers it as one that does not exist.
    def ensure_droppable(self) -> None:
        self.ensure_live()
        ensure_unprotected(self.is_protected, f"{self.KIND} {self.dotted}")

    def ensure_soft_deleted(self) -> None:
        if not self.is_soft_deleted:
            raise NotSoftDeletedError(f"{self.dotted} is not dropped")

    # -- commands --------------------------------------------------------------------------
    def record_change(self, **change: Any) -> None:
        """The next metadata document: a table's commit, a view's replace (each kind names
        its `Changed` event); `change` as on `Changed`, but for what the tabular knows
        itself (the previous location, the current rules)."""
        self._change(
            self.CHANGE_EVENT,
            previous_metadata_location=self.metadata_location,
            rules=CURRENT,
            **change,
        )

    def rename(self, **place: Any) -> None:
        """Move under a new name; `place` as on `Moved`, but for where it is now."""
        self.ensure_live()
        self._move(self.Renamed, place)

    def _move(self, event_class: Any, place: dict[str, Any]) -> None:
        self.trigger_event(
            event_class, from_namespace=list(self.namespace), from_name=self.name, **place
        )

    def soft_drop(
        self,
        *,
        deleted_at_ms: int,
        expiration_seconds: int,
        expiration_task_id: UUID,
        actor: str,
        request_id: str,
        **extra: Any,
    ) -> None:
        self.ensure_droppable()
        self.trigger_event(
            self.SoftDropped,
            deleted_at_ms=deleted_at_ms,
            expiration_seconds=expiration_seconds,
            expires_at_ms=deleted_at_ms + expiration_seconds * 1000,
            expiration_task_id=expiration_task_id,
            actor=actor,
            request_id=request_id,
            **extra,
        )

    def undrop(self, **place: Any) -> None:
        """Bring a soft-dropped one back; `place` as `rename` takes it."""
        self.ensure_soft_deleted()
        self._move(self.Undropped, place)

    def expire(self, **fields: Any) -> None:
        """Make a soft drop final; `fields` as on `Expired`: `reason` is "expired" (its
        delay passed) or "dropped" (a recursive drop of its namespace removed it early);
        `purge_task_id` names the purge that follows, if one was requested."""
        self.ensure_soft_deleted()
        self.trigger_event(self.Expired, **fields)

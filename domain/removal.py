"""Removal: an aggregate that is gone once dropped or deleted.

Namespaces, tables, views, functions, warehouses and projects share one rule: once the
event that removes them is applied, nothing changes them any more and they answer as
ones that do not exist. Each says which flag its removal sets and which error a client
gets; the rule is written here once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

from icelog.domain.errors import NotFoundError


class Removable:
    """Mixin for the aggregates that can be dropped or deleted."""

    # The state flag the removing event sets: "dropped" or "deleted".
    REMOVED_FLAG = "dropped"

    # Declared for type checkers only: annotations on an aggregate's bases would make the
    # library generate an __init__ from them.
    if TYPE_CHECKING:
        id: UUID
        trigger_event: Any
        # How messages name the kind: the class's name ("Table", "Namespace", ...).
        KIND: ClassVar[str]
        # Raised for one that no longer exists.
        NOT_FOUND: ClassVar[type[NotFoundError]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.KIND = cls.__name__

    @property
    def is_removed(self) -> bool:
        return bool(getattr(self, self.REMOVED_FLAG))

    @property
    def label(self) -> str:
        """How a not-found message names it: by id unless it has a name that stays."""
        return str(self.id)

    def ensure_live(self) -> None:
        if self.is_removed:
            raise self.NOT_FOUND(f"{self.KIND} does not exist: {self.label}")

    def _change(self, event_class: Any, **fields: Any) -> None:
        """Trigger a change, after the rule every change of a removable one checks."""
        self.ensure_live()
        self.trigger_event(event_class, **fields)

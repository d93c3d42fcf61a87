"""Protection: a protected table, view, namespace or warehouse is never dropped."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

from icelog.domain.attributed import AttributedEvent
from icelog.domain.errors import ConflictError, NotFoundError


class ProtectedError(ConflictError, error_type="ProtectedException"):
    """409 until the protection is removed."""


class ProtectionChanged(AttributedEvent):
    """The body of every kind's `ProtectionChanged` event: protection switched on or off.
    Module-level, so each kind's event (derived from its `Event` first) keeps its topic."""

    protected: bool
    COPIES = ("protected",)


def ensure_unprotected(protected: bool, what: str) -> None:
    if protected:
        raise ProtectedError(f"{what} is protected; remove the protection to drop it")


class Protectable:
    """Mixin for the aggregates that can be protected; each defines its own
    `ProtectionChanged` event class (with its own topic)."""

    # Declared for type checkers only: annotations on an aggregate's bases would make the
    # library generate an __init__ from them.
    if TYPE_CHECKING:
        ProtectionChanged: Any
        trigger_event: Any
        id: UUID
        # How messages name the kind ("Table", "Namespace", ...).
        KIND: ClassVar[str]

    @property
    def is_protected(self) -> bool:
        # Aggregates (and snapshots) from before protections existed have no attribute.
        return bool(getattr(self, "protected", False))

    def set_protection(self, protected: bool, *, actor: str, request_id: str) -> None:
        # A dropped or deleted one is gone: there is nothing left to protect.
        if getattr(self, "dropped", False) or getattr(self, "deleted", False):
            raise NotFoundError(f"{self.KIND} does not exist: {self.id}")
        self.trigger_event(
            self.ProtectionChanged, protected=protected, actor=actor, request_id=request_id
        )

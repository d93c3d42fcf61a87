"""Protection: a protected table, view, namespace or warehouse is never dropped."""

from __future__ import annotations

from typing import Any

from icelog.domain.errors import ConflictError


class ProtectedError(ConflictError):
    """409 until the protection is removed."""

    error_type = "ProtectedException"


def ensure_unprotected(protected: bool, what: str) -> None:
    if protected:
        raise ProtectedError(f"{what} is protected; remove the protection to drop it")


class Protectable:
    """Mixin for the aggregates that can be protected; each defines its own
    `ProtectionChanged` event class (with its own topic)."""

    ProtectionChanged: Any
    trigger_event: Any

    @property
    def is_protected(self) -> bool:
        # Aggregates (and snapshots) from before protections existed have no attribute.
        return bool(getattr(self, "protected", False))

    def set_protection(self, protected: bool, *, actor: str, request_id: str) -> None:
        self.trigger_event(
            self.ProtectionChanged, protected=protected, actor=actor, request_id=request_id
        )

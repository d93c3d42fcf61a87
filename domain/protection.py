"""Protection: a protected table, view, namespace or warehouse is never dropped."""

from __future__ import annotations

from domain.errors import ConflictError


class ProtectedError(ConflictError):
    """409 until the protection is removed."""

    error_type = "ProtectedException"


def ensure_unprotected(protected: bool, what: str) -> None:
    if protected:
        raise ProtectedError(f"{what} is protected; remove the protection to drop it")

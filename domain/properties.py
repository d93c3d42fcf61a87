"""Property rules shared by namespaces and tables."""

from __future__ import annotations

from icelog.domain.errors import BadRequestError

# Keys that name credentials. Such values would land in the append-only log, readable
# by every auditor and consumer forever, so they are refused instead of stored.
_SECRET_MARKERS = ("secret", "password", "session-token", "access-key-id", "sas-token")


def reject_secret_properties(properties: dict[str, str], what: str) -> None:
    """Raise 400 when a property key looks like a credential."""
    for key in properties:
        lowered = key.lower()
        if any(marker in lowered for marker in _SECRET_MARKERS):
            raise BadRequestError(
                f"{what} property '{key}' looks like a credential; icelog never stores "
                "secrets in the catalog log"
            )


def require_string_map(value: object, what: str) -> dict[str, str]:
    """Validate a JSON object of string keys and string values."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise BadRequestError(f"{what} must be an object of string keys and string values")
    return dict(value)

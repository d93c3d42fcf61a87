"""Catalog errors, each carrying the Iceberg REST error `type` and HTTP status.

The REST layer turns any :class:`CatalogError` into the spec's ErrorModel
(`{"error": {"message", "type", "code"}}`). The `type` strings are the Java
exception simple names, because the Java client picks the exception it throws
from them (see reference/iceberg-rest.md §4).
"""

from __future__ import annotations

from typing import Any


class CatalogError(Exception):
    """Base class: a client-visible failure with an Iceberg error type."""

    status: int = 500
    error_type: str = "InternalServerError"

    def __init_subclass__(cls, *, error_type: str = "", status: int = 0, **kwargs: Any) -> None:
        # Each error says its type (and its status, unless its base's) in its class line.
        super().__init_subclass__(**kwargs)
        if error_type:
            cls.error_type = error_type
        if status:
            cls.status = status

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequestError(CatalogError, error_type="BadRequestException", status=400): ...


class IllegalArgumentError(BadRequestError, error_type="IllegalArgumentException"):
    """400 whose type Java rethrows as IllegalArgumentException."""


class ValidationError(BadRequestError, error_type="ValidationException"):
    """400 for metadata that fails Iceberg validation."""


class ForbiddenError(CatalogError, error_type="ForbiddenException", status=403): ...


class NotFoundError(CatalogError, error_type="NotFoundException", status=404): ...


class NoSuchNamespaceError(NotFoundError, error_type="NoSuchNamespaceException"): ...


class NoSuchTableError(NotFoundError, error_type="NoSuchTableException"): ...


class NoSuchViewError(NotFoundError, error_type="NoSuchViewException"): ...


class NoSuchFunctionError(NotFoundError, error_type="NoSuchFunctionException"): ...


class NoSuchWarehouseError(NotFoundError, error_type="NoSuchWarehouseException"): ...


class NoSuchProjectError(NotFoundError, error_type="NoSuchProjectException"): ...


class NoSuchRoleError(NotFoundError, error_type="NoSuchRoleException"): ...


class NoSuchUserError(NotFoundError, error_type="NoSuchUserException"): ...


class UnsupportedOperationError(
    CatalogError, error_type="UnsupportedOperationException", status=406
): ...


class ConflictError(CatalogError, error_type="ConflictException", status=409): ...


class AlreadyExistsError(ConflictError, error_type="AlreadyExistsException"): ...


class NamespaceNotEmptyError(ConflictError, error_type="NamespaceNotEmptyException"): ...


class NotEmptyError(ConflictError, error_type="NotEmptyException"):
    """A project or warehouse that still holds children cannot be deleted."""


class CommitFailedError(ConflictError, error_type="CommitFailedException"):
    """A requirement no longer holds; clients refresh and retry."""


class UnprocessableEntityError(
    CatalogError, error_type="UnprocessableEntityException", status=422
): ...


class GoneError(CatalogError, error_type="GoneException", status=410):
    """What was asked for lies outside what is kept (the events API's retention window)."""


class CommitStateUnknownError(CatalogError, error_type="CommitStateUnknownException", status=500):
    """The commit may or may not have landed; clients must not clean up."""


class ServiceUnavailableError(
    CatalogError, error_type="ServiceUnavailableException", status=503
): ...


class NothingAppendedError(ServiceUnavailableError):
    """A storage failure that proves the append did not happen (a lock wait that ran out
    before the insert): the command's files can go, and a retry is safe."""


class LocationTakenError(ConflictError, error_type="LocationAlreadyTakenException"):
    """A table location equals, contains or lies inside another live table's location."""

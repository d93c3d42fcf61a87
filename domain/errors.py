"""Catalog errors, each carrying the Iceberg REST error `type` and HTTP status.

The REST layer turns any :class:`CatalogError` into the spec's ErrorModel
(`{"error": {"message", "type", "code"}}`). The `type` strings are the Java
exception simple names, because the Java client picks the exception it throws
from them (see reference/iceberg-rest.md §4).
"""

from __future__ import annotations


class CatalogError(Exception):
    """Base class: a client-visible failure with an Iceberg error type."""

    status: int = 500
    error_type: str = "InternalServerError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequestError(CatalogError):
    status = 400
    error_type = "BadRequestException"


class IllegalArgumentError(BadRequestError):
    """400 whose type Java rethrows as IllegalArgumentException."""

    error_type = "IllegalArgumentException"


class ValidationError(BadRequestError):
    """400 for metadata that fails Iceberg validation."""

    error_type = "ValidationException"


class ForbiddenError(CatalogError):
    status = 403
    error_type = "ForbiddenException"


class NotFoundError(CatalogError):
    status = 404
    error_type = "NotFoundException"


class NoSuchNamespaceError(NotFoundError):
    error_type = "NoSuchNamespaceException"


class NoSuchTableError(NotFoundError):
    error_type = "NoSuchTableException"


class NoSuchViewError(NotFoundError):
    error_type = "NoSuchViewException"


class NoSuchFunctionError(NotFoundError):
    error_type = "NoSuchFunctionException"


class NoSuchWarehouseError(NotFoundError):
    error_type = "NoSuchWarehouseException"


class NoSuchProjectError(NotFoundError):
    error_type = "NoSuchProjectException"


class NoSuchRoleError(NotFoundError):
    error_type = "NoSuchRoleException"


class NoSuchUserError(NotFoundError):
    error_type = "NoSuchUserException"


class UnsupportedOperationError(CatalogError):
    status = 406
    error_type = "UnsupportedOperationException"


class ConflictError(CatalogError):
    status = 409
    error_type = "ConflictException"


class AlreadyExistsError(ConflictError):
    error_type = "AlreadyExistsException"


class NamespaceNotEmptyError(ConflictError):
    error_type = "NamespaceNotEmptyException"


class NotEmptyError(ConflictError):
    """A project or warehouse that still holds children cannot be deleted."""

    error_type = "NotEmptyException"


class CommitFailedError(ConflictError):
    """A requirement no longer holds; clients refresh and retry."""

    error_type = "CommitFailedException"


class UnprocessableEntityError(CatalogError):
    status = 422
    error_type = "UnprocessableEntityException"


class GoneError(CatalogError):
    """What was asked for lies outside what is kept (the events API's retention window)."""

    status = 410
    error_type = "GoneException"


class CommitStateUnknownError(CatalogError):
    """The commit may or may not have landed; clients must not clean up."""

    status = 500
    error_type = "CommitStateUnknownException"


class ServiceUnavailableError(CatalogError):
    status = 503
    error_type = "ServiceUnavailableException"


class NothingAppendedError(ServiceUnavailableError):
    """A storage failure that proves the append did not happen (a lock wait that ran out
    before the insert): the command's files can go, and a retry is safe."""


class LocationTakenError(ConflictError):
    """A table location equals, contains or lies inside another live table's location."""

    error_type = "LocationAlreadyTakenException"

"""Identifiers and the derived ids that make names unique.

Claim ids are uuid5 values derived from (warehouse, kind space, full name):
two concurrent creates of one name build the same aggregate id and collide on
version 1 in the event store, so uniqueness needs no lock and no read model.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID, uuid5

from icelog.domain.errors import BadRequestError

NIL_UUID = UUID(int=0)
# Fixed namespace for every derived id; changing it would orphan stored claims.
ICELOG_NAMESPACE = UUID("6b0f3c1e-5d3a-4c8e-9a57-1c2f0e4b7d21")
SEPARATOR = "\x1f"


def reject_control_characters(value: str, what: str) -> str:
    """Names and locations are stored as text: NUL cannot be stored by PostgreSQL at all,
    and 0x1F is the namespace separator. Refuse both (400) on every backend alike."""
    if "\x00" in value or SEPARATOR in value:
        raise BadRequestError(f"{what} must not contain the characters 0x00 or 0x1F")
    return value


@dataclass(frozen=True, order=True)
class NamespaceName:
    """A namespace path: one or more levels, each a non-empty string."""

    levels: tuple[str, ...]

    def __post_init__(self) -> None:
        for level in self.levels:
            reject_control_characters(level, "A namespace level")

    @property
    def key(self) -> str:
        """Storage key: the levels joined with the unit separator."""
        return SEPARATOR.join(self.levels)

    @property
    def dotted(self) -> str:
        """How Iceberg messages print a namespace (`a.b`)."""
        return ".".join(self.levels)

    @property
    def parent(self) -> NamespaceName | None:
        return NamespaceName(self.levels[:-1]) if len(self.levels) > 1 else None

    @classmethod
    def from_key(cls, key: str) -> NamespaceName:
        return cls(tuple(key.split(SEPARATOR)))

    def as_list(self) -> list[str]:
        return list(self.levels)


@dataclass(frozen=True)
class TabularName:
    """A table or view name inside a namespace."""

    namespace: NamespaceName
    name: str

    def __post_init__(self) -> None:
        reject_control_characters(self.name, "A table or view name")

    @property
    def dotted(self) -> str:
        return f"{self.namespace.dotted}.{self.name}"


def namespace_id(warehouse_id: UUID, namespace: NamespaceName) -> UUID:
    """Namespace aggregate id: one aggregate per (warehouse, path), reused on re-create."""
    return uuid5(ICELOG_NAMESPACE, f"namespace:{warehouse_id}:{namespace.key}")


def tabular_claim_id(warehouse_id: UUID, name: TabularName) -> UUID:
    """Name claim for tables AND views: they share one identifier space (spec)."""
    return uuid5(
        ICELOG_NAMESPACE, f"tabular:{warehouse_id}:{name.namespace.key}{SEPARATOR}{name.name}"
    )


def function_claim_id(warehouse_id: UUID, name: TabularName) -> UUID:
    """Name claim for functions: their own identifier space in a namespace (a table and a
    function may share a name, as in SQL)."""
    return uuid5(
        ICELOG_NAMESPACE, f"function:{warehouse_id}:{name.namespace.key}{SEPARATOR}{name.name}"
    )


def warehouse_claim_id(project_id: UUID, name: str) -> UUID:
    """Warehouse names are unique per project."""
    return uuid5(ICELOG_NAMESPACE, f"warehouse:{project_id}:{name}")


SERVER_ID = uuid5(ICELOG_NAMESPACE, "server")


def user_aggregate_id(user_id: str) -> UUID:
    """One stream per user id (`oidc~<subject>`): a first call that provisions the user twice
    at once appends the same (id, version) twice, and the store keeps one."""
    return uuid5(ICELOG_NAMESPACE, f"user:{user_id}")


PROPERTIES_HINT_PREFIX = "namespace-properties:"


def properties_hint_key(namespace_uuid: UUID) -> str:
    """Key under which a command hands the new namespace properties to the inline projection."""
    return f"{PROPERTIES_HINT_PREFIX}{namespace_uuid}"

"""SQL that filters a list to what principals may see, by their grants (docs/auth.md):
list queries filter inside the query instead of checking each row after."""

from __future__ import annotations

from icelog.domain.identifiers import SEPARATOR
from icelog.domain.permissions import NAVIGATING

_RELATIONS = tuple(sorted(NAVIGATING))


def held(principal_ids: list[str]) -> tuple[str, tuple[str, ...]]:
    """SQL on grant row `g`: one of these principals holds it, and it is of a relation that
    lets its holder see its object (`NAVIGATING`) — what makes the way to it navigable."""
    marks = ", ".join("?" for _ in principal_ids)
    relations = ", ".join("?" for _ in _RELATIONS)
    clause = f"g.principal_id IN ({marks}) AND g.relation IN ({relations})"
    return clause, (*principal_ids, *_RELATIONS)


def navigable(principal_ids: list[str]) -> tuple[str, tuple[str, ...]]:
    """SQL on namespace row `n`: the principals hold a `NAVIGATING` grant on it, on a
    namespace inside it, or on a table or view inside it. Prefixes compare by `substr`, not
    LIKE, so that `%` and `_` in names mean nothing."""
    held_by, params = held(principal_ids)
    inside = "(d.ns_key = n.ns_key OR substr(d.ns_key, 1, length(n.ns_key) + 1) = n.ns_key || ?)"
    clause = (
        "(EXISTS (SELECT 1 FROM icelog_grants g JOIN icelog_namespaces d ON d.id = g.object_id "
        f"WHERE d.warehouse_id = n.warehouse_id AND {inside} AND {held_by}) "
        "OR EXISTS (SELECT 1 FROM icelog_grants g JOIN icelog_tabulars d ON d.id = g.object_id "
        f"WHERE d.warehouse_id = n.warehouse_id AND {inside} AND {held_by}))"
    )
    return clause, (SEPARATOR, *params, SEPARATOR, *params)

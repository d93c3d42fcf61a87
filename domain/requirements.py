"""Commit requirements (Java `UpdateRequirement.validate`), reference/iceberg-rest.md §3.1.

Failures raise `CommitFailedError` with Java's exact `Requirement failed: ...`
messages: the Java client and the RCK match them textually.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from icelog.domain.errors import BadRequestError, CommitFailedError
from icelog.domain.metadata_state import Metadata, refs_of

_Check = Callable[[Metadata, dict[str, Any]], None]


def _show(value: Any) -> str:
    # Java's String.format prints null, not None.
    return "null" if value is None else str(value)


def _field(requirement: dict[str, Any], key: str) -> Any:
    if key not in requirement:
        raise BadRequestError(
            f"Cannot parse {requirement.get('type')} requirement: missing field {key}"
        )
    return requirement[key]


def _check_create(base: Metadata | None, _req: dict[str, Any]) -> None:
    if base is not None:
        raise CommitFailedError("Requirement failed: table already exists")


def _check_uuid(base: Metadata, req: dict[str, Any]) -> None:
    expected = _field(req, "uuid")
    current = base.get("table-uuid")
    if not isinstance(expected, str) or current is None or current.lower() != expected.lower():
        raise CommitFailedError(
            "Requirement failed: UUID does not match: "
            f"expected {_show(current)} != {_show(expected)}"
        )


def _check_ref(base: Metadata, req: dict[str, Any]) -> None:
    name = _field(req, "ref")
    # `snapshot-id` is nullable; a missing key means null as well.
    expected = req.get("snapshot-id")
    ref = refs_of(base).get(name)
    if ref is not None:
        kind = "branch" if str(ref.get("type", "branch")).lower() == "branch" else "tag"
        if expected is None:
            raise CommitFailedError(f"Requirement failed: {kind} {name} was created concurrently")
        if expected != ref.get("snapshot-id"):
            raise CommitFailedError(
                f"Requirement failed: {kind} {name} has changed: "
                f"expected id {expected} != {ref.get('snapshot-id')}"
            )
    elif expected is not None:
        raise CommitFailedError(
            f"Requirement failed: branch or tag {name} is missing, expected {expected}"
        )


def _equals_check(meta_key: str, req_key: str, what: str) -> _Check:
    def check(base: Metadata, req: dict[str, Any]) -> None:
        expected = _field(req, req_key)
        current = base.get(meta_key)
        if expected != current:
            raise CommitFailedError(
                f"Requirement failed: {what} changed: "
                f"expected id {_show(expected)} != {_show(current)}"
            )

    return check


_CHECKS: dict[str, _Check] = {
    "assert-table-uuid": _check_uuid,
    "assert-ref-snapshot-id": _check_ref,
    "assert-last-assigned-field-id": _equals_check(
        "last-column-id", "last-assigned-field-id", "last assigned field id"
    ),
    "assert-current-schema-id": _equals_check(
        "current-schema-id", "current-schema-id", "current schema"
    ),
    "assert-last-assigned-partition-id": _equals_check(
        "last-partition-id", "last-assigned-partition-id", "last assigned partition id"
    ),
    "assert-default-spec-id": _equals_check(
        "default-spec-id", "default-spec-id", "default partition spec"
    ),
    "assert-default-sort-order-id": _equals_check(
        "default-sort-order-id", "default-sort-order-id", "default sort order"
    ),
}


# Field types per requirement: checked while parsing, so a malformed requirement is a 400
# and never reaches a comparison (a list as a ref name, a string as an id, ...).
_ID_FIELDS = {
    "assert-last-assigned-field-id": "last-assigned-field-id",
    "assert-current-schema-id": "current-schema-id",
    "assert-last-assigned-partition-id": "last-assigned-partition-id",
    "assert-default-spec-id": "default-spec-id",
    "assert-default-sort-order-id": "default-sort-order-id",
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate(kind: str, req: dict[str, Any]) -> None:
    problem = None
    if kind == "assert-table-uuid" and not isinstance(_field(req, "uuid"), str):
        problem = "uuid must be a string"
    elif kind == "assert-ref-snapshot-id":
        snapshot_id = req.get("snapshot-id")
        if not isinstance(_field(req, "ref"), str):
            problem = "ref must be a string"
        elif snapshot_id is not None and not _is_int(snapshot_id):
            problem = "snapshot-id must be a long or null"
    elif kind in _ID_FIELDS:
        # PyIceberg types last-assigned-partition-id as optional, so null is parsed too.
        value = _field(req, _ID_FIELDS[kind])
        if value is not None and not _is_int(value):
            problem = f"{_ID_FIELDS[kind]} must be an integer"
    if problem is not None:
        raise BadRequestError(f"Cannot parse {kind} requirement: {problem}")


def check_requirements(base: Metadata | None, requirements: list[dict[str, Any]]) -> None:
    """Validate every requirement against the current metadata (`base`).

    `base=None` means the table does not exist: `assert-create` passes and the
    other requirements are only parsed (the caller answers 404 for them).
    """
    if not isinstance(requirements, list):
        raise BadRequestError("Cannot parse requirements: expected an array")
    parsed: list[tuple[str, dict[str, Any]]] = []
    # Parse everything first so an unknown type is a 400 even if an earlier
    # requirement would fail with 409.
    for req in requirements:
        if not isinstance(req, dict) or not isinstance(req.get("type"), str):
            raise BadRequestError("Cannot parse update requirement: missing type")
        kind = req["type"].lower()
        if kind != "assert-create" and kind not in _CHECKS:
            raise BadRequestError(f"Cannot parse update requirement: unknown type {req['type']}")
        _validate(kind, req)
        parsed.append((kind, req))
    for kind, req in parsed:
        if kind == "assert-create":
            _check_create(base, req)
        elif base is not None:
            _CHECKS[kind](base, req)

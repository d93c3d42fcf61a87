"""Unit tests for commit requirements (domain.requirements)."""

from __future__ import annotations

from typing import Any

import pytest

from icelog.domain.errors import BadRequestError, CommitFailedError
from icelog.domain.requirements import check_requirements
from icelog.domain.table_metadata import Metadata, apply_updates, new_table_metadata

UUID = "9c12d441-03fe-4693-9a96-a0705ddf69c1"


def table() -> Metadata:
    m = new_table_metadata(
        uuid=UUID,
        location="s3://b/t",
        schema={
            "type": "struct",
            "fields": [{"id": 1, "name": "id", "required": True, "type": "long"}],
        },
        partition_spec={"fields": [{"source-id": 1, "name": "id_b", "transform": "bucket[4]"}]},
        sort_order={
            "fields": [
                {
                    "source-id": 1,
                    "transform": "identity",
                    "direction": "asc",
                    "null-order": "nulls-first",
                }
            ]
        },
        properties={},
        now_ms=1,
    )
    snapshot = {
        "snapshot-id": 10,
        "timestamp-ms": 2,
        "sequence-number": 1,
        "manifest-list": "m",
        "summary": {"operation": "append"},
    }
    return apply_updates(
        m,
        [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 10},
            {"action": "set-snapshot-ref", "ref-name": "t1", "type": "tag", "snapshot-id": 10},
        ],
        now_ms=3,
        previous_location=None,
    )


def check(base: Metadata | None, *reqs: dict[str, Any]) -> None:
    check_requirements(base, list(reqs))


def fails(base: Metadata | None, req: dict[str, Any], message: str) -> None:
    with pytest.raises(CommitFailedError) as info:
        check(base, req)
    assert info.value.message == message
    assert info.value.status == 409 and info.value.error_type == "CommitFailedException"


def test_all_pass_on_matching_table() -> None:
    m = table()
    check(
        m,
        {"type": "assert-table-uuid", "uuid": UUID.upper()},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 10},
        {"type": "assert-ref-snapshot-id", "ref": "t1", "snapshot-id": 10},
        {"type": "assert-ref-snapshot-id", "ref": "new-branch", "snapshot-id": None},
        {"type": "assert-ref-snapshot-id", "ref": "other"},
        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 1},
        {"type": "assert-current-schema-id", "current-schema-id": 0},
        {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 1000},
        {"type": "assert-default-spec-id", "default-spec-id": 0},
        {"type": "ASSERT-default-sort-order-id", "default-sort-order-id": 1},
    )
    check(m)


def test_assert_create() -> None:
    check(None, {"type": "assert-create"})
    fails(table(), {"type": "assert-create"}, "Requirement failed: table already exists")


def test_base_none_skips_table_checks() -> None:
    check(None, {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 3})
    check(None, {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 3})


def test_uuid_mismatch() -> None:
    other = "11111111-1111-1111-1111-111111111111"
    fails(
        table(),
        {"type": "assert-table-uuid", "uuid": other},
        f"Requirement failed: UUID does not match: expected {UUID} != {other}",
    )


def test_ref_created_concurrently() -> None:
    fails(
        table(),
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
        "Requirement failed: branch main was created concurrently",
    )
    fails(
        table(),
        {"type": "assert-ref-snapshot-id", "ref": "t1", "snapshot-id": None},
        "Requirement failed: tag t1 was created concurrently",
    )


def test_ref_changed() -> None:
    fails(
        table(),
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 9},
        "Requirement failed: branch main has changed: expected id 9 != 10",
    )
    fails(
        table(),
        {"type": "assert-ref-snapshot-id", "ref": "t1", "snapshot-id": 9},
        "Requirement failed: tag t1 has changed: expected id 9 != 10",
    )


def test_ref_missing() -> None:
    fails(
        table(),
        {"type": "assert-ref-snapshot-id", "ref": "b", "snapshot-id": 9},
        "Requirement failed: branch or tag b is missing, expected 9",
    )


def test_ref_main_derived_from_current_snapshot_id() -> None:
    legacy = {k: v for k, v in table().items() if k != "refs"}
    fails(
        legacy,
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
        "Requirement failed: branch main was created concurrently",
    )


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (
            {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 5},
            "Requirement failed: last assigned field id changed: expected id 5 != 1",
        ),
        (
            {"type": "assert-current-schema-id", "current-schema-id": 3},
            "Requirement failed: current schema changed: expected id 3 != 0",
        ),
        (
            {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 999},
            "Requirement failed: last assigned partition id changed: expected id 999 != 1000",
        ),
        (
            {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": None},
            "Requirement failed: last assigned partition id changed: expected id null != 1000",
        ),
        (
            {"type": "assert-default-spec-id", "default-spec-id": 2},
            "Requirement failed: default partition spec changed: expected id 2 != 0",
        ),
        (
            {"type": "assert-default-sort-order-id", "default-sort-order-id": 0},
            "Requirement failed: default sort order changed: expected id 0 != 1",
        ),
    ],
)
def test_id_assertions(req: dict[str, Any], message: str) -> None:
    fails(table(), req, message)


def test_unknown_type_is_400_even_after_failing_requirement() -> None:
    with pytest.raises(BadRequestError) as info:
        check(table(), {"type": "assert-create"}, {"type": "assert-nonsense"})
    assert info.value.status == 400
    with pytest.raises(BadRequestError):
        check(table(), {"no-type": 1})
    with pytest.raises(BadRequestError):
        check(table(), {"type": "assert-current-schema-id"})


def test_first_failure_wins() -> None:
    with pytest.raises(CommitFailedError, match="UUID does not match"):
        check(
            table(),
            {"type": "assert-table-uuid", "uuid": "x"},
            {"type": "assert-current-schema-id", "current-schema-id": 3},
        )


@pytest.mark.parametrize(
    "requirement",
    [
        {"type": "assert-ref-snapshot-id", "ref": ["main"], "snapshot-id": None},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": "1"},
        {"type": "assert-table-uuid", "uuid": 7},
        {"type": "assert-current-schema-id", "current-schema-id": "0"},
        {"type": "assert-default-spec-id", "default-spec-id": True},
        {"type": "assert-last-assigned-field-id"},
    ],
)
def test_malformed_requirements_are_bad_requests(requirement: dict[str, Any]) -> None:
    with pytest.raises(BadRequestError):
        check_requirements(table(), [requirement])

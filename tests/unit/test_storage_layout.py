"""`storage-layout` (Lakekeeper's StorageLayout): which templates a profile may name, and
where they place new tables, views and namespace directories. A hostile template ('/',
'..', no {uuid}, over-long, anything but one plain segment) is a 400 before anything is
stored; whatever name a client picks, the location stays one plain segment per level
inside the warehouse."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icelog.commands.storage import validate_storage_profile
from icelog.domain.errors import BadRequestError
from icelog.domain.identifiers import NamespaceName, namespace_id
from icelog.domain.locations import MAX_FILE_SEGMENT_BYTES, Location, default_table_location
from icelog.domain.storage_layout import StorageLayout

BASE = Location.parse("s3://lake/wh")
WAREHOUSE = UUID(int=0xA1)
TABLE = UUID("12345678-1234-5678-1234-567812345678")
NS = NamespaceName(("sales", "eu"))


def tabular_only(template: str) -> dict[str, Any]:
    return {"type": "tabular-only", "tabular": template}


def place(layout: dict[str, Any], namespace: NamespaceName = NS, name: str = "orders") -> str:
    parsed = StorageLayout.parse(layout)
    found = default_table_location(
        BASE, namespace, name, TABLE, layout=parsed, warehouse_id=WAREHOUSE
    )
    return str(found)


# -- where tables go ----------------------------------------------------------------------------
def test_without_a_layout_tables_go_where_they_always_went() -> None:
    found = default_table_location(BASE, NS, "orders", TABLE)
    assert str(found) == f"s3://lake/wh/sales/eu/orders-{TABLE.hex}"


def test_lakekeepers_default_is_flat_by_id() -> None:
    assert place({"type": "default"}) == f"s3://lake/wh/{TABLE}"


def test_tabular_only_puts_every_table_below_the_base() -> None:
    assert place(tabular_only("{name}-{uuid}")) == f"s3://lake/wh/orders-{TABLE}"
    assert place(tabular_only("t_{uuid}.d")) == f"s3://lake/wh/t_{TABLE}.d"


def test_full_hierarchy_has_a_directory_per_namespace_level_by_its_id() -> None:
    layout = {"type": "full-hierarchy", "namespace": "{name}-{uuid}", "tabular": "{uuid}"}
    sales = namespace_id(WAREHOUSE, NamespaceName(("sales",)))
    eu = namespace_id(WAREHOUSE, NS)
    assert place(layout) == f"s3://lake/wh/sales-{sales}/eu-{eu}/{TABLE}"
    # Another warehouse's namespace of the same name is another directory.
    other = default_table_location(
        BASE, NS, "orders", TABLE, layout=StorageLayout.parse(layout), warehouse_id=UUID(int=2)
    )
    assert str(other) != place(layout)


def test_names_become_one_plain_segment_never_a_path_or_an_escape() -> None:
    layout = {"type": "full-hierarchy", "namespace": "{name}", "tabular": "{name}-{uuid}"}
    found = Location.parse(place(layout, NamespaceName(("..", "a/b", "%2e%2e")), "../x y"))
    assert found.segments == ("wh", "__", "a_b", "_2e_2e", f".._x_y-{TABLE}")
    assert "%" not in str(found)
    # A name is never read as a placeholder.
    assert place(tabular_only("{name}-{uuid}"), name="{uuid}") == f"s3://lake/wh/_uuid_-{TABLE}"


def test_a_layout_without_the_warehouse_id_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="warehouse"):
        default_table_location(
            BASE, NS, "t", TABLE, layout=StorageLayout.parse({"type": "default"})
        )


# -- what a profile may name ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        (tabular_only("a/{uuid}"), "one path segment"),
        (tabular_only("../{uuid}"), "one path segment"),
        (tabular_only("{uuid}/.."), "one path segment"),
        (tabular_only("%2e%2e{uuid}"), "one path segment"),
        (tabular_only("{uuid}\\x"), "one path segment"),
        (tabular_only(" {uuid}"), "one path segment"),
        (tabular_only("{uuid}\x00"), "one path segment"),
        (tabular_only("{UUID}"), "one path segment"),
        (tabular_only("{nam}{uuid}"), "one path segment"),
        (tabular_only("{name}"), "must hold {uuid}"),
        (tabular_only("orders"), "must hold {uuid}"),
        (tabular_only(""), "non-empty string"),
        (tabular_only("x" * 201 + "{uuid}"), "at most 200"),
        (tabular_only("{uuid}" * 8), "longer than 255 bytes"),
        (tabular_only("{uuid}" + "{name}" * 4), "longer than 255 bytes"),
        ({"type": "tabular-only"}, "non-empty string"),
        ({"type": "tabular-only", "tabular": 7}, "non-empty string"),
        ({"type": "full-hierarchy", "namespace": "..", "tabular": "{uuid}"}, "'.' or '..'"),
        ({"type": "full-hierarchy", "namespace": ".", "tabular": "{uuid}"}, "'.' or '..'"),
        ({"type": "full-hierarchy", "namespace": "a/b", "tabular": "{uuid}"}, "segment"),
        ({"type": "full-hierarchy", "tabular": "{uuid}"}, "namespace must be"),
        ({"type": "full-hierarchy", "namespace": "{name}", "tabular": "{name}"}, "{uuid}"),
        ({"type": "default", "tabular": "{name}"}, "unsupported field(s): tabular"),
        ({"type": "tabular-only", "tabular": "{uuid}", "x": 1}, "unsupported field(s): x"),
        ({"type": "flat"}, "one of: default, tabular-only, full-hierarchy"),
        ("full-hierarchy", "must be an object"),
        (["default"], "must be an object"),
    ],
)
def test_hostile_layouts_are_refused(layout: Any, expected: str) -> None:
    with pytest.raises(BadRequestError) as refused:
        StorageLayout.parse(layout)
    assert refused.value.status == 400
    assert expected in refused.value.message
    assert "storage-profile.storage-layout" in refused.value.message


def test_the_longest_allowed_template_still_fits_a_file_name() -> None:
    longest = "{uuid}" * 3 + "{name}" * 2 + "x" * (MAX_FILE_SEGMENT_BYTES - 3 * 36 - 2 * 64)
    found = Location.parse(place(tabular_only(longest), name="n" * 500))
    assert len(found.segments[-1].encode()) == MAX_FILE_SEGMENT_BYTES


# -- the registry normalises it for every kind, once ---------------------------------------------
FILE = {"type": "file", "base-location": "file:///srv/lake"}
S3 = {"type": "s3", "bucket": "lake", "region": "us-east-1", "key-prefix": "wh"}
S3_KEY = {"type": "s3", "access-key-id": "k", "secret-access-key": "s"}


@pytest.mark.parametrize(("profile", "credential"), [(FILE, None), (S3, S3_KEY)])
def test_every_kind_takes_and_stores_a_layout(
    profile: dict[str, Any], credential: dict[str, Any] | None
) -> None:
    layout = {"type": "full-hierarchy", "namespace": "{name}", "tabular": "{name}-{uuid}"}
    stored, _ = validate_storage_profile(
        {**profile, "storage-layout": layout}, credential, check_access=False
    )
    assert stored["storage-layout"] == layout
    stored, _ = validate_storage_profile(
        {**profile, "storage-layout": {"type": "default"}}, credential, check_access=False
    )
    assert stored["storage-layout"] == {"type": "default"}
    # Absent or null: no layout stored, icelog's own.
    for absent in ({}, {"storage-layout": None}):
        stored, _ = validate_storage_profile({**profile, **absent}, credential, check_access=False)
        assert "storage-layout" not in stored
    # Stored, then validated again (a credential rotation re-reads the stored profile).
    again, _ = validate_storage_profile(
        {**profile, "storage-layout": layout}, credential, check_access=False
    )
    assert validate_storage_profile(again, credential, check_access=False)[0] == again
    with pytest.raises(BadRequestError, match="must hold"):
        validate_storage_profile(
            {**profile, "storage-layout": tabular_only("{name}")}, credential, check_access=False
        )


# -- whatever a client names, the location stays plain and inside ---------------------------------
NAMES = st.text(min_size=1, max_size=300)
TEMPLATE_PIECES = st.lists(st.sampled_from(["{uuid}", "{name}", "-", "_", ".", "a", "Z", "9"]))


@settings(max_examples=300, deadline=None)
@given(
    levels=st.lists(NAMES, min_size=1, max_size=4),
    name=NAMES,
    namespace=TEMPLATE_PIECES,
    tabular=TEMPLATE_PIECES,
)
def test_accepted_layouts_never_leave_the_base(
    levels: list[str], name: str, namespace: list[str], tabular: list[str]
) -> None:
    layout = {
        "type": "full-hierarchy",
        "namespace": "".join(namespace),
        "tabular": "".join(tabular),
    }
    try:
        parsed = StorageLayout.parse(layout)
    except BadRequestError:
        return
    levels = [level.replace("\x00", "").replace("\x1f", "") or "n" for level in levels]
    try:
        found = default_table_location(
            BASE,
            NamespaceName(tuple(levels)),
            name.replace("\x00", "").replace("\x1f", "") or "t",
            TABLE,
            layout=parsed,
            warehouse_id=WAREHOUSE,
        )
    except BadRequestError as refused:  # deep enough to pass S3's key limit: a 400
        assert "longer than 1024 bytes" in refused.message
        return
    assert BASE.contains(found) and len(found.segments) == len(BASE.segments) + len(levels) + 1
    assert str(TABLE) in found.segments[-1]
    for segment in found.relative_to(BASE):
        assert segment.strip(".") and "%" not in segment and "/" not in segment
        assert len(segment.encode()) <= MAX_FILE_SEGMENT_BYTES
    assert Location.parse(str(found)) == found

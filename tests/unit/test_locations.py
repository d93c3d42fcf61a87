"""Location rules: normalisation, containment, default paths."""

from __future__ import annotations

from uuid import UUID

import pytest

from domain.errors import BadRequestError
from domain.identifiers import NamespaceName, TabularName, namespace_id, tabular_claim_id
from domain.locations import (
    check_scheme_allowed,
    default_table_location,
    is_inside,
    normalize_location,
)
from domain.properties import reject_secret_properties, require_string_map


def test_normalize_spellings_of_one_place() -> None:
    assert normalize_location("file:/tmp/a/") == "file:///tmp/a"
    assert normalize_location("file:///tmp/a") == "file:///tmp/a"
    assert normalize_location("/data/a") == "file:///data/a"
    assert normalize_location("s3://bucket/x/") == "s3://bucket/x"


def test_containment_is_by_path_segment_not_prefix() -> None:
    assert is_inside("file:///w/db/t", "file:///w")
    assert is_inside("file:/w", "file:///w/")
    assert not is_inside("file:///w2/db", "file:///w")


def test_default_location_is_unique_and_path_safe() -> None:
    tid = UUID("12345678123456781234567812345678")
    loc = default_table_location("file:///w/", NamespaceName(("a b", "c/d")), "t:1", tid)
    assert loc == f"file:///w/a_b/c_d/t_1-{tid.hex}"


def test_derived_ids_separate_names_warehouses_and_levels() -> None:
    w1, w2 = UUID(int=1), UUID(int=2)
    ab = NamespaceName(("a", "b"))
    assert namespace_id(w1, ab) == namespace_id(w1, NamespaceName(("a", "b")))
    assert namespace_id(w1, ab) != namespace_id(w2, ab)
    assert namespace_id(w1, ab) != namespace_id(w1, NamespaceName(("a.b",)))
    t = TabularName(ab, "t")
    assert tabular_claim_id(w1, t) != tabular_claim_id(
        w1, TabularName(NamespaceName(("a",)), "b.t")
    )
    assert t.dotted == "a.b.t" and ab.parent == NamespaceName(("a",))


def test_secret_properties_are_refused_without_echoing_values() -> None:
    reject_secret_properties({"owner": "me", "write.format.default": "parquet"}, "Table")
    for key in ("s3.secret-access-key", "client.password", "s3.session-token", "s3.access-key-id"):
        with pytest.raises(BadRequestError) as err:
            reject_secret_properties({key: "VALUE123"}, "Table")
        assert "VALUE123" not in err.value.message
    with pytest.raises(BadRequestError):
        require_string_map({"a": 1}, "properties")
    assert require_string_map(None, "properties") == {}


def test_hadoop_s3_schemes_are_one_place_and_need_permission() -> None:
    assert normalize_location("s3a://lake/wh/t/") == "s3://lake/wh/t"
    assert normalize_location("s3n://lake/wh/t") == "s3://lake/wh/t"
    assert is_inside("s3a://lake/wh/t", "s3://lake/wh")
    assert not is_inside("s3a://lake/wh2/t", "s3://lake/wh")
    check_scheme_allowed({"allow-alternative-protocols": True}, "s3a://lake/wh/t")
    check_scheme_allowed({}, "s3://lake/wh/t")
    with pytest.raises(BadRequestError, match="alternative protocol"):
        check_scheme_allowed({"allow-alternative-protocols": False}, "s3n://lake/wh/t")

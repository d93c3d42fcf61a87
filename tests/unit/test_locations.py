"""Location rules: normalisation, containment, default paths."""

from __future__ import annotations

import posixpath
from urllib.parse import unquote
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icelog.domain.errors import BadRequestError
from icelog.domain.identifiers import NamespaceName, TabularName, namespace_id, tabular_claim_id
from icelog.domain.locations import (
    Location,
    check_scheme_allowed,
    default_table_location,
    is_inside,
    normalize_location,
)
from icelog.domain.properties import reject_secret_properties, require_string_map


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
    base = Location.parse("file:///w/")
    loc = default_table_location(base, NamespaceName(("a b", "c/d")), "t:1", tid)
    assert str(loc) == f"file:///w/a_b/c_d/t_1-{tid.hex}"


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


def test_adls_spellings_are_one_place_and_the_blob_ones_need_permission() -> None:
    dfs = "abfss://lake@acct.dfs.core.windows.net"
    assert normalize_location("wasbs://Lake@ACCT.blob.core.windows.net/wh/t/") == f"{dfs}/wh/t"
    assert normalize_location("abfs://lake@acct.dfs.core.windows.net/wh") == f"{dfs}/wh"
    assert is_inside("wasbs://lake@acct.blob.core.windows.net/wh/t", f"{dfs}/wh")
    # Another filesystem, account or host is another place.
    assert not is_inside("abfss://lake2@acct.dfs.core.windows.net/wh/t", f"{dfs}/wh")
    assert not is_inside("abfss://lake@acct2.dfs.core.windows.net/wh/t", f"{dfs}/wh")
    assert not is_inside("abfss://lake@acct.dfs.fabric.microsoft.com/wh/t", f"{dfs}/wh")
    check_scheme_allowed({}, f"{dfs}/wh/t")
    for spelling in ("wasbs://", "wasb://", "abfs://"):
        with pytest.raises(BadRequestError, match="alternative protocol"):
            check_scheme_allowed({}, f"{spelling}lake@acct.blob.core.windows.net/wh/t")


@pytest.mark.parametrize(
    "text",
    [
        "abfss://acct.dfs.core.windows.net/wh",  # no filesystem
        "abfss://ab@acct.dfs.core.windows.net/wh",  # filesystem names have 3+ characters
        "abfss://la--ke@acct.dfs.core.windows.net/wh",
        "abfss://lake@acct/wh",  # no host
        "abfss://lake@acct.dfs.core.windows.net:443/wh",  # a port is not an account's
        "abfss://u:p@acct.dfs.core.windows.net/wh",
        "abfss://lake@acct.dfs.core.windows.net/a/../b",
        "gs://../x",
        "gs://bucket/a/%2e%2e/b",
    ],
)
def test_cloud_locations_that_could_mean_another_place_are_refused(text: str) -> None:
    with pytest.raises(BadRequestError):
        Location.parse(text)


def test_gcs_locations_compare_by_bucket_and_segment() -> None:
    assert is_inside("gs://lake/wh/t/data/f.parquet", "gs://lake/wh")
    assert not is_inside("gs://lake/wh2/t", "gs://lake/wh")
    assert not is_inside("s3://lake/wh/t", "gs://lake/wh")  # same bucket name, other store


# -- the Location type against hostile input ------------------------------------------------

WAREHOUSE = Location.parse("file:///srv/lake/wh")
BUCKET_ROOT = Location.parse("s3://lake/wh")


@pytest.mark.parametrize(
    "text",
    [
        "file:///srv/lake/wh/../../etc/passwd",
        "file:///srv/lake/wh/./t",
        "file:///srv/lake/wh/%2e%2e/x",
        "file:///srv/lake/wh/%2E%2e/x",
        "file:///srv/lake/wh/..%2fx",
        "file:///srv/lake/wh/a%2F..%2F..%2Fx",
        "file:///srv/lake/wh/a%5C..",
        "file:///srv/lake/wh//t",
        "file:///srv/lake/wh/t%00x",
        "file:///srv/lake/wh/t\x00x",
        "file:///srv/lake/wh/t\nx",
        "file:///srv/lake/wh/t?x=/../../y",
        "file:///srv/lake/wh/t#/../y",
        "file:///srv/lake/wh\\..\\x",
        "file://evil.example/srv/lake/wh/t",
        "file:relative/path",
        "//srv/lake/wh",
        "relative/wh",
        "hdfs://nn/srv/lake/wh",
        "s3://lake/wh/../other",
        "s3://lake/wh/%2e%2e/other",
        "s3://LA..KE/x",
        "s3:///wh",
        "s3://user@lake/wh",
        f"file:///srv/lake/wh/{'x' * 256}",
        f"s3://lake/wh/{'k' * 1100}",
        "",
        "   ",
    ],
)
def test_hostile_locations_are_refused(text: str) -> None:
    with pytest.raises(BadRequestError):
        Location.parse(text)


def test_encoded_separators_are_literal_only_where_allowed() -> None:
    # Iceberg writes a partition value's '/' as %2F: a file a table's metadata names.
    named = "s3://lake/wh/t/data/url=a%2Fb/0.parquet"
    assert BUCKET_ROOT.contains(Location.parse(named, encoded_separators=True))
    with pytest.raises(BadRequestError):
        Location.parse(named)  # never in a location a client chooses for a table
    with pytest.raises(BadRequestError):
        Location.parse("s3://lake/wh/t/..%2F..%2Fx", encoded_separators=True)


def test_spellings_of_one_place_are_equal_and_canonical() -> None:
    spellings = ["file:/srv/lake/wh/", "file:///srv/lake/wh", "/srv/lake/wh/"]
    spellings += ["FILE:///srv/lake/wh", "file://localhost/srv/lake/wh"]
    assert {str(Location.parse(s)) for s in spellings} == {"file:///srv/lake/wh"}
    assert Location.parse("s3a://lake/wh/t") == Location.parse("s3://lake/wh/t/")
    assert Location.parse("S3://lake/wh").scheme == "s3"


def test_containment_is_by_whole_segments_and_scheme_and_bucket() -> None:
    assert WAREHOUSE.contains(Location.parse("file:///srv/lake/wh/t"))
    assert WAREHOUSE.contains(WAREHOUSE)
    assert not WAREHOUSE.contains(Location.parse("file:///srv/lake/wh2/t"))
    assert not WAREHOUSE.contains(Location.parse("file:///srv/lake"))
    assert not BUCKET_ROOT.contains(Location.parse("s3://lake2/wh/t"))
    assert not BUCKET_ROOT.contains(Location.parse("s3://lake/w%68/t"))  # encoded: other key
    assert not BUCKET_ROOT.contains(Location.parse("file:///lake/wh/t"))
    assert BUCKET_ROOT.overlaps(Location.parse("s3://lake"))


def test_names_never_become_dot_or_overlong_segments() -> None:
    tid = UUID(int=7)
    for level in ("..", ".", "...", "a/../..", "\u2024\u2024"):
        loc = default_table_location(WAREHOUSE, NamespaceName((level, "..")), "..", tid)
        assert WAREHOUSE.contains(loc) and all(s.strip(".") for s in loc.segments)
    long = default_table_location(WAREHOUSE, NamespaceName(("n" * 500,)), "t" * 900, tid)
    assert all(len(s) <= 100 for s in long.segments)


# Segments built from the pieces attacks are made of: dots, separators and their encodings.
PIECES = [*"ab./\\%2eEfF5cC0?#:@ \x00\n", "%2e", "%2E", "%2f", "%2F", "%5c", "..", "%252e"]
SEGMENT = st.lists(st.sampled_from(PIECES), max_size=6).map("".join)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(SEGMENT, max_size=6), scheme=st.sampled_from(["file://", "s3://lake", ""]))
def test_no_parsed_location_escapes_its_base_under_either_reading(
    parts: list[str], scheme: str
) -> None:
    """Whatever text a client sends below a base: either it is refused, or it lies inside
    the base both as written and once every segment is percent-decoded."""
    base = WAREHOUSE if scheme != "s3://lake" else BUCKET_ROOT
    prefix = str(base)
    text = prefix + "/" + "/".join(parts)
    for encoded_separators in (False, True):
        try:
            parsed = Location.parse(text, encoded_separators=encoded_separators)
        except BadRequestError:
            continue
        if not base.contains(parsed):
            continue  # refused by the containment check, not an escape
        raw = posixpath.normpath(parsed.path if parsed.scheme == "file" else "/" + parsed.key)
        decoded = posixpath.normpath(unquote(raw).replace("\\", "/"))
        root = base.path if base.scheme == "file" else "/" + base.key
        for reading in (raw, decoded):
            assert reading == root or reading.startswith(root + "/"), (text, reading)


@pytest.mark.parametrize(
    "text",
    [
        "file:///srv/lake/wh/t1 /",
        "file:///srv/lake/wh/ /",
        "file:///srv/lake/wh/t1\u00a0",
        "file:///srv/lake/wh/\u3000/t",
        " file:///srv/lake/wh/t",
        "s3://lake/wh/t /",
    ],
)
def test_white_space_at_the_edges_is_refused_not_trimmed(text: str) -> None:
    with pytest.raises(BadRequestError):
        Location.parse(text)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(SEGMENT | st.text(max_size=4), max_size=5), s3=st.booleans())
def test_the_text_form_parses_back_to_the_same_location(parts: list[str], s3: bool) -> None:
    """A location is stored as its text and parsed again later (purge, metadata paths): the
    second parse must name exactly the place the first one checked."""
    base = BUCKET_ROOT if s3 else WAREHOUSE
    for encoded_separators in (False, True):
        try:
            parsed = Location.parse(
                f"{base}/" + "/".join(parts), encoded_separators=encoded_separators
            )
        except BadRequestError:
            continue
        assert Location.parse(str(parsed), encoded_separators=True) == parsed

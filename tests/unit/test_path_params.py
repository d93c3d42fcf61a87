"""Path parameters decode as the spec's clients encode them; names with nothing to decode
take a shortcut that must give exactly what decoding would."""

from __future__ import annotations

from urllib.parse import unquote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request

from icelog.api.http import _SEPARATOR, namespace_param, path_param
from icelog.api.routes import tables
from icelog.domain.errors import BadRequestError

RAW = st.text(alphabet=st.sampled_from(list("ab.-_ +%1fFx\x1f2B")), min_size=1, max_size=12)


def request_with(**params: str) -> Request:
    return Request({"type": "http", "path_params": params, "headers": []})


@given(RAW)
def test_names_decode_as_unquote_plus_would(raw: str) -> None:
    assert path_param(request_with(table=raw), "table") == unquote_plus(raw)


@given(RAW)
def test_namespaces_split_then_decode_as_before(raw: str) -> None:
    levels = tuple(unquote_plus(part) for part in _SEPARATOR.split(raw))
    if any(not level for level in levels):
        with pytest.raises(BadRequestError):
            namespace_param(request_with(namespace=raw))
    else:
        assert namespace_param(request_with(namespace=raw)).levels == levels


def test_the_separator_and_encoded_characters() -> None:
    assert namespace_param(request_with(namespace="a%1Fb%2Fc+d")).levels == ("a", "b/c d")
    assert namespace_param(request_with(namespace="plain")).levels == ("plain",)


def test_parsed_table_names_are_kept_only_when_short() -> None:
    short = request_with(namespace="db", table="t")
    assert tables._name(short) is tables._name(short)  # parsed once, then kept
    long = request_with(namespace="n" * 400, table="t" * 400)
    assert tables._name(long).name == "t" * 400
    assert ("n" * 400, "t" * 400) not in tables._NAMES, "long names are not kept"

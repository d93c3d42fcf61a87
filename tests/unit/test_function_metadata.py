"""Function metadata (domain/function_metadata.py): definition ids as the UDF spec derives
them, the checks, and a replace fold that reproduces the same document from the log."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from icelog.domain.errors import BadRequestError
from icelog.domain.function_metadata import (
    MAX_VERSIONS,
    apply_function_changes,
    canonical_type,
    check_function_metadata,
    new_function_metadata,
)

UUID = "42fd3f91-bc10-41c1-8a52-92b57dd0a9b2"


def submitted(sql: str, *types: Any) -> dict[str, Any]:
    return {
        "parameters": [{"name": f"p{n}", "type": t} for n, t in enumerate(types)],
        "return-type": "int",
        "function-type": "udf",
        "representations": [{"type": "sql", "dialect": "spark", "sql": sql}],
    }


def first(*definitions: dict[str, Any]) -> dict[str, Any]:
    return new_function_metadata(
        function_uuid=UUID,
        location="file:///wh/db/f",
        definitions=list(definitions),
        doc=None,
        properties={},
        secure=None,
        now_ms=1,
    )


@pytest.mark.parametrize(
    ("type_", "canonical"),
    [
        ("int", "int"),
        ("decimal(9,2)", "decimal(9,2)"),
        ({"type": "list", "element": "int", "element-id": 3}, "list<int>"),
        ({"type": "map", "key": "string", "value": {"type": "list", "element": "long"}},
         "map<string,list<long>>"),
        ({"type": "struct", "fields": [{"name": "id", "type": "int"},
                                       {"name": "name", "type": "string"}]},
         "struct<id:int,name:string>"),
    ],
)  # fmt: skip
def test_definition_ids_are_the_specs(type_: Any, canonical: str) -> None:
    assert canonical_type(type_) == canonical


@pytest.mark.parametrize(
    "type_", ["", "in t", 'int"', "list<int>", "a:b", 3, None, [], {"type": "list"},
              {"type": "struct", "fields": [{"name": "a", "type": "int"}] * 2}],
)  # fmt: skip
def test_what_is_not_a_type(type_: Any) -> None:
    with pytest.raises(BadRequestError):
        canonical_type(type_)


def test_a_replace_folds_to_the_same_bytes_and_keeps_its_bounds() -> None:
    base = first(submitted("p0 + 1", "int"), submitted("1", "int", "string"))
    check_function_metadata(base)
    document = base
    for n in range(MAX_VERSIONS + 5):
        changes = {"definitions": [submitted(f"p0 + {n + 2}", "int")]}
        logged = orjson.loads(orjson.dumps(changes))  # as the event store gives it back
        again = apply_function_changes(copy.deepcopy(document), logged, now_ms=10 + n)
        document = apply_function_changes(document, changes, now_ms=10 + n)
        assert orjson.dumps(again) == orjson.dumps(document)
    versions = document["definitions"][0]["versions"]
    assert len(versions) == MAX_VERSIONS and versions[-1]["version-id"] == MAX_VERSIONS + 6
    assert document["definitions"][1]["current-version-id"] == 1
    # Back to a version that is still kept; one that was trimmed is gone.
    kept = versions[0]["version-id"]
    rolled = apply_function_changes(
        document,
        {"set-current-versions": [{"definition-id": "int", "version-id": kept}]},
        now_ms=99,
    )
    assert rolled["definitions"][0]["current-version-id"] == kept
    with pytest.raises(BadRequestError):
        apply_function_changes(
            document,
            {"set-current-versions": [{"definition-id": "int", "version-id": 1}]},
            now_ms=99,
        )
    assert apply_function_changes(base, {}, now_ms=5) is base

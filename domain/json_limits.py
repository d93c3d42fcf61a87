"""Bounds on the JSON the server accepts, so that every document it stores it can also
write back out: orjson reads up to 1,024 levels of nesting but writes at most 254, and
Python code that walks a document recursively has a limit of its own."""

from __future__ import annotations

from typing import Any

from icelog.domain.errors import BadRequestError

# Far below orjson's 254 levels on output: a request body is stored inside events and
# answered inside responses, each adding a few levels around it. Real request bodies stay
# below ~70 (a schema of 20 nested structs).
MAX_JSON_DEPTH = 200


def json_depth(value: Any) -> int:
    """The nesting depth of a parsed JSON value (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children if isinstance(child, (dict, list)))
    return deepest


def check_json_depth(value: Any, what: str, limit: int = MAX_JSON_DEPTH) -> None:
    """400 when `value` nests deeper than `limit` levels."""
    if json_depth(value) > limit:
        raise BadRequestError(f"{what} nests deeper than {limit} levels")

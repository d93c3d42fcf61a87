"""A parser and evaluator for exactly the CEL conditions icelog writes into a GCS access
boundary: `<subject>.startsWith('<literal>') || ...`, the subject being `resource.name` or
the listing's prefix. Anything else does not parse (an injected `|| true` included), so a
test that evaluates a condition also proves its shape.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_CLAUSE = re.compile(
    r"(resource\.name|api\.getAttribute\('storage\.googleapis\.com/objectListPrefix', ''\))"
    r"\.startsWith\("
)


def _literal(text: str, at: int) -> tuple[str, int]:
    """A CEL single-quoted string starting at `at` (escapes read as CEL reads them)."""
    assert text[at] == "'", text[at:]
    out, i = [], at + 1
    while text[i] != "'":
        if text[i] == "\\":
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out), i + 1


def clauses(expression: str) -> list[tuple[str, str]]:
    """[(subject, prefix)] of `subject.startsWith('prefix') || ...`; AssertionError on any
    other shape (an injected `|| true` would not parse)."""
    found, i = [], 0
    while True:
        match = _CLAUSE.match(expression, i)
        assert match, f"unexpected CEL at {expression[i:]!r}"
        literal, i = _literal(expression, match.end())
        assert expression[i] == ")"
        found.append(("list" if match.group(1).startswith("api") else "name", literal))
        i += 1
        if i == len(expression):
            return found
        assert expression[i : i + 4] == " || ", expression[i:]
        i += 4


def allows(boundary: Mapping[str, Any], *, name: str = "", list_prefix: str | None = None) -> bool:
    """Whether the boundary's condition holds for an object `name` (a request on an
    object), or for a listing with `list_prefix` (whose resource is the bucket)."""
    (rule,) = boundary["accessBoundary"]["accessBoundaryRules"]
    bucket = rule["availableResource"].rsplit("/", 1)[1]
    resource = f"projects/_/buckets/{bucket}" + (
        "" if list_prefix is not None else f"/objects/{name}"
    )
    for subject, prefix in clauses(rule["availabilityCondition"]["expression"]):
        value = resource if subject == "name" else (list_prefix or "")
        if value.startswith(prefix):
            return True
    return False

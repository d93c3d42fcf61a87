"""Concrete request paths made from route templates, for tests of routing."""

from __future__ import annotations


def concrete(template: str, values: list[str]) -> str:
    """`template` with its `{param}` segments replaced by `values`, taken from the end."""
    parts = []
    for part in template.split("/"):
        parts.append(values.pop() if part.startswith("{") and values else part)
    return "/".join(parts)

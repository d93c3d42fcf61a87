"""Which rules built a metadata document: the validation and normalisation of updates.

Replaying a commit must rebuild exactly the document the commit wrote, and must never
refuse it (the log is the truth). When the rules for accepting table and view metadata
change, documents built under the old rules would come out different, or be refused, if
replayed under the new ones. So every commit event records the rules it was applied under
(`rules`), and a replay applies the same ones (ADR 0012):

- 1 (LEGACY): the first rules — no checks added since, no normalisation of type strings
  or transform arguments. Events written before the field existed are upcast to 1.
- 2 (CURRENT): as strict as Iceberg Java's builders and PyIceberg's parser; type strings
  and transforms normalised as Java writes them.

A change that makes the current rules refuse something they accepted, or build a
different document from the same updates, is a new rules version; the code of every
older version stays, behind `legacy()` checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

LEGACY = 1
CURRENT = 2

_ACTIVE: ContextVar[int] = ContextVar("icelog_metadata_rules", default=CURRENT)


@contextmanager
def applying(version: int) -> Iterator[None]:
    """Apply updates under the rules `version` (a replay of a recorded commit)."""
    token = _ACTIVE.set(version)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def legacy() -> bool:
    """True while replaying a commit made under the first, laxer rules (1)."""
    return _ACTIVE.get() < CURRENT

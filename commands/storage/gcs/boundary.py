"""The Credential Access Boundary of a vended token: one table's objects, nothing else.

A downscoped token may do at most what its rule allows, on one bucket, where a CEL
condition holds. The condition names the table's key prefix ending in '/', so that the
token of `wh/t1` never reaches `wh/t10/...`:

- objects: `resource.name.startsWith('projects/_/buckets/<bucket>/objects/<prefix>/')`;
- folders of buckets with a hierarchical namespace: the same under `/folders/`;
- listings (whose resource is the bucket itself): the request's list prefix must start with
  `<prefix>/` (`api.getAttribute('storage.googleapis.com/objectListPrefix', '')`).

Values are written into single-quoted CEL literals. Google's CEL subset has no raw strings
or concatenation to hide them in, so a value holding what could end or escape the literal
(`'`, `\\`, a line break or any control character) is refused, never escaped.
"""

from __future__ import annotations

import re
from typing import Any

from google.auth import downscoped

READ_ROLE = "inRole:roles/storage.objectViewer"
# Read, create, overwrite, delete and list objects — and nothing on IAM policies or ACLs,
# which objectAdmin would add (a client could make a table's files public).
WRITE_ROLE = "inRole:roles/storage.objectUser"
CONDITION_TITLE = "icelog-table-prefix"
_NOT_IN_CEL_LITERAL = re.compile(r"['\\\x00-\x1f\x7f-\x9f\u2028\u2029]")


def cel_literal(text: str) -> str:
    """`text` as the inside of a single-quoted CEL string; ValueError when it holds a
    character that could end or escape the literal."""
    if _NOT_IN_CEL_LITERAL.search(text):
        raise ValueError("a quote, backslash or control character cannot be scoped by a rule")
    return text


def condition_expression(bucket: str, prefix: str) -> str:
    """The CEL condition that confines a token to the objects below `prefix/`."""
    b, p = cel_literal(bucket), cel_literal(prefix)
    return (
        f"resource.name.startsWith('projects/_/buckets/{b}/objects/{p}/')"
        f" || resource.name.startsWith('projects/_/buckets/{b}/folders/{p}/')"
        f" || api.getAttribute('storage.googleapis.com/objectListPrefix', '')"
        f".startsWith('{p}/')"
    )


def table_boundary(bucket: str, key_prefix: str, *, write: bool) -> dict[str, Any]:
    """The `accessBoundary` options of the STS token exchange for one table location:
    read-only (objectViewer), or read-write-delete (objectUser) when `write`."""
    prefix = key_prefix.strip("/")
    if not prefix:
        raise ValueError("a token is only ever scoped to a key prefix, never a whole bucket")
    rule = downscoped.AccessBoundaryRule(
        available_resource=f"//storage.googleapis.com/projects/_/buckets/{cel_literal(bucket)}",
        available_permissions=[WRITE_ROLE if write else READ_ROLE],
        availability_condition=downscoped.AvailabilityCondition(
            expression=condition_expression(bucket, prefix),
            title=CONDITION_TITLE,
        ),
    )
    boundary: dict[str, Any] = downscoped.CredentialAccessBoundary(rules=[rule]).to_json()
    return boundary

"""Bad input is a 4xx with the ErrorModel body, never a 500 (property test)."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.conftest import Api, create_table

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
ACTIONS = [
    "assign-uuid", "upgrade-format-version", "add-schema", "set-current-schema", "add-spec",
    "set-default-spec", "add-sort-order", "set-default-sort-order", "add-snapshot",
    "set-snapshot-ref", "remove-snapshots", "remove-snapshot-ref", "set-location",
    "set-properties", "remove-properties", "set-statistics", "remove-statistics",
    "remove-partition-specs", "remove-schemas", "nonsense",
]  # fmt: skip
REQUIREMENTS = [
    "assert-create", "assert-table-uuid", "assert-ref-snapshot-id",
    "assert-last-assigned-field-id", "assert-current-schema-id",
    "assert-last-assigned-partition-id", "assert-default-spec-id",
    "assert-default-sort-order-id", "nonsense",
]  # fmt: skip
UPDATE_FIELDS = [
    "uuid", "format-version", "schema", "schema-id", "spec", "spec-id", "sort-order",
    "sort-order-id", "snapshot", "ref-name", "type", "snapshot-id", "snapshot-ids",
    "location", "updates", "removals", "statistics", "spec-ids", "schema-ids",
]  # fmt: skip
REQUIREMENT_FIELDS = [
    "uuid", "ref", "snapshot-id", "current-schema-id", "last-assigned-field-id",
    "default-spec-id",
]  # fmt: skip


def objects(key: str, kinds: list[str], fields: list[str], most: int) -> Any:
    """Lists of up to `most` objects: `key` one of `kinds`, and up to `most` of `fields`
    with any JSON values."""
    return st.lists(
        st.builds(
            lambda kind, extra: {key: kind, **extra},
            st.sampled_from(kinds),
            st.dictionaries(st.sampled_from(fields), json_values, max_size=most),
        ),
        max_size=most,
    )


updates = objects("action", ACTIONS, UPDATE_FIELDS, 4)
requirements = objects("type", REQUIREMENTS, REQUIREMENT_FIELDS, 3)


def assert_client_error(response: Any) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        error = response.json()["error"]
        assert {"message", "type", "code"} <= set(error)


@settings(
    max_examples=int(os.environ.get("ICELOG_FUZZ_EXAMPLES", "300")),
    derandomize="ICELOG_FUZZ_EXAMPLES" not in os.environ,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(reqs=requirements, ups=updates)
def test_random_commits_never_fail_the_server(api: Api, reqs: Any, ups: Any) -> None:
    if api.get("/namespaces/db").status_code == 404:
        api.post("/namespaces", {"namespace": ["db"]})
        create_table(api, "db", "t")
    assert_client_error(api.post("/namespaces/db/tables/t", {"requirements": reqs, "updates": ups}))


@settings(
    max_examples=int(os.environ.get("ICELOG_FUZZ_EXAMPLES", "300")),
    derandomize="ICELOG_FUZZ_EXAMPLES" not in os.environ,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    body=json_values,
    target=st.sampled_from(
        [
            "/namespaces",
            "/namespaces/db/tables",
            "/tables/rename",
            "/namespaces/db/register",
            "/namespaces/db/properties",
            "/namespaces/db/tables/t",
        ]
    ),
)
def test_random_bodies_never_fail_the_server(api: Api, body: Any, target: str) -> None:
    if api.get("/namespaces/db").status_code == 404:
        api.post("/namespaces", {"namespace": ["db"]})
        create_table(api, "db", "t")
    assert_client_error(api.post(target, body))

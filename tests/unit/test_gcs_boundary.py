"""The access boundary of a vended GCS token, and the vendor's cache and refusals (with
STS and the token endpoint stubbed; tests/integration/test_storage_gcs.py has them real).

Google evaluates the boundary's CEL condition; these tests evaluate it too
(`tests.support.cel_conditions`), so that "t1's token never reaches t10" is checked on the
expression itself, not on how it was assembled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from icelog.commands.storage.gcs.auth import AccessToken
from icelog.commands.storage.gcs.boundary import (
    READ_ROLE,
    WRITE_ROLE,
    cel_literal,
    condition_expression,
    table_boundary,
)
from icelog.commands.storage.gcs.failures import GoogleAuthFailure
from icelog.commands.storage.gcs.profile import normalize_gcs_profile
from icelog.commands.storage.gcs.vending import GcsVendor
from icelog.domain.errors import (
    BadRequestError,
    ServiceUnavailableError,
    UnsupportedOperationError,
)
from tests.support.cel_conditions import allows, clauses


# -- the boundary ------------------------------------------------------------------------------
def test_a_read_token_may_only_view_and_a_write_token_may_not_touch_iam() -> None:
    read = table_boundary("lake", "wh/db/t1", write=False)
    write = table_boundary("lake", "wh/db/t1", write=True)
    (read_rule,) = read["accessBoundary"]["accessBoundaryRules"]
    (write_rule,) = write["accessBoundary"]["accessBoundaryRules"]
    assert read_rule["availablePermissions"] == [READ_ROLE] == ["inRole:roles/storage.objectViewer"]
    assert write_rule["availablePermissions"] == [WRITE_ROLE] == ["inRole:roles/storage.objectUser"]
    for rule in (read_rule, write_rule):
        assert rule["availableResource"] == "//storage.googleapis.com/projects/_/buckets/lake"


def test_the_condition_names_exactly_the_tables_prefix() -> None:
    boundary = table_boundary("lake", "/wh/db/t1/", write=True)
    (rule,) = boundary["accessBoundary"]["accessBoundaryRules"]
    assert clauses(rule["availabilityCondition"]["expression"]) == [
        ("name", "projects/_/buckets/lake/objects/wh/db/t1/"),
        ("name", "projects/_/buckets/lake/folders/wh/db/t1/"),
        ("list", "wh/db/t1/"),
    ]


@pytest.mark.attack
def test_table_t1s_token_never_reaches_t10() -> None:
    t1 = table_boundary("lake", "wh/db/t1", write=True)
    assert allows(t1, name="wh/db/t1/data/a.parquet")
    assert allows(t1, name="wh/db/t1/metadata/00001.metadata.json")
    assert allows(t1, list_prefix="wh/db/t1/")
    assert allows(t1, list_prefix="wh/db/t1/data/")
    assert not allows(t1, name="wh/db/t10/data/a.parquet")
    assert not allows(t1, name="wh/db/t1")  # an object named like the folder
    assert not allows(t1, name="wh/db/t2/data/a.parquet")
    assert not allows(t1, list_prefix="wh/db/t1")  # would list t10's names too
    assert not allows(t1, list_prefix="wh/db/")
    assert not allows(t1, list_prefix="")
    assert not allows(t1, list_prefix=None, name="")  # the bucket itself


@pytest.mark.attack
@pytest.mark.parametrize(
    "prefix",
    [
        "wh/x') || true || resource.name.startsWith('",
        "wh/x'",
        "wh/x\\",
        "wh/x\\'",
        "wh/x\ny",
        "wh/x\ry",
        "wh/x\x00",
        "wh/x\x7f",
        "wh/x\u2028y",
    ],
)
def test_a_prefix_that_could_leave_its_literal_is_refused(prefix: str) -> None:
    with pytest.raises(ValueError):
        cel_literal(prefix)
    with pytest.raises(ValueError):
        table_boundary("lake", prefix, write=False)
    with pytest.raises(ValueError):
        condition_expression("lake", prefix)


def test_other_characters_stay_as_they_are() -> None:
    prefix = 'wh/ünï "quoted"/a b/%2F'
    boundary = table_boundary("lake", prefix, write=False)
    assert allows(boundary, name=f"{prefix}/data/file")
    assert not allows(boundary, name=f"{prefix}x/data/file")


def test_a_whole_bucket_is_never_a_table() -> None:
    with pytest.raises(ValueError):
        table_boundary("lake", "/", write=False)


# -- the vendor, STS stubbed -------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class Tokens:
    """The catalog's token source: one token, valid for an hour from `issued_at`."""

    def __init__(self, clock: Clock, *, fail: bool = False) -> None:
        self.clock, self.fail = clock, fail

    def get(self) -> AccessToken:
        if self.fail:
            raise GoogleAuthFailure("the token endpoint refused the service-account key (x)")
        return AccessToken("catalog-token", self.clock.now, self.clock.now + 3600)


class Sts:
    def __init__(self, answer: dict[str, Any] | None = None) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.answer = answer

    def __call__(self, url: str, token: str, boundary: dict[str, Any]) -> Mapping[str, Any]:
        self.calls.append((url, token, boundary))
        if self.answer is not None:
            return self.answer
        return {"access_token": f"down-{len(self.calls)}", "expires_in": 3600}


CREDENTIAL = {
    "type": "gcs",
    "credential-type": "service-account-key",
    "key": {"project_id": "p-123456"},
}
PROFILE = normalize_gcs_profile(
    {
        "type": "gcs",
        "bucket": "lake",
        "key-prefix": "wh",
        "sts-endpoint": "http://sts.test/v1/token",
    }
)


def vendor(clock: Clock, sts: Sts, *, fail: bool = False) -> GcsVendor:
    return GcsVendor(clock=clock, exchange=sts, tokens=lambda _: Tokens(clock, fail=fail))  # type: ignore[arg-type,return-value]


def vend(
    v: GcsVendor,
    location: str = "gs://lake/wh/db/t1",
    *,
    write: bool = False,
    profile: dict[str, Any] = PROFILE,
) -> Any:
    return v.vend(
        profile, CREDENTIAL, location, write=write, client_config={"gcs.service.host": "h"}
    )


def test_the_answer_is_what_pyiceberg_and_iceberg_java_read() -> None:
    clock, sts = Clock(), Sts()
    vended = vend(vendor(clock, sts))
    assert vended.prefix == "gs://lake/wh/db/t1"
    assert vended.config == {
        "gcs.oauth2.token": "down-1",
        "gcs.oauth2.token-expires-at": str(int((clock.now + 3600) * 1000)),
        "gcs.project-id": "p-123456",
        "gcs.service.host": "h",
    }
    assert vended.expires_at_ms == int((clock.now + 3600) * 1000)
    ((url, token, _),) = sts.calls
    assert (url, token) == ("http://sts.test/v1/token", "catalog-token")
    assert "down-1" not in repr(vended)


def test_answers_are_reused_for_half_their_lifetime_then_renewed() -> None:
    clock, sts = Clock(), Sts()
    v = vendor(clock, sts)
    first = vend(v)
    clock.now += 1799
    assert vend(v).config["gcs.oauth2.token"] == first.config["gcs.oauth2.token"]
    assert len(sts.calls) == 1
    clock.now += 2  # past half of the hour
    assert vend(v).config["gcs.oauth2.token"] == "down-2"


def test_read_write_and_tables_each_get_their_own_token() -> None:
    clock, sts = Clock(), Sts()
    v = vendor(clock, sts)
    tokens = {
        vend(v).config["gcs.oauth2.token"],
        vend(v, write=True).config["gcs.oauth2.token"],
        vend(v, "gs://lake/wh/db/t10").config["gcs.oauth2.token"],
    }
    assert len(tokens) == 3
    roles = [
        call[2]["accessBoundary"]["accessBoundaryRules"][0]["availablePermissions"]
        for call in sts.calls
    ]
    assert roles == [[READ_ROLE], [WRITE_ROLE], [READ_ROLE]]


def test_a_cached_answer_is_not_changed_by_its_caller() -> None:
    clock, sts = Clock(), Sts()
    v = vendor(clock, sts)
    vend(v).config["gcs.oauth2.token"] = "tampered"
    assert vend(v).config["gcs.oauth2.token"] == "down-1"


def test_a_token_never_outlives_the_catalogs_own() -> None:
    clock = Clock()
    longer = vend(vendor(clock, Sts({"access_token": "t", "expires_in": 86_400})))
    assert longer.expires_at_ms == int((clock.now + 3600) * 1000)
    silent = vend(vendor(clock, Sts({"access_token": "t"})))  # STS may not say: the source's
    assert silent.expires_at_ms == int((clock.now + 3600) * 1000)
    shorter = vend(vendor(clock, Sts({"access_token": "t", "expires_in": 600})))
    assert shorter.expires_at_ms == int((clock.now + 600) * 1000)


@pytest.mark.attack
@pytest.mark.parametrize(
    "location",
    [
        "gs://lake/wh",  # the warehouse itself
        "gs://lake/other/t1",  # the same bucket, outside the warehouse
        "gs://lake/wharf/t1",  # a prefix that only starts like the warehouse's
        "gs://other-lake/wh/t1",
        "s3://lake/wh/t1",
        "gs://lake/wh/../x",
        "gs://lake/wh/x') || true || resource.name.startsWith('",
        "gs://lake/wh/it's",
    ],
)
def test_no_token_outside_the_warehouse_or_for_an_unscopable_name(location: str) -> None:
    sts = Sts()
    with pytest.raises(BadRequestError):
        vend(vendor(Clock(), sts), location)
    assert sts.calls == []


def test_vending_off_is_refused() -> None:
    with pytest.raises(UnsupportedOperationError):
        vend(vendor(Clock(), Sts()), profile={**PROFILE, "sts-enabled": False})


@pytest.mark.parametrize("answer", [{}, {"access_token": ""}, {"access_token": 5}])
def test_an_answer_without_a_token_is_a_503(answer: dict[str, Any]) -> None:
    with pytest.raises(ServiceUnavailableError):
        vend(vendor(Clock(), Sts(answer)))


def test_a_failing_token_endpoint_is_a_503_with_its_reason() -> None:
    with pytest.raises(ServiceUnavailableError) as raised:
        vend(vendor(Clock(), Sts(), fail=True))
    assert raised.value.message == (
        "Could not vend storage credentials: the token endpoint refused the service-account key (x)"
    )

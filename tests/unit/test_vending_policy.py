"""STS credential vending: session policies, session names and the half-life cache.

STS itself is replaced by a recording fake here; the real call is exercised against moto
in tests/integration/test_vending_moto.py.
"""

from __future__ import annotations

import fnmatch
import json
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from icelog.commands.storage.s3 import S3Access
from icelog.commands.storage.vending import (
    PLACEHOLDER_ROLE_ARN,
    CredentialVendor,
    VendedCredentials,
    role_session_name,
    session_policy,
    storage_credentials,
)
from icelog.domain.errors import BadRequestError, UnsupportedOperationError

ROLE = "arn:aws:iam::123456789012:role/lake-vended"
ACCESS = S3Access(
    region="eu-west-1", access_key_id="AKIDCATALOG", secret_access_key="catalog-secret-xyz"
)
LOCATION = "s3://lake/wh/ns/t1-0123"


def profile(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "type": "s3",
        "bucket": "lake",
        "key-prefix": "wh",
        "region": "eu-west-1",
        "endpoint": None,
        "path-style-access": False,
        "flavor": "aws",
        "sts-enabled": True,
        "sts-endpoint": None,
        "assume-role-arn": None,
        "sts-role-arn": ROLE,
        "sts-token-validity-seconds": 3600,
        "remote-signing-enabled": False,
        "allow-alternative-protocols": False,
        "base-location": "s3://lake/wh",
        "credential-id": "6f1c1f0e-3c1a-4d43-9e57-0a4a0f6f3c11",
    }
    base.update(changes)
    return base


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeSts:
    """Records every AssumeRole call and answers like boto3 (Expiration is a datetime)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[tuple[str | None, str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def __call__(
        self, access: S3Access, endpoint: str | None, region: str, params: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        with self._lock:
            self.calls.append((endpoint, region, dict(params)))
            n = len(self.calls)
        expires = self.clock.now + int(params["DurationSeconds"])
        return {
            "AccessKeyId": f"ASIAFAKE{n}",
            "SecretAccessKey": f"vended-secret-{n}",
            "SessionToken": f"vended-token-{n}",
            "Expiration": datetime.fromtimestamp(expires, tz=UTC),
        }


def vendor_with_fake(**kw: Any) -> tuple[CredentialVendor, FakeClock, FakeSts]:
    clock = FakeClock()
    sts = FakeSts(clock)
    return CredentialVendor(clock=clock, assume_role=sts, **kw), clock, sts


def _actions(policy: dict[str, Any], sid: str) -> list[str]:
    [statement] = [s for s in policy["Statement"] if s["Sid"] == sid]
    return list(statement["Action"])


# --- session policy -----------------------------------------------------------------------


def test_read_policy_grants_only_reads_below_the_prefix() -> None:
    policy = session_policy("lake", "wh/ns/t1", write=False)
    assert policy["Version"] == "2012-10-17"
    assert _actions(policy, "TableObjects") == ["s3:GetObject", "s3:GetObjectVersion"]
    [objects] = [s for s in policy["Statement"] if s["Sid"] == "TableObjects"]
    assert objects["Effect"] == "Allow"
    assert objects["Resource"] == ["arn:aws:s3:::lake/wh/ns/t1/*"]
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        assert not any("Put" in a or "Delete" in a for a in statement["Action"])


def test_write_policy_adds_writes_and_multipart_cleanup() -> None:
    policy = session_policy("lake", "wh/ns/t1", write=True)
    assert set(_actions(policy, "TableObjects")) == {
        "s3:GetObject",
        "s3:GetObjectVersion",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:AbortMultipartUpload",
        "s3:ListMultipartUploadParts",
    }


def test_listing_is_conditioned_on_the_prefix_and_locating_is_not() -> None:
    policy = session_policy("lake", "/wh/ns/t1/", write=False)  # slashes are trimmed
    [listing] = [s for s in policy["Statement"] if s["Sid"] == "ListTablePrefix"]
    assert listing["Action"] == ["s3:ListBucket"]
    assert listing["Resource"] == ["arn:aws:s3:::lake"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["wh/ns/t1/", "wh/ns/t1/*"]}}
    # GetBucketLocation requests carry no s3:prefix: under the condition it would be denied.
    [locate] = [s for s in policy["Statement"] if s["Sid"] == "LocateBucket"]
    assert locate["Action"] == ["s3:GetBucketLocation"]
    assert "Condition" not in locate


@pytest.mark.parametrize("write", [False, True])
def test_sibling_prefixes_are_never_matched(write: bool) -> None:
    """IAM `*` is a glob across '/', like fnmatch: check what the resources really admit."""
    policy = session_policy("lake", "db/t1", write=write)
    resources = [r for s in policy["Statement"] for r in s["Resource"] if "/" in r]
    assert resources
    for resource in resources:
        assert resource.endswith("/*")
        assert fnmatch.fnmatchcase("arn:aws:s3:::lake/db/t1/data/f.parquet", resource)
        assert not fnmatch.fnmatchcase("arn:aws:s3:::lake/db/t10/data/f.parquet", resource)
        assert not fnmatch.fnmatchcase("arn:aws:s3:::lake/db/t1-other/f.parquet", resource)
        assert not fnmatch.fnmatchcase("arn:aws:s3:::other/db/t1/f.parquet", resource)
    [listing] = [s for s in policy["Statement"] if s["Sid"] == "ListTablePrefix"]
    patterns = listing["Condition"]["StringLike"]["s3:prefix"]
    assert not any(fnmatch.fnmatchcase("db/t10/", p) for p in patterns)
    assert not any(fnmatch.fnmatchcase("db/t1", p) for p in patterns)  # lists db/t10/ too
    assert any(fnmatch.fnmatchcase("db/t1/metadata/", p) for p in patterns)


def test_policy_refuses_whole_buckets_and_wildcards() -> None:
    for prefix in ("", "/", "db/*", "db/t?", "db/${aws:username}"):
        with pytest.raises(ValueError):
            session_policy("lake", prefix, write=False)


def test_policy_follows_the_partition() -> None:
    policy = session_policy("lake", "a", write=False, partition="aws-cn")
    assert all(
        r.startswith("arn:aws-cn:s3:::lake") for s in policy["Statement"] for r in s["Resource"]
    )


# --- session names ------------------------------------------------------------------------


def test_session_names_fit_the_sts_alphabet_and_length() -> None:
    assert role_session_name("s3://lake/wh/ns/orders-0a1b") == "icelog-orders-0a1b"
    assert role_session_name("s3://lake/wh/ns/t1/") == "icelog-t1"
    odd = role_session_name("s3://lake/wh/ns/ünï cødé/%$#!:t")
    assert odd.startswith("icelog-")
    assert all(c.isascii() and (c.isalnum() or c in "_+=,.@-") for c in odd)
    long = role_session_name("s3://lake/wh/ns/" + "n" * 100 + "-" + "f" * 32)
    assert len(long) == 64
    assert long.endswith("-" + "f" * 32)  # the table id at the end survives the cut
    assert role_session_name("s3://lake/") == "icelog-lake"
    assert 2 <= len(role_session_name("s3://b/x")) <= 64


# --- vend: what is sent and returned ------------------------------------------------------


def test_vend_sends_a_scoped_assume_role_and_returns_iceberg_config() -> None:
    vendor, clock, sts = vendor_with_fake()
    creds = vendor.vend(profile(), ACCESS, LOCATION, write=True, external_id="ext-123")
    [(endpoint, region, params)] = sts.calls
    assert endpoint is None and region == "eu-west-1"
    assert params["RoleArn"] == ROLE
    assert params["RoleSessionName"] == "icelog-t1-0123"
    assert params["DurationSeconds"] == 3600
    assert params["ExternalId"] == "ext-123"
    assert json.loads(params["Policy"]) == session_policy("lake", "wh/ns/t1-0123", write=True)

    expires_ms = int((clock.now + 3600) * 1000)
    assert creds.prefix == LOCATION
    assert creds.expires_at_ms == expires_ms
    assert creds.config == {
        "s3.access-key-id": "ASIAFAKE1",
        "s3.secret-access-key": "vended-secret-1",
        "s3.session-token": "vended-token-1",
        "s3.session-token-expires-at-ms": str(expires_ms),
        "client.region": "eu-west-1",
        "s3.region": "eu-west-1",
        "s3.path-style-access": "false",
    }
    assert storage_credentials(creds) == [{"prefix": LOCATION, "config": creds.config}]


def test_endpoints_roles_and_read_only_policies() -> None:
    vendor, _, sts = vendor_with_fake()
    compat = profile(
        flavor="s3-compat",
        **{
            "sts-role-arn": None,
            "endpoint": "http://127.0.0.1:9000",
            "path-style-access": True,
            "sts-token-validity-seconds": 900,
        },
    )
    creds = vendor.vend(compat, ACCESS, "s3a://lake/wh/ns/t2", write=False)
    endpoint, _, params = sts.calls[-1]
    assert endpoint == "http://127.0.0.1:9000"  # STS falls back to the S3 endpoint
    assert params["RoleArn"] == PLACEHOLDER_ROLE_ARN
    assert params["DurationSeconds"] == 900
    assert "ExternalId" not in params
    assert json.loads(params["Policy"]) == session_policy("lake", "wh/ns/t2", write=False)
    assert creds.config["s3.endpoint"] == "http://127.0.0.1:9000"
    assert creds.config["s3.path-style-access"] == "true"

    with_sts = profile(
        **{"sts-endpoint": "http://sts.local:1", "assume-role-arn": "arn:aws:iam::1:role/a"}
    )
    vendor.vend(with_sts, ACCESS, LOCATION, write=False)
    endpoint, _, params = sts.calls[-1]
    assert endpoint == "http://sts.local:1"
    assert params["RoleArn"] == ROLE  # sts-role-arn wins over assume-role-arn
    assume_only = profile(**{"sts-role-arn": None, "assume-role-arn": "arn:aws:iam::1:role/a"})
    vendor.vend(assume_only, ACCESS, LOCATION, write=False)
    assert sts.calls[-1][2]["RoleArn"] == "arn:aws:iam::1:role/a"


@pytest.mark.parametrize(
    "location",
    [
        "s3://other/wh/ns/t1",  # another bucket
        "s3://lake/elsewhere/t1",  # outside the key prefix
        "s3://lake/whx/ns/t1",  # a sibling of the key prefix
        "s3://lake/wh",  # the warehouse root itself
        "s3://lake/wh/ns/t*",  # a wildcard would widen the grant
        "file:///tmp/wh/t1",
    ],
)
def test_locations_outside_the_warehouse_are_refused(location: str) -> None:
    vendor, _, sts = vendor_with_fake()
    with pytest.raises(BadRequestError):
        vendor.vend(profile(), ACCESS, location, write=False)
    assert sts.calls == []


def test_vending_must_be_enabled() -> None:
    vendor, _, sts = vendor_with_fake()
    with pytest.raises(UnsupportedOperationError):
        vendor.vend(profile(**{"sts-enabled": False}), ACCESS, LOCATION, write=False)
    assert sts.calls == []


def test_repr_hides_every_secret() -> None:
    vendor, _, _ = vendor_with_fake()
    creds = vendor.vend(profile(), ACCESS, LOCATION, write=True)
    shown = repr(creds) + str(creds) + f"{creds}"
    assert LOCATION in shown
    for value in ("ASIAFAKE1", "vended-secret-1", "vended-token-1"):
        assert value not in shown


# --- the half-life cache -----------------------------------------------------------------


def test_reused_for_half_the_lifetime_then_refreshed() -> None:
    vendor, clock, sts = vendor_with_fake()
    first = vendor.vend(profile(), ACCESS, LOCATION, write=False)
    clock.now += 1799  # just under half of 3600 s
    assert vendor.vend(profile(), ACCESS, LOCATION, write=False) == first
    assert len(sts.calls) == 1
    clock.now += 1  # exactly half: a client would get less than half the validity
    second = vendor.vend(profile(), ACCESS, LOCATION, write=False)
    assert len(sts.calls) == 2
    assert second.config["s3.access-key-id"] == "ASIAFAKE2"
    assert second.expires_at_ms > first.expires_at_ms


def test_cache_key_separates_what_differs() -> None:
    vendor, _, sts = vendor_with_fake()
    vendor.vend(profile(), ACCESS, LOCATION, write=False)
    vendor.vend(profile(), ACCESS, LOCATION, write=True)  # write is not read
    vendor.vend(profile(), ACCESS, LOCATION + "0", write=False)  # sibling table
    vendor.vend(profile(**{"credential-id": "other"}), ACCESS, LOCATION, write=False)
    vendor.vend(profile(**{"sts-role-arn": "arn:aws:iam::1:role/b"}), ACCESS, LOCATION, write=False)
    vendor.vend(profile(**{"sts-endpoint": "http://sts:1"}), ACCESS, LOCATION, write=False)
    vendor.vend(profile(), ACCESS, LOCATION, write=False, external_id="e")
    assert len(sts.calls) == 7
    vendor.vend(profile(), ACCESS, LOCATION, write=True)
    assert len(sts.calls) == 7


def test_short_lived_answers_use_their_real_expiration() -> None:
    """An STS that grants less than asked is cached for half of what it granted."""
    clock = FakeClock()

    def short(
        access: S3Access, endpoint: str | None, region: str, params: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        return {
            "AccessKeyId": "ASIASHORT",
            "SecretAccessKey": "s",
            "SessionToken": "t",
            "Expiration": datetime.fromtimestamp(clock.now + 1000, tz=UTC),
        }

    vendor = CredentialVendor(clock=clock, assume_role=short)
    creds = vendor.vend(profile(), ACCESS, LOCATION, write=False)
    assert creds.expires_at_ms == int((clock.now + 1000) * 1000)
    calls = 0

    def counting(*args: Any) -> Mapping[str, Any]:
        nonlocal calls
        calls += 1
        return short(*args)

    vendor = CredentialVendor(clock=clock, assume_role=counting)
    vendor.vend(profile(), ACCESS, LOCATION, write=False)
    clock.now += 499
    vendor.vend(profile(), ACCESS, LOCATION, write=False)
    assert calls == 1
    clock.now += 1
    vendor.vend(profile(), ACCESS, LOCATION, write=False)
    assert calls == 2


def test_cache_is_bounded_and_evicts_the_oldest() -> None:
    vendor, _, sts = vendor_with_fake(max_entries=2)
    for n in (1, 2, 3):
        vendor.vend(profile(), ACCESS, f"{LOCATION}-{n}", write=False)
    assert len(sts.calls) == 3
    vendor.vend(profile(), ACCESS, f"{LOCATION}-3", write=False)
    vendor.vend(profile(), ACCESS, f"{LOCATION}-2", write=False)
    assert len(sts.calls) == 3
    vendor.vend(profile(), ACCESS, f"{LOCATION}-1", write=False)  # evicted: asked again
    assert len(sts.calls) == 4


def test_callers_cannot_change_the_cached_config() -> None:
    vendor, _, _ = vendor_with_fake()
    first = vendor.vend(profile(), ACCESS, LOCATION, write=False)
    first.config["s3.remote-signing-enabled"] = "true"
    storage_credentials(first)[0]["config"].clear()
    again = vendor.vend(profile(), ACCESS, LOCATION, write=False)
    assert "s3.remote-signing-enabled" not in again.config
    assert again.config["s3.access-key-id"] == "ASIAFAKE1"


def test_concurrent_vends_share_one_cache() -> None:
    vendor, _, sts = vendor_with_fake()
    vendor.vend(profile(), ACCESS, LOCATION, write=False)
    results: list[VendedCredentials] = []

    def worker() -> None:
        for n in range(50):
            results.append(vendor.vend(profile(), ACCESS, f"{LOCATION}-{n % 5}", write=False))
            results.append(vendor.vend(profile(), ACCESS, LOCATION, write=False))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 800
    # Concurrent misses may each call STS (documented); hits never do.
    assert len(sts.calls) <= 1 + 5 * 8
    assert {r.config["s3.access-key-id"] for r in results if r.prefix == LOCATION} == {"ASIAFAKE1"}

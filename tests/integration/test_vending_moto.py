"""STS credential vending against a real moto server with authentication switched on.

moto checks that vended keys, secrets and session tokens are genuine and enforces the
role's own policy, but it ignores session policies: the scoping policy sent to STS is
therefore asserted structurally in tests/unit/test_vending_policy.py, not here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from icelog.commands.storage.s3 import S3Access
from icelog.commands.storage.vending import (
    CredentialVendor,
    VendedCredentials,
    boto3_assume_role,
    storage_credentials,
)
from icelog.domain.errors import ServiceUnavailableError
from tests.support.moto_server import bucket_role, client_from, moto_s3
from tests.support.server import free_port

REGION = "us-east-1"
BUCKET = "lake"
LOCATION = f"s3://{BUCKET}/wh/ns/t1"


@dataclass(frozen=True)
class Moto:
    endpoint: str
    role_arn: str
    access: S3Access  # the catalog's own credential: a real IAM user's key


def _admin(service: str, endpoint: str) -> Any:
    # Before auth is switched on moto accepts any key.
    return boto3.client(
        service,
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id="setup",
        aws_secret_access_key="setup",
    )


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    with moto_s3(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        s3, iam = _admin("s3", endpoint), _admin("iam", endpoint)
        s3.create_bucket(Bucket=BUCKET)
        s3.create_bucket(Bucket="elsewhere")
        user = iam.create_user(UserName="icelog-catalog")["User"]
        iam.put_user_policy(
            UserName="icelog-catalog",
            PolicyName="assume",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}],
                }
            ),
        )
        key = iam.create_access_key(UserName="icelog-catalog")["AccessKey"]
        # The role reaches only the lake bucket: proves below that vended keys act as it.
        role = bucket_role(iam, user["Arn"], "lake-vended", "lake", BUCKET)
        # From here on moto rejects unknown keys, bad signatures and bad session tokens.
        # (A form-encoded body would be swallowed by moto's Flask: send octet-stream.)
        reply = httpx.post(
            f"{endpoint}/moto-api/reset-auth",
            content=b"0",
            headers={"Content-Type": "application/octet-stream"},
        )
        reply.raise_for_status()
        yield Moto(
            endpoint=endpoint,
            role_arn=str(role["Role"]["Arn"]),
            access=S3Access(
                region=REGION,
                endpoint=endpoint,
                path_style=True,
                access_key_id=key["AccessKeyId"],
                secret_access_key=key["SecretAccessKey"],
            ),
        )


def profile(moto: Moto, **changes: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "type": "s3",
        "bucket": BUCKET,
        "key-prefix": "wh",
        "region": REGION,
        "endpoint": moto.endpoint,
        "path-style-access": True,
        "flavor": "aws",
        "sts-enabled": True,
        "sts-endpoint": None,  # STS is reached at the S3 endpoint, as moto serves both
        "assume-role-arn": None,
        "sts-role-arn": moto.role_arn,
        "sts-token-validity-seconds": 900,
        "remote-signing-enabled": False,
        "allow-alternative-protocols": False,
        "base-location": f"s3://{BUCKET}/wh",
        "credential-id": "0b8a3f5e-8f7e-4a44-a51c-6c0ff3d5e9a2",
    }
    found.update(changes)
    return found


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class WallClock:
    """Real time that a test can push forward."""

    def __init__(self) -> None:
        self.skew = 0.0

    def __call__(self) -> float:
        return time.time() + self.skew


def test_vended_credentials_work_below_the_table_location(moto: Moto) -> None:
    before_ms = int(time.time() * 1000)
    creds = CredentialVendor().vend(profile(moto), moto.access, LOCATION, write=True)
    [storage] = storage_credentials(creds)
    assert storage["prefix"] == LOCATION
    config = storage["config"]
    assert config["s3.access-key-id"] != moto.access.access_key_id
    assert config["s3.access-key-id"].startswith("ASIA")
    assert config["s3.session-token"]
    assert config["s3.endpoint"] == moto.endpoint
    assert config["s3.path-style-access"] == "true"
    assert config["client.region"] == config["s3.region"] == REGION
    expires_ms = int(config["s3.session-token-expires-at-ms"])
    assert expires_ms == creds.expires_at_ms
    assert before_ms + 880_000 <= expires_ms <= int(time.time() * 1000) + 920_000

    client = client_from(config)
    key = "wh/ns/t1/data/00000-0.parquet"
    client.put_object(Bucket=BUCKET, Key=key, Body=b"PAR1")
    assert client.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"PAR1"
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix="wh/ns/t1/")
    assert [o["Key"] for o in listed["Contents"]] == [key]

    # The keys act as the role (its own policy is enforced by moto)...
    with pytest.raises(ClientError) as denied:
        client.put_object(Bucket="elsewhere", Key="x", Body=b"x")
    assert _code(denied.value) == "AccessDenied"
    # ...and they are checked: the token and secret are both needed.
    for broken in ({"s3.session-token": "forged"}, {"s3.secret-access-key": "forged"}):
        with pytest.raises(ClientError):
            client_from(config, **broken).get_object(Bucket=BUCKET, Key=key)


def test_reused_within_half_life_then_fetched_again(moto: Moto) -> None:
    calls: list[Mapping[str, Any]] = []

    def counted(
        access: S3Access, endpoint: str | None, region: str, params: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        calls.append(params)
        return boto3_assume_role(access, endpoint, region, params)  # the real call

    clock = WallClock()
    vendor = CredentialVendor(clock=clock, assume_role=counted)
    first = vendor.vend(profile(moto), moto.access, LOCATION, write=False)
    clock.skew = 400  # validity 900 s: still inside the first half
    again = vendor.vend(profile(moto), moto.access, LOCATION, write=False)
    assert again == first
    assert len(calls) == 1
    assert calls[0]["RoleArn"] == moto.role_arn
    assert calls[0]["DurationSeconds"] == 900

    clock.skew = 460  # past half of 900 s
    fresh = vendor.vend(profile(moto), moto.access, LOCATION, write=False)
    assert len(calls) == 2
    assert fresh.config["s3.access-key-id"] != first.config["s3.access-key-id"]
    assert fresh.expires_at_ms >= first.expires_at_ms
    client_from(fresh.config).list_objects_v2(Bucket=BUCKET, Prefix="wh/ns/t1/")


def _assert_no_secret(exc: ServiceUnavailableError, moto: Moto, *secrets: str) -> None:
    text = str(exc) + repr(exc) + exc.message
    assert "AssumeRole" in text
    for secret in (moto.access.secret_access_key, moto.access.access_key_id, *secrets):
        assert secret
        assert secret not in text
    assert exc.__cause__ is None  # nothing chained that a traceback could print


def test_unreachable_sts_fails_fast_without_secrets(moto: Moto) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    vendor = CredentialVendor()
    started = time.monotonic()
    with pytest.raises(ServiceUnavailableError) as failed:
        vendor.vend(
            profile(moto, **{"sts-endpoint": closed}),
            moto.access,
            LOCATION,
            write=False,
            external_id="external-id-is-private",
        )
    assert time.monotonic() - started < 30
    # One phrase for every failure that is not an STS answer: the check maps no network.
    assert "no STS service answered at the endpoint" in str(failed.value)
    assert closed in str(failed.value)
    _assert_no_secret(failed.value, moto, "external-id-is-private")


def test_rejected_assume_role_names_the_code_without_secrets(moto: Moto) -> None:
    forged = S3Access(
        region=REGION,
        endpoint=moto.endpoint,
        path_style=True,
        access_key_id="AKIAFORGEDFORGED0000",
        secret_access_key="forged-secret-never-shown",
        session_token="forged-session-token",
    )
    with pytest.raises(ServiceUnavailableError) as failed:
        CredentialVendor().vend(profile(moto), forged, LOCATION, write=False)
    assert "InvalidClientTokenId" in str(failed.value)
    assert "HTTP 403" in str(failed.value)
    _assert_no_secret(
        failed.value,
        moto,
        "AKIAFORGEDFORGED0000",
        "forged-secret-never-shown",
        "forged-session-token",
    )


def test_repr_of_real_credentials_hides_them(moto: Moto) -> None:
    creds: VendedCredentials = CredentialVendor().vend(
        profile(moto), moto.access, LOCATION, write=False
    )
    shown = repr(creds)
    for key in ("s3.access-key-id", "s3.secret-access-key", "s3.session-token"):
        assert creds.config[key] not in shown

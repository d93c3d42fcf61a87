"""Remote signing against moto with authentication on: the signatures are really checked.

moto only verifies SigV4 once auth mode is on (`/moto-api/reset-auth`), and from then on
only for keys it issued, so the module first creates an IAM user with an admin policy.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import boto3
import httpx
import pytest

from icelog.commands.storage.s3 import S3Access
from icelog.commands.storage.signing import check_allowed, parse_target, sign
from tests.support.moto_server import access_with_bucket, moto_s3

BUCKET = "lake"
ALLOWED = [f"s3://{BUCKET}/wh/t1"]
ADMIN_POLICY = json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
)
OCTETS = {"Content-Type": "application/octet-stream"}  # moto (Flask) eats form bodies


def set_auth(endpoint: str, on: bool) -> None:
    # "0" requests before auth starts (i.e. now); a huge count means never.
    body = b"0" if on else b"9999999"
    response = httpx.post(f"{endpoint}/moto-api/reset-auth", content=body, headers=OCTETS)
    response.raise_for_status()


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, S3Access]]:
    with moto_s3(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        boot = access_with_bucket(endpoint, "AKIDBOOTSTRAP", "bootstrap", BUCKET)
        iam = boto3.client(
            "iam",
            region_name="us-east-1",
            endpoint_url=endpoint,
            aws_access_key_id="AKIDBOOTSTRAP",
            aws_secret_access_key="bootstrap",
        )
        iam.create_user(UserName="catalog")
        iam.put_user_policy(UserName="catalog", PolicyName="admin", PolicyDocument=ADMIN_POLICY)
        key = iam.create_access_key(UserName="catalog")["AccessKey"]
        access = replace(
            boot, access_key_id=key["AccessKeyId"], secret_access_key=key["SecretAccessKey"]
        )
        set_auth(endpoint, on=True)
        try:
            yield endpoint, access
        finally:
            set_auth(endpoint, on=False)


def send(
    access: S3Access,
    method: str,
    uri: str,
    *,
    client_headers: dict[str, str] | None = None,
    content: bytes = b"",
    send_to: str | None = None,
    body: str | None = None,
) -> httpx.Response:
    """What a remote-signing client does: describe, check, get headers, add them, send."""
    client_headers = dict(client_headers or {})
    target = parse_target(uri, endpoint=access.endpoint, region=access.region)
    check_allowed(target, method, allowed=ALLOWED, write=True, body=body)
    response: dict[str, Any] = sign(
        access,
        region="us-east-1",
        method=method,
        uri=uri,
        headers={k: [v] for k, v in client_headers.items()},
        body=body,
    )
    headers = client_headers | {k: ", ".join(v) for k, v in response["headers"].items()}
    return httpx.request(method, send_to or response["uri"], headers=headers, content=content)


def _refused(moto: tuple[str, S3Access], path: str, error: str, **forged: Any) -> None:
    """A GET of `path` in the bucket, signed with the access but for `forged`, is refused
    by moto (403) with S3 error `error`."""
    endpoint, access = moto
    response = send(replace(access, **forged), "GET", f"{endpoint}/{BUCKET}{path}")
    assert response.status_code == 403
    assert error in response.text


def test_moto_rejects_unknown_keys_once_auth_is_on(moto: tuple[str, S3Access]) -> None:
    # Sanity check that the server under test really verifies requests.
    _refused(moto, "/wh/t1/x", "InvalidAccessKeyId", access_key_id="AKIDUNKNOWN0000000")


def test_signed_put_and_get_round_trip(moto: tuple[str, S3Access]) -> None:
    endpoint, access = moto
    data = b"PAR1 some parquet bytes"
    uri = f"{endpoint}/{BUCKET}/wh/t1/data/{quote('part 0+1=ok.parquet')}"
    put = send(
        access,
        "PUT",
        uri,
        client_headers=OCTETS | {"x-amz-content-sha256": hashlib.sha256(data).hexdigest()},
        content=data,
    )
    assert put.status_code == 200, put.text
    get = send(access, "GET", uri)
    assert get.status_code == 200, get.text
    assert get.content == data
    head = send(access, "HEAD", uri)
    assert head.status_code == 200
    assert head.headers["content-length"] == str(len(data))


def test_unsigned_payload_put_and_listing(moto: tuple[str, S3Access]) -> None:
    endpoint, access = moto
    uri = f"{endpoint}/{BUCKET}/wh/t1/metadata/v1.metadata.json"
    put = send(access, "PUT", uri, client_headers=OCTETS, content=b"{}")
    assert put.status_code == 200, put.text
    listing = send(access, "GET", f"{endpoint}/{BUCKET}?list-type=2&prefix=wh%2Ft1%2Fmetadata%2F")
    assert listing.status_code == 200, listing.text
    assert "<Key>wh/t1/metadata/v1.metadata.json</Key>" in listing.text


def test_a_signature_only_fits_its_own_request(moto: tuple[str, S3Access]) -> None:
    endpoint, access = moto
    data = b"original"
    uri = f"{endpoint}/{BUCKET}/wh/t1/data/signed-for-this.bin"
    assert send(access, "PUT", uri, client_headers=OCTETS, content=data).status_code == 200
    other = f"{endpoint}/{BUCKET}/wh/t1/data/sent-to-that.bin"
    moved = send(access, "PUT", uri, client_headers=OCTETS, content=b"x", send_to=other)
    assert moved.status_code == 403
    assert "SignatureDoesNotMatch" in moved.text
    # Tampering with the signature itself.
    signed = sign(access, region="us-east-1", method="GET", uri=uri, headers={})["headers"]
    headers = {k: v[0] for k, v in signed.items()}
    last = headers["Authorization"][-1]
    headers["Authorization"] = headers["Authorization"][:-1] + ("0" if last != "0" else "1")
    assert httpx.get(uri, headers=headers).status_code == 403
    # A signed header changed after signing.
    tagged = {"x-amz-meta-owner": "t1"}
    signed = sign(
        access, region="us-east-1", method="GET", uri=uri, headers={"x-amz-meta-owner": ["t1"]}
    )["headers"]
    headers = {k: v[0] for k, v in signed.items()} | {"x-amz-meta-owner": "t2"}
    assert httpx.get(uri, headers=headers).status_code == 403
    assert send(access, "GET", uri, client_headers=tagged).status_code == 200


def test_a_made_up_secret_is_rejected(moto: tuple[str, S3Access]) -> None:
    path = "/wh/t1/data/signed-for-this.bin"
    _refused(moto, path, "SignatureDoesNotMatch", secret_access_key="not-the-secret")


def test_bulk_delete_with_a_pinned_body(moto: tuple[str, S3Access]) -> None:
    endpoint, access = moto
    keys = ["wh/t1/trash/a.bin", "wh/t1/trash/b.bin"]
    for key in keys:
        assert send(access, "PUT", f"{endpoint}/{BUCKET}/{key}", content=b"x").status_code == 200
    objects = "".join(f"<Object><Key>{key}</Key></Object>" for key in keys)
    body = f'<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{objects}</Delete>'
    md5 = base64.b64encode(hashlib.md5(body.encode()).digest()).decode()  # noqa: S324
    response = send(
        access,
        "POST",
        f"{endpoint}/{BUCKET}?delete",
        client_headers={"Content-MD5": md5, "Content-Type": "application/xml"},
        content=body.encode(),
        body=body,
    )
    assert response.status_code == 200, response.text
    for key in keys:
        assert send(access, "HEAD", f"{endpoint}/{BUCKET}/{key}").status_code == 404


def test_session_credentials_sign_with_their_token(moto: tuple[str, S3Access]) -> None:
    endpoint, access = moto
    kwargs: dict[str, Any] = {
        "region_name": "us-east-1",
        "endpoint_url": endpoint,
        "aws_access_key_id": access.access_key_id,
        "aws_secret_access_key": access.secret_access_key,
    }
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
    }
    iam = boto3.client("iam", **kwargs)
    role = iam.create_role(RoleName="signer", AssumeRolePolicyDocument=json.dumps(trust))
    iam.put_role_policy(RoleName="signer", PolicyName="admin", PolicyDocument=ADMIN_POLICY)
    found = boto3.client("sts", **kwargs).assume_role(
        RoleArn=role["Role"]["Arn"], RoleSessionName="catalog"
    )["Credentials"]
    session = replace(
        access,
        access_key_id=found["AccessKeyId"],
        secret_access_key=found["SecretAccessKey"],
        session_token=found["SessionToken"],
    )
    uri = f"{endpoint}/{BUCKET}/wh/t1/data/session.bin"
    signed = sign(session, region="us-east-1", method="PUT", uri=uri, headers={})["headers"]
    assert signed["X-Amz-Security-Token"] == [found["SessionToken"]]
    assert send(session, "PUT", uri, client_headers=OCTETS, content=b"s").status_code == 200
    assert send(session, "GET", uri).content == b"s"

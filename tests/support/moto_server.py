"""An S3-compatible server for tests: moto in server mode on a free loopback port."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config

from icelog.commands.storage.s3 import S3Access, client_for
from tests.support.server import free_port


@contextmanager
def moto_s3(log: Path) -> Iterator[str]:
    """Yields the endpoint URL (`http://127.0.0.1:PORT`)."""
    port = free_port()
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("moto_server")),
                "-H",
                "127.0.0.1",
                "-p",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(endpoint, timeout=1).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("moto_server did not start")
            time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)


# Any key works while moto's auth is relaxed (set-up before enforce_auth).
SETUP_KEY = "bootstrap"


def client(endpoint: str, service: str, key: str = SETUP_KEY, secret: str = SETUP_KEY) -> Any:
    """A boto3 client for moto."""
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
    )


def _set_auth(endpoint: str, free_actions: int) -> None:
    # moto counts requests and enforces IAM after `free_actions` of them; the body must
    # not be form-encoded (moto's Flask app would swallow it).
    response = httpx.post(
        f"{endpoint}/moto-api/reset-auth",
        content=str(free_actions).encode(),
        headers={"Content-Type": "application/octet-stream"},
        timeout=10,
    )
    response.raise_for_status()


def enforce_auth(endpoint: str) -> None:
    """From now on moto checks access keys, signatures and IAM policies."""
    _set_auth(endpoint, 0)


def relax_auth(endpoint: str) -> None:
    """Back to moto's default: any key works."""
    _set_auth(endpoint, 9_999_999)


def admin_user(endpoint: str, name: str) -> tuple[str, str]:
    """An IAM user allowed everything, with an access key: (key id, secret). Create it
    while auth is relaxed."""
    iam = client(endpoint, "iam")
    iam.create_user(UserName=name)
    iam.put_user_policy(
        UserName=name,
        PolicyName="all",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
            }
        ),
    )
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return str(key["AccessKeyId"]), str(key["SecretAccessKey"])


def vended_role(endpoint: str, user: str, bucket: str) -> str:
    """A role `user` may assume, allowed everything on `bucket` only (what an operator
    sets up for STS vending; docs/storage.md). Its ARN."""
    iam = client(endpoint, "iam")
    user_arn = iam.get_user(UserName=user)["User"]["Arn"]
    role = bucket_role(iam, user_arn, f"vended-{bucket}", "bucket", bucket)
    return str(role["Role"]["Arn"])


def bucket_role(iam: Any, user_arn: str, name: str, policy: str, bucket: str) -> Any:
    """Role `name`, which the user `user_arn` may assume and whose policy `policy` allows
    everything on `bucket` only: IAM's answer to its creation."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": user_arn}, "Action": "sts:AssumeRole"}
        ],
    }
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
    iam.put_role_policy(
        RoleName=name,
        PolicyName=policy,
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "s3:*",
                        "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                    }
                ],
            }
        ),
    )
    return role


def client_from(config: Mapping[str, str], **override: str) -> Any:
    """An S3 client built only from what a REST client receives (`override` changes some
    of it)."""
    values = {**config, **override}
    path_style = values["s3.path-style-access"] == "true"
    return boto3.client(
        "s3",
        region_name=values["client.region"],
        endpoint_url=values["s3.endpoint"],
        aws_access_key_id=values["s3.access-key-id"],
        aws_secret_access_key=values["s3.secret-access-key"],
        aws_session_token=values["s3.session-token"],
        config=Config(
            s3={"addressing_style": "path" if path_style else "auto"},
            retries={"max_attempts": 1},
        ),
    )


def hide_ambient_aws_credentials(monkeypatch: Any) -> None:
    """No AWS key, token, profile or instance metadata in this process's environment: what
    reaches S3 is only what the test hands over."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def access_with_bucket(endpoint: str, key: str, secret: str, bucket: str) -> S3Access:
    """The catalog's access to moto at `endpoint` (path-style) with this key, once it has
    made `bucket` with it."""
    access = S3Access(
        region="us-east-1",
        endpoint=endpoint,
        path_style=True,
        access_key_id=key,
        secret_access_key=secret,
    )
    client_for(access).create_bucket(Bucket=bucket)
    return access

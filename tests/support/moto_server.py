"""An S3-compatible server for tests: moto in server mode on a free loopback port."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import httpx

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
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": user_arn}, "Action": "sts:AssumeRole"}
        ],
    }
    name = f"vended-{bucket}"
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
    iam.put_role_policy(
        RoleName=name,
        PolicyName="bucket",
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
    return str(role["Role"]["Arn"])

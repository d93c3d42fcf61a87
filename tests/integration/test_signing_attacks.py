"""The remote signer under attack, with OpenID auth on and a real moto S3 checking SigV4.

The signer once signed a Host the client chose while it checked the bucket of the URI. A
user with `create` on a namespace of a warehouse without key-prefix makes a table at
`s3://lake/victim`, asks to sign `GET http://lake.<endpoint>/victim/secret.txt` with
`Host: <endpoint>` and sends it path-style: S3 reads bucket `victim`. Here every such trick is
refused by both signer paths (per table and warehouse-wide), and the honest requests a
PyIceberg-style client signs, virtual-host and path-style, still work.

The endpoint is `http://localhost:<port>` so that moto serves virtual hosts
(`lake.localhost`); `*.localhost` is resolved to 127.0.0.1 for the test's clients.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit
from uuid import uuid4

import boto3
import httpx
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.integration.conftest import SCHEMA, Authed
from tests.support.callers import Caller
from tests.support.moto_server import admin_user, client, enforce_auth, moto_s3, relax_auth

MGMT = "/management/v1"
WAREHOUSE_BUCKET = "lake"
VICTIM = "victim"
SECRET_TEXT = b"the victim bucket's secret"


@dataclass(frozen=True)
class S3:
    port: int
    key: str
    secret: str

    @property
    def endpoint(self) -> str:
        return f"http://localhost:{self.port}"

    def admin(self) -> Any:
        return client(f"http://127.0.0.1:{self.port}", "s3", self.key, self.secret)

    def exists(self, bucket: str, key: str) -> bool:
        try:
            self.admin().head_object(Bucket=bucket, Key=key)
        except ClientError:
            return False
        return True


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3]:
    with moto_s3(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        port = urlsplit(endpoint).port
        assert port is not None
        key, secret = admin_user(endpoint, "icelog")
        found = S3(port, key, secret)
        admin = found.admin()
        admin.create_bucket(Bucket=WAREHOUSE_BUCKET)
        admin.create_bucket(Bucket=VICTIM)
        # What the tricks below would reach: `victim/secret.txt` (path-style send of a
        # virtual-host check) and `victim/lake/victim/secret.txt` (the other way round).
        for name in ("secret.txt", "lake/victim/secret.txt"):
            admin.put_object(Bucket=VICTIM, Key=name, Body=SECRET_TEXT)
        enforce_auth(endpoint)  # from here on moto checks every signature
        try:
            yield found
        finally:
            relax_auth(endpoint)


@pytest.fixture(autouse=True)
def localhost_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """`lake.localhost` and friends reach the loopback moto (RFC 6761 says they may)."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and (host == "localhost" or host.endswith(".localhost")):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@dataclass
class Scene:
    s3: S3
    prefix: str
    bob: Caller  # `create` on namespace ns only; made and owns table ns.victim
    carol: Caller  # select + modify on the whole warehouse

    @property
    def table_signer(self) -> str:
        return f"/catalog/v1/{self.prefix}/namespaces/ns/tables/victim/sign"

    @property
    def warehouse_signer(self) -> str:
        return f"/catalog/v1/{self.prefix}/v1/aws/s3/sign"


@pytest.fixture
def scene(authed: Authed, s3: S3) -> Scene:
    alice, bob, carol = Caller(authed, "alice"), Caller(authed, "bob"), Caller(authed, "carol")
    alice.ok("POST", f"{MGMT}/bootstrap", {"accept-terms-of-use": True})
    name = f"signed-{uuid4().hex[:8]}"
    profile = {
        "type": "s3",
        "bucket": WAREHOUSE_BUCKET,  # no key-prefix: any key of the bucket may be a table's
        "region": "us-east-1",
        "endpoint": s3.endpoint,
        "path-style-access": True,
        "flavor": "s3-compat",
        "remote-signing-enabled": True,
    }
    credential = {
        "type": "s3",
        "credential-type": "access-key",
        "access-key-id": s3.key,
        "secret-access-key": s3.secret,
    }
    alice.ok(
        "POST",
        f"{MGMT}/warehouse",
        {"warehouse-name": name, "storage-profile": profile, "storage-credential": credential},
    )
    prefix = alice.ok("GET", "/catalog/v1/config", params={"warehouse": name})["overrides"][
        "prefix"
    ]
    alice.ok("POST", f"/catalog/v1/{prefix}/namespaces", {"namespace": ["ns"]})
    nid = alice.ok("GET", f"{MGMT}/warehouse/{prefix}/namespace-id", params={"namespace": "ns"})[
        "namespace-id"
    ]
    alice.ok(
        "POST",
        f"{MGMT}/permissions/namespace/{nid}/assignments",
        {"writes": [{"type": "create", "user": bob.id}]},
    )
    alice.ok(
        "POST",
        f"{MGMT}/permissions/warehouse/{prefix}/assignments",
        {"writes": [{"type": "select", "user": carol.id}, {"type": "modify", "user": carol.id}]},
    )
    # The bucket outlives each test's warehouse: what an earlier test wrote at `victim/`
    # would make the location one that already holds files (a warehouse-level act).
    admin = s3.admin()
    for listed in admin.get_paginator("list_objects_v2").paginate(
        Bucket=WAREHOUSE_BUCKET, Prefix="victim/"
    ):
        for item in listed.get("Contents", []):
            admin.delete_object(Bucket=WAREHOUSE_BUCKET, Key=item["Key"])
    bob.ok(
        "POST",
        f"/catalog/v1/{prefix}/namespaces/ns/tables",
        {"name": "victim", "schema": SCHEMA, "location": f"s3://{WAREHOUSE_BUCKET}/victim"},
    )
    return Scene(s3, prefix, bob, carol)


def sign_request(
    caller: Caller, signer: str, method: str, uri: str, headers: dict[str, str]
) -> Any:
    return caller(
        "POST",
        signer,
        {
            "region": "us-east-1",
            "method": method,
            "uri": uri,
            "headers": {k: [v] for k, v in headers.items()},
        },
    )


def tricks(s3: S3) -> list[tuple[str, str, dict[str, str], str, str]]:
    """(method, uri to sign, client headers, url actually sent, Host actually sent)."""
    port = s3.port
    return [
        # The attack: checked as lake/victim/..., sent path-style to the endpoint.
        (
            "GET",
            f"http://lake.localhost:{port}/victim/secret.txt",
            {"host": f"localhost:{port}"},
            f"http://localhost:{port}/victim/secret.txt",
            f"localhost:{port}",
        ),
        (
            "GET",
            f"http://lake.localhost:{port}/victim/secret.txt",
            {":authority": f"localhost:{port}"},
            f"http://localhost:{port}/victim/secret.txt",
            f"localhost:{port}",
        ),
        # The other way round: checked path-style, sent to the victim's virtual host.
        (
            "GET",
            f"http://localhost:{port}/lake/victim/secret.txt",
            {"Host": f"victim.localhost:{port}"},
            f"http://victim.localhost:{port}/lake/victim/secret.txt",
            f"victim.localhost:{port}",
        ),
        # A write: planting an object in the victim bucket.
        (
            "PUT",
            f"http://lake.localhost:{port}/victim/planted.txt",
            {"Host": f"localhost:{port}", "x-amz-content-sha256": "UNSIGNED-PAYLOAD"},
            f"http://localhost:{port}/victim/planted.txt",
            f"localhost:{port}",
        ),
        # A routing header a proxy would follow.
        (
            "GET",
            f"http://lake.localhost:{port}/victim/secret.txt",
            {"X-Forwarded-Host": f"localhost:{port}"},
            f"http://localhost:{port}/victim/secret.txt",
            f"localhost:{port}",
        ),
    ]


def assert_refused_and_harmless(
    scene: Scene, caller: Caller, signer: str, trick: tuple[str, str, dict[str, str], str, str]
) -> None:
    method, uri, headers, url, host = trick
    answer = sign_request(caller, signer, method, uri, headers)
    if answer.status_code == 200:
        # Show what the signature would have done (this is what today's code allowed).
        signed = {k: ", ".join(v) for k, v in answer.json()["headers"].items()}
        sent = {k: v for k, v in headers.items() if not k.startswith(":")}
        sent = sent | signed | {"Host": host}
        sent.pop("host", None)
        reply = httpx.request(method, url, headers=sent, content=b"planted")
        assert reply.status_code >= 400, f"{method} {url} went through: {reply.text[:200]}"
    assert answer.status_code in (400, 403), answer.text
    assert answer.json()["error"]["type"] in ("ForbiddenException", "BadRequestException")
    assert not scene.s3.exists(VICTIM, "planted.txt")


@pytest.mark.attack
def test_attack_host_tricks_through_the_table_signer(scene: Scene) -> None:
    for trick in tricks(scene.s3):
        assert_refused_and_harmless(scene, scene.bob, scene.table_signer, trick)


@pytest.mark.attack
def test_attack_host_tricks_through_the_warehouse_signer(scene: Scene) -> None:
    # Bob holds no warehouse-wide right: that signer refuses him whatever he asks.
    method, uri, headers, _, _ = tricks(scene.s3)[0]
    refused = sign_request(scene.bob, scene.warehouse_signer, method, uri, headers)
    assert refused.status_code == 403, refused.text
    # Carol may read and write the whole warehouse, not another bucket.
    for trick in tricks(scene.s3):
        assert_refused_and_harmless(scene, scene.carol, scene.warehouse_signer, trick)


@pytest.mark.attack
def test_attack_a_signature_without_a_client_host_fits_only_its_own_host(scene: Scene) -> None:
    port = scene.s3.port
    uri = f"http://lake.localhost:{port}/victim/secret.txt"
    answer = sign_request(scene.bob, scene.table_signer, "GET", uri, {})
    assert answer.status_code == 200, answer.text
    signed = {k: ", ".join(v) for k, v in answer.json()["headers"].items()}
    moved = httpx.get(f"http://localhost:{port}/victim/secret.txt", headers=signed)
    assert moved.status_code == 403 and "SignatureDoesNotMatch" in moved.text
    moved = httpx.get(uri, headers=signed | {"Host": f"localhost:{port}"})
    assert moved.status_code == 403 and "SignatureDoesNotMatch" in moved.text


class SignRefused(Exception):
    pass


def pyiceberg_style_client(scene: Scene, caller: Caller, signer: str, style: str) -> Any:
    """A botocore client signed the way PyIceberg's S3V4RestSigner does (a before-sign hook
    that describes the request and adds the returned headers); bulk deletes also send
    their body, as Iceberg-Java does."""

    def hook(request: Any, **_: Any) -> None:
        headers = {
            k: [v.decode() if isinstance(v, bytes) else str(v)] for k, v in request.headers.items()
        }
        body: dict[str, Any] = {
            "region": "us-east-1",
            "method": request.method,
            "uri": request.url,
            "headers": headers,
        }
        if request.method == "POST" and "delete" in urlsplit(request.url).query:
            data = request.body
            body["body"] = data.decode() if isinstance(data, bytes) else str(data)
        answer = caller("POST", signer, body)
        if answer.status_code != 200:
            raise SignRefused(answer.text)  # PyIceberg raises its SignError
        for key, value in answer.json()["headers"].items():
            request.headers.add_header(key, ", ".join(value))
        request.url = answer.json()["uri"]

    s3 = boto3.client(
        "s3",
        endpoint_url=scene.s3.endpoint,
        region_name="us-east-1",
        aws_access_key_id="unused",
        aws_secret_access_key="unused",
        config=Config(
            signature_version=UNSIGNED,
            s3={"addressing_style": style},
            retries={"max_attempts": 1},
        ),
    )
    s3.meta.events.register("before-sign.s3", hook)
    return s3


@pytest.mark.parametrize("style", ["virtual", "path"])
def test_honest_signed_requests_work_in_both_styles(scene: Scene, style: str) -> None:
    for caller, signer in (
        (scene.bob, scene.table_signer),
        (scene.carol, scene.warehouse_signer),
    ):
        s3 = pyiceberg_style_client(scene, caller, signer, style)
        key = f"victim/data/{style}-{uuid4().hex[:6]}.parquet"
        s3.put_object(Bucket=WAREHOUSE_BUCKET, Key=key, Body=b"PAR1 rows")
        assert s3.get_object(Bucket=WAREHOUSE_BUCKET, Key=key)["Body"].read() == b"PAR1 rows"
        assert s3.head_object(Bucket=WAREHOUSE_BUCKET, Key=key)["ContentLength"] == 9
        listed = s3.list_objects_v2(Bucket=WAREHOUSE_BUCKET, Prefix="victim/data/")
        assert key in [o["Key"] for o in listed["Contents"]]
        if signer == scene.table_signer:
            # Bulk delete (its body is checked and pinned by its SHA-256). The warehouse-wide
            # signer finds the table by the URI, which names no key for a bulk delete.
            deleted = s3.delete_objects(
                Bucket=WAREHOUSE_BUCKET, Delete={"Objects": [{"Key": key}], "Quiet": True}
            )
            assert not deleted.get("Errors"), deleted
        else:
            s3.delete_object(Bucket=WAREHOUSE_BUCKET, Key=key)
        assert not scene.s3.exists(WAREHOUSE_BUCKET, key)
        # Nothing outside the table, even for the honest client.
        with pytest.raises(SignRefused):
            s3.get_object(Bucket=VICTIM, Key="secret.txt")

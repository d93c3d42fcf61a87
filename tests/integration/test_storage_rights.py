"""Storage access follows the data rights, with authentication on.

What a caller gets to reach a table's files — vended S3 credentials, remote-signing
configuration, signatures — follows `read_data` / `write_data` on that table, on every path
that hands them out (loadTable, createTable, registerTable, `/credentials`, the signer, an
Idempotency-Key replay):

- `describe` only: the metadata, and neither credentials nor signer configuration;
- `select` (read_data): read-only credentials; the signer signs reads only;
- `modify` (write_data): read-write credentials; the signer signs writes too;
- a staged create at a location the client chose gets nothing (the location is claimed by
  no table yet: it might lie on another table's files); at the default location, write
  credentials for a caller who may create there;
- an Idempotency-Key is bound to the user who first used it: another user's replay is
  refused (422), never answered with the first user's result.

moto checks vended keys, secrets and session tokens and the role's own policy, but not the
session policy AssumeRole is given: what scopes credentials to read-only. So the policy
each vend sends to STS is recorded and asserted on (read-only: no PutObject or
DeleteObject), and moto shows that the keys are real (a GET with them works).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from icelog.commands.storage.s3 import KIND as S3_KIND
from icelog.commands.storage.s3 import S3Access
from icelog.commands.storage.vending import boto3_assume_role
from tests.integration.conftest import SCHEMA, Authed
from tests.support.callers import Caller
from tests.support.moto_server import (
    admin_user,
    client,
    client_from,
    enforce_auth,
    hide_ambient_aws_credentials,
    moto_s3,
    relax_auth,
    vended_role,
)

pytestmark = pytest.mark.attack

MGMT = "/management/v1"
BUCKET = "lake"
REGION = "us-east-1"
VENDED = {"X-Iceberg-Access-Delegation": "vended-credentials"}
SIGNING = {"X-Iceberg-Access-Delegation": "remote-signing"}
_SECRET_KEYS = ("s3.access-key-id", "s3.secret-access-key", "s3.session-token")
_SIGNER_KEYS = ("s3.remote-signing-enabled", "s3.signer", "s3.signer.uri", "s3.signer.endpoint")


@dataclass(frozen=True)
class Moto:
    endpoint: str
    key: str
    secret: str
    role: str


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    with moto_s3(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        key, secret = admin_user(endpoint, "icelog")
        client(endpoint, "s3").create_bucket(Bucket=BUCKET)
        role = vended_role(endpoint, "icelog", BUCKET)
        enforce_auth(endpoint)  # from here on moto checks every key, token and signature
        try:
            yield Moto(endpoint, key, secret, role)
        finally:
            relax_auth(endpoint)


@pytest.fixture(autouse=True)
def no_ambient_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    hide_ambient_aws_credentials(monkeypatch)


@dataclass
class Scene:
    authed: Authed
    moto: Moto
    alice: Caller  # the server's admin, owner of everything below
    prefix: str
    warehouse_id: str
    namespace_id: str
    table_id: str
    # The session policy of every AssumeRole the catalog made, in order.
    policies: list[dict[str, Any]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"/catalog/v1/{self.prefix}{path}"

    def user(self, subject: str) -> Caller:
        return Caller(self.authed, subject, subject.capitalize())

    def grant(self, path: str, relation: str, who: Caller) -> None:
        self.alice.ok(
            "POST",
            f"{MGMT}/permissions/{path}/assignments",
            {"writes": [{"type": relation, "user": who.id}]},
        )

    def grant_table(self, relation: str, who: Caller) -> None:
        self.grant(f"warehouse/{self.warehouse_id}/table/{self.table_id}", relation, who)

    def grant_namespace(self, relation: str, who: Caller) -> None:
        self.grant(f"namespace/{self.namespace_id}", relation, who)

    def create(
        self,
        who: Caller,
        namespace: str,
        name: str,
        *,
        headers: Mapping[str, str] | None = None,
        location: str | None = None,
        stage: bool | None = None,
    ) -> Any:
        """`who` asks to create table `name` (one column) in `namespace`, perhaps at
        `location`, perhaps staged: the answer, whatever it is."""
        body: dict[str, Any] = {"name": name, "schema": SCHEMA}
        if location is not None:
            body["location"] = location
        if stage is not None:
            body["stage-create"] = stage
        url = self.url(f"/namespaces/{namespace}/tables")
        return who("POST", url, json=body, headers=dict(headers or {}))

    def load(self, who: Caller, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        response = who("GET", self.url("/namespaces/ns/tables/t"), headers=dict(headers or {}))
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()
        return found


@pytest.fixture
def scene(authed: Authed, moto: Moto, monkeypatch: pytest.MonkeyPatch) -> Scene:
    alice = Caller(authed, "alice", "Alice")
    alice.ok("POST", f"{MGMT}/bootstrap", {"accept-terms-of-use": True})
    name = f"wh-{uuid.uuid4().hex[:8]}"
    key_prefix = f"wh-{uuid.uuid4().hex[:8]}"  # one module-wide bucket, a prefix per test
    created = alice.ok(
        "POST",
        f"{MGMT}/warehouse",
        {
            "warehouse-name": name,
            "storage-profile": {
                "type": "s3",
                "bucket": BUCKET,
                "key-prefix": key_prefix,
                "region": REGION,
                "endpoint": moto.endpoint,
                "path-style-access": True,
                "flavor": "s3-compat",
                "sts-enabled": True,
                "sts-role-arn": moto.role,
                "remote-signing-enabled": True,
            },
            "storage-credential": {
                "type": "s3",
                "credential-type": "access-key",
                "access-key-id": moto.key,
                "secret-access-key": moto.secret,
            },
        },
    )
    config = alice.ok("GET", "/catalog/v1/config", params={"warehouse": name})
    prefix = config["overrides"]["prefix"]
    alice.ok("POST", f"/catalog/v1/{prefix}/namespaces", {"namespace": ["ns"]})
    table = alice.ok(
        "POST", f"/catalog/v1/{prefix}/namespaces/ns/tables", {"name": "t", "schema": SCHEMA}
    )
    ns = alice.ok("GET", f"{MGMT}/warehouse/{prefix}/namespace-id", params={"namespace": "ns"})
    found = Scene(
        authed,
        moto,
        alice,
        prefix,
        str(created["warehouse-id"]),
        ns["namespace-id"],
        table["metadata"]["table-uuid"],
    )
    # The S3 kind's vendor, which the process shares (its cache, its STS call).
    vendor: Any = S3_KIND.vendor

    def recording(
        access: S3Access, endpoint: str | None, region: str, params: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        found.policies.append(json.loads(params["Policy"]))
        return boto3_assume_role(access, endpoint, region, params)

    monkeypatch.setattr(vendor, "_assume_role", recording)
    vendor._cache.clear()
    return found


# -- what an answer hands out ---------------------------------------------------------------
def credentials_of(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = answer.get("storage-credentials") or []
    return found


def assert_no_storage_access(answer: Mapping[str, Any]) -> None:
    """Neither credentials nor a signer: the caller cannot reach the files through us."""
    assert "storage-credentials" not in answer, answer.get("storage-credentials")
    assert "remote-signing-config" not in answer
    config = answer.get("config") or {}
    leaked = [k for k in (*_SECRET_KEYS, *_SIGNER_KEYS) if k in config]
    assert leaked == [], leaked
    assert "client.refresh-credentials-endpoint" not in config


def actions_of(policy: Mapping[str, Any]) -> set[str]:
    found: set[str] = set()
    for statement in policy["Statement"]:
        if statement.get("Effect") == "Allow":
            actions = statement["Action"]
            found |= {actions} if isinstance(actions, str) else set(actions)
    return found


def s3_client(config: Mapping[str, str]) -> Any:
    """An S3 client made from nothing but what the catalog handed out (path-style)."""
    return client_from({**config, "s3.path-style-access": "true"})


def key_of(location: str) -> str:
    return location.split(f"s3://{BUCKET}/", 1)[1]


def sign(scene: Scene, who: Caller, method: str, key: str, *, table: bool = True) -> Any:
    path = "/namespaces/ns/tables/t/sign" if table else "/v1/aws/s3/sign"
    return who(
        "POST",
        scene.url(path),
        {
            "region": REGION,
            "method": method,
            "uri": f"{scene.moto.endpoint}/{BUCKET}/{key}",
            "headers": {},
        },
    )


# -- loadTable ------------------------------------------------------------------------------
def test_describe_only_gets_neither_credentials_nor_a_signer(scene: Scene) -> None:
    bob = scene.user("bob")
    scene.grant_table("describe", bob)
    for headers in (
        VENDED,
        SIGNING,
        {},
        {"X-Iceberg-Access-Delegation": "vended-credentials,remote-signing"},
    ):
        answer = scene.load(bob, headers)
        assert answer["metadata"]["table-uuid"] == scene.table_id  # the metadata: yes
        assert_no_storage_access(answer)
    assert scene.policies == [], "STS was asked for credentials nobody may have"
    # The same on every other way in: the credentials route and the signer.
    refused = bob("GET", scene.url("/namespaces/ns/tables/t/credentials"))
    assert refused.status_code == 403, refused.text
    metadata_key = key_of(scene.load(scene.alice, SIGNING)["metadata-location"])
    for method in ("GET", "HEAD", "PUT", "DELETE", "POST"):
        signed = sign(scene, bob, method, metadata_key)
        assert signed.status_code == 403, (method, signed.text)
        assert sign(scene, bob, method, metadata_key, table=False).status_code == 403


def test_describe_from_the_namespace_gets_no_credentials_either(scene: Scene) -> None:
    bob = scene.user("bob")
    scene.grant_namespace("describe", bob)
    assert_no_storage_access(scene.load(bob, VENDED))
    assert_no_storage_access(scene.load(bob, SIGNING))
    assert scene.policies == []


def test_read_right_gets_read_only_credentials(scene: Scene) -> None:
    carol = scene.user("carol")
    scene.grant_table("select", carol)
    answer = scene.load(carol, VENDED)
    [credential] = credentials_of(answer)
    location = answer["metadata"]["location"]
    assert credential["prefix"] == location
    # The session policy STS was given: reads, no writes.
    [policy] = scene.policies
    actions = actions_of(policy)
    assert "s3:GetObject" in actions
    assert not {"s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"} & actions
    # The keys are real: they read the table's metadata file from moto.
    s3 = s3_client(credential["config"])
    metadata_key = key_of(answer["metadata-location"])
    assert s3.get_object(Bucket=BUCKET, Key=metadata_key)["Body"].read().startswith(b"{")
    # /credentials: read-only too.
    refreshed = carol("GET", scene.url("/namespaces/ns/tables/t/credentials"), headers=VENDED)
    assert refreshed.status_code == 200, refreshed.text
    assert len(refreshed.json()["storage-credentials"]) == 1
    assert all(not {"s3:PutObject", "s3:DeleteObject"} & actions_of(p) for p in scene.policies)
    # Remote signing: the configuration, and signatures for reads only.
    signed = scene.load(carol, SIGNING)
    assert signed["config"]["s3.signer.endpoint"].endswith("/namespaces/ns/tables/t/sign")
    assert sign(scene, carol, "GET", metadata_key).status_code == 200
    assert sign(scene, carol, "HEAD", metadata_key).status_code == 200
    for method in ("PUT", "DELETE", "POST"):
        refused = sign(scene, carol, method, key_of(location) + "/data/x.parquet")
        assert refused.status_code == 403, (method, refused.text)


def test_write_right_gets_write_credentials(scene: Scene) -> None:
    dave = scene.user("dave")
    scene.grant_table("modify", dave)
    answer = scene.load(dave, VENDED)
    [credential] = credentials_of(answer)
    [policy] = scene.policies
    assert {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"} <= actions_of(policy)
    s3 = s3_client(credential["config"])
    data_key = key_of(answer["metadata"]["location"]) + "/data/00000-0.parquet"
    s3.put_object(Bucket=BUCKET, Key=data_key, Body=b"PAR1")
    assert s3.get_object(Bucket=BUCKET, Key=data_key)["Body"].read() == b"PAR1"
    assert sign(scene, dave, "PUT", data_key).status_code == 200
    assert sign(scene, dave, "DELETE", data_key).status_code == 200


def test_a_revoked_read_right_stops_the_credentials(scene: Scene) -> None:
    carol = scene.user("carol")
    scene.grant_table("select", carol)
    assert credentials_of(scene.load(carol, VENDED))
    scene.alice.ok(
        "POST",
        f"{MGMT}/permissions/warehouse/{scene.warehouse_id}/table/{scene.table_id}/assignments",
        {
            "deletes": [{"type": "select", "user": carol.id}],
            "writes": [{"type": "describe", "user": carol.id}],
        },
    )
    assert_no_storage_access(scene.load(carol, VENDED))


def test_a_granted_read_right_is_not_answered_304_without_a_signer(scene: Scene) -> None:
    """An ETag of a describe-only answer (no signer configuration) must not let the same
    table version be answered 304 once the caller may read: they would keep no access."""
    bob = scene.user("bob")
    scene.grant_table("describe", bob)
    path = scene.url("/namespaces/ns/tables/t")
    first = bob("GET", path, headers=SIGNING)
    assert first.status_code == 200 and "s3.signer.uri" not in first.json()["config"]
    etag = first.headers["etag"]
    scene.grant_table("select", bob)
    again = bob("GET", path, headers={**SIGNING, "If-None-Match": etag})
    assert again.status_code == 200, again.status_code
    assert "s3.signer.uri" in again.json()["config"]


# -- createTable / registerTable ----------------------------------------------------------------
def test_a_creator_gets_write_credentials_for_what_they_create(scene: Scene) -> None:
    erin = scene.user("erin")
    scene.grant_namespace("create", erin)
    made = scene.create(erin, "ns", "e1", headers=VENDED)
    assert made.status_code == 200, made.text
    assert credentials_of(made.json())
    assert "s3:PutObject" in actions_of(scene.policies[-1])
    # Staged at the default location: a fresh path of the caller's own, to write into.
    staged = scene.create(erin, "ns", "e2", headers=VENDED, stage=True)
    assert staged.status_code == 200, staged.text
    assert credentials_of(staged.json())
    assert "s3:PutObject" in actions_of(scene.policies[-1])


def test_a_staged_create_at_a_chosen_location_gets_no_credentials(scene: Scene) -> None:
    """A staged create claims no location: credentials for one the client names could
    reach whatever files lie there (another table's, a dropped table's)."""
    erin = scene.user("erin")
    scene.grant_namespace("create", erin)
    victim = scene.load(scene.alice, SIGNING)["metadata"]["location"]
    base = victim.rsplit("/", 2)[0]
    for headers in (VENDED, SIGNING, {}):
        staged = scene.create(
            erin,
            "ns",
            f"s{uuid.uuid4().hex[:6]}",
            headers=headers,
            location=f"{base}/chosen-{uuid.uuid4().hex[:6]}",
            stage=True,
        )
        assert staged.status_code == 200, staged.text
        assert_no_storage_access(staged.json())
    assert scene.policies == []
    # Not even the admin: the rule is about the location, not the caller.
    staged = scene.create(
        scene.alice, "ns", "s-admin", headers=VENDED, location=f"{base}/chosen-admin", stage=True
    )
    assert staged.status_code == 200, staged.text
    assert_no_storage_access(staged.json())


def test_describe_only_cannot_create_for_credentials(scene: Scene) -> None:
    bob = scene.user("bob")
    scene.grant_namespace("describe", bob)
    for stage in (False, True):
        refused = scene.create(bob, "ns", "b1", headers=VENDED, stage=stage)
        assert refused.status_code == 403, refused.text
    assert scene.policies == []


def test_a_registered_table_answers_with_its_owner_s_credentials(scene: Scene) -> None:
    """registerTable places a table over files already in storage: besides `create` on the
    namespace it needs `modify` on the warehouse (403 without)."""
    erin = scene.user("erin")
    scene.grant_namespace("create", erin)
    loaded = scene.load(scene.alice, SIGNING)
    metadata = dict(loaded["metadata"])
    root = metadata["location"].rsplit("/", 1)[0]
    metadata["location"] = f"{root}/registered-{uuid.uuid4().hex[:6]}"
    target = f"{metadata['location']}/metadata/00000-{uuid.uuid4()}.metadata.json"
    admin = client(scene.moto.endpoint, "s3", scene.moto.key, scene.moto.secret)
    admin.put_object(Bucket=BUCKET, Key=key_of(target), Body=json.dumps(metadata).encode())
    body = {"name": "r1", "metadata-location": target}
    url = scene.url("/namespaces/ns/register")
    refused = erin("POST", url, json=body, headers=VENDED)
    assert refused.status_code == 403, refused.text
    scene.grant(f"warehouse/{scene.warehouse_id}", "modify", erin)
    registered = erin("POST", url, json=body, headers=VENDED)
    assert registered.status_code == 200, registered.text
    [credential] = credentials_of(registered.json())
    assert credential["prefix"] == metadata["location"]
    assert "s3:PutObject" in actions_of(scene.policies[-1])


# -- Idempotency-Key --------------------------------------------------------------------------
def test_another_user_s_idempotency_key_is_refused(scene: Scene) -> None:
    erin, mallory = scene.user("erin"), scene.user("mallory")
    scene.grant_namespace("create", erin)
    scene.grant_namespace("create", mallory)
    key = str(uuid.uuid4())
    body = {"name": "keyed", "schema": SCHEMA}
    headers = {**VENDED, "Idempotency-Key": key}
    first = erin("POST", scene.url("/namespaces/ns/tables"), json=body, headers=headers)
    assert first.status_code == 200, first.text
    assert credentials_of(first.json())
    # Another user with the same key and request: refused, and nothing of erin's answer.
    replayed = mallory("POST", scene.url("/namespaces/ns/tables"), json=body, headers=headers)
    assert replayed.status_code == 422, replayed.text
    error = replayed.json()["error"]
    assert error["code"] == 422 and error["type"]
    assert first.json()["metadata-location"] not in replayed.text
    assert "storage-credentials" not in replayed.text
    # A user with no rights at all: the same.
    nobody = scene.user("nobody")
    replayed = nobody("POST", scene.url("/namespaces/ns/tables"), json=body, headers=headers)
    assert replayed.status_code == 422, replayed.text
    # The key's own user still gets their replay.
    again = erin("POST", scene.url("/namespaces/ns/tables"), json=body, headers=headers)
    assert again.status_code == 200, again.text
    assert again.json()["metadata-location"] == first.json()["metadata-location"]
    assert credentials_of(again.json())


def test_a_replay_hands_out_no_more_than_the_rights_of_now(scene: Scene) -> None:
    """A replayed table answer vends afresh, by the caller's rights at the replay: a staged
    create at a chosen location replays without credentials too."""
    erin = scene.user("erin")
    scene.grant_namespace("create", erin)
    root = scene.load(scene.alice, SIGNING)["metadata"]["location"].rsplit("/", 1)[0]
    body = {
        "name": "staged-keyed",
        "schema": SCHEMA,
        "stage-create": True,
        "location": f"{root}/chosen-{uuid.uuid4().hex[:6]}",
    }
    headers = {**VENDED, "Idempotency-Key": str(uuid.uuid4())}
    for _ in range(2):
        answer = erin("POST", scene.url("/namespaces/ns/tables"), json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        assert_no_storage_access(answer.json())
    assert scene.policies == []

# ruff: noqa: F811 - pytest fixtures imported from test_signing_attacks
"""The remote signer hands out no more than vended credentials, whatever it is asked to sign.

The signer signs with the warehouse's own S3 credential, so whatever S3 semantics a signed
header or sub-resource carries are exercised with the catalog's full rights. Vended
credentials (`commands/storage/vending.py` session policy) allow only GetObject(Version),
PutObject, DeleteObject, AbortMultipartUpload, ListMultipartUploadParts and ListBucket;
on AWS a PutObject carrying `x-amz-acl` / `x-amz-grant-*` additionally needs
s3:PutObjectAcl, which they do not have. The signer refuses (403) every `x-amz-*` header
outside its allow-list (`signing.check_signable_headers`) and the sub-resources beyond
those actions.
"""

from __future__ import annotations

from uuid import uuid4

import httpx
import pytest

from tests.integration.test_signing_attacks import (  # noqa: F401 - fixtures
    WAREHOUSE_BUCKET,
    Scene,
    localhost_names,
    s3,
    scene,
    sign_request,
)

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"


def _signed_put(
    scene: Scene, signer: str, caller: object, key: str, extra: dict[str, str]
) -> httpx.Response:
    port = scene.s3.port
    uri = f"http://localhost:{port}/{WAREHOUSE_BUCKET}/{key}"
    headers = {"x-amz-content-sha256": "UNSIGNED-PAYLOAD", **extra}
    answer = sign_request(caller, signer, "PUT", uri, headers)  # type: ignore[arg-type]
    assert answer.status_code in (200, 403), answer.text
    if answer.status_code != 200:
        return answer  # type: ignore[no-any-return]
    signed = {k: ", ".join(v) for k, v in answer.json()["headers"].items()}
    reply = httpx.put(uri, headers=headers | signed, content=b"table bytes")
    assert reply.status_code == 200, reply.text
    return answer  # type: ignore[no-any-return]


@pytest.mark.attack
@pytest.mark.parametrize(
    "extra",
    [
        {"x-amz-acl": "public-read"},
        {"x-amz-grant-read": f'uri="{ALL_USERS}"'},
        {"x-amz-grant-full-control": f'uri="{ALL_USERS}"'},
    ],
    ids=["x-amz-acl", "x-amz-grant-read", "x-amz-grant-full-control"],
)
def test_attack_the_signer_refuses_acl_headers_that_would_publish_table_files(
    scene: Scene, extra: dict[str, str]
) -> None:
    """Bob may write his own table. A signed PUT with an ACL header makes the object
    world-readable (or hands it to another account) in S3 itself: a right the catalog never
    gave (vended credentials lack s3:PutObjectAcl) and that no revoke in icelog takes back."""
    key = f"victim/data/acl-{uuid4().hex[:6]}.parquet"
    for caller, signer in ((scene.bob, scene.table_signer), (scene.carol, scene.warehouse_signer)):
        answer = _signed_put(scene, signer, caller, key, extra)
        if answer.status_code == 200:
            acl = scene.s3.admin().get_object_acl(Bucket=WAREHOUSE_BUCKET, Key=key)
            public = [g for g in acl["Grants"] if g["Grantee"].get("URI") == ALL_USERS]
            assert not public, f"signed {extra} made s3://{WAREHOUSE_BUCKET}/{key} public: {public}"
        assert answer.status_code == 403, answer.text


@pytest.mark.attack
@pytest.mark.parametrize(
    "extra",
    [
        {"x-amz-website-redirect-location": "https://attacker.example/"},
        {
            "x-amz-object-lock-mode": "COMPLIANCE",
            "x-amz-object-lock-retain-until-date": "2099-01-01T00:00:00Z",
        },
        {"x-amz-object-lock-legal-hold": "ON"},
        {"x-amz-storage-class": "DEEP_ARCHIVE"},
        {
            "x-amz-server-side-encryption": "aws:kms",
            "x-amz-server-side-encryption-aws-kms-key-id": "arn:aws:kms:us-east-1:9:key/attacker",
        },
    ],
    ids=[
        "website-redirect",
        "object-lock-compliance",
        "legal-hold",
        "deep-archive",
        "foreign-kms-key",
    ],
)
def test_attack_the_signer_refuses_headers_that_need_more_than_put_object(
    scene: Scene, extra: dict[str, str]
) -> None:
    """Headers whose effect outlives the catalog's control (object lock a purge cannot undo,
    a foreign KMS key the catalog cannot decrypt with, an archive class no reader can GET,
    a redirect) would be signed with the catalog's credential: refused."""
    port = scene.s3.port
    uri = f"http://localhost:{port}/{WAREHOUSE_BUCKET}/victim/data/h-{uuid4().hex[:6]}"
    headers = {"x-amz-content-sha256": "UNSIGNED-PAYLOAD", **extra}
    answer = sign_request(scene.bob, scene.table_signer, "PUT", uri, headers)
    assert answer.status_code == 403, f"signed {extra}: {answer.status_code}"


@pytest.mark.attack
@pytest.mark.parametrize(
    ("method", "query"),
    [
        ("DELETE", "versionId=3HL4kqtJlcpXroDTDmJ-rmSpXd3dIbrHY"),  # s3:DeleteObjectVersion
        ("PUT", "tagging"),  # s3:PutObjectTagging
        ("DELETE", "tagging"),  # s3:DeleteObjectTagging
    ],
)
def test_attack_the_signer_gives_no_more_than_vended_credentials(
    scene: Scene, method: str, query: str
) -> None:
    """What a writer may do through the signer and through vended credentials should be the
    same set of S3 actions. The session policy has no DeleteObjectVersion (a permanent delete
    past versioning) nor the tagging actions; the signer refuses them."""
    port = scene.s3.port
    uri = f"http://localhost:{port}/{WAREHOUSE_BUCKET}/victim/data/x.parquet?{query}"
    answer = sign_request(scene.bob, scene.table_signer, method, uri, {})
    assert answer.status_code == 403, f"signed {method} ?{query}: {answer.status_code}"


@pytest.mark.attack
def test_attack_vended_credentials_cannot_list_the_bare_table_prefix() -> None:
    """The signer refuses `prefix=wh/ns/t1` (without '/') because it also lists t10's keys
    (`_Prefix.holds_listing`). The vended session policy must refuse it too
    (`StringLike s3:prefix [prefix/, prefix/*]`), or a user who made table t1 at a location
    of their choice lists the key names (paths, partition values) of the table beside it."""
    import fnmatch

    from icelog.commands.storage.vending import session_policy

    policy = session_policy("lake", "wh/ns/t1", write=False)
    [listing] = [s for s in policy["Statement"] if s["Sid"] == "ListTablePrefix"]
    patterns = listing["Condition"]["StringLike"]["s3:prefix"]

    def allowed(prefix: str) -> bool:
        return any(fnmatch.fnmatchcase(prefix, p) for p in patterns)  # IAM `*` and `?`

    assert allowed("wh/ns/t1/")  # the table's own listing
    # ListObjects(Prefix="wh/ns/t1") returns "wh/ns/t10/data/ssn=…/x.parquet" too.
    assert not allowed("wh/ns/t1"), f"vended ListBucket allows the bare prefix: {patterns}"

"""S3 remote signing: request parsing, the location check and SigV4 headers."""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import zlib
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from icelog.commands.storage.s3 import S3Access
from icelog.commands.storage.signing import S3Target, check_allowed, parse_target, sign
from icelog.domain.errors import BadRequestError, ForbiddenError

SECRET = "s3cr3t-never-shown"
TOKEN = "session-token-never-shown"
ACCESS = S3Access(
    region="eu-west-1",
    endpoint="http://127.0.0.1:9000",
    path_style=True,
    access_key_id="AKIDSIGNING",
    secret_access_key=SECRET,
)
ALLOWED = ["s3://lake/wh/t1"]
NOW = datetime.datetime(2026, 1, 2, 3, 4, 5)
UNSIGNED = "UNSIGNED-PAYLOAD"
BODY_HASH = hashlib.sha256(b"parquet bytes").hexdigest()


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: NOW)


# --- parse_target -------------------------------------------------------------------

ENDPOINT = "http://127.0.0.1:9000"


def parse(uri: str, endpoint: str | None = ENDPOINT, region: str = "us-east-1") -> S3Target:
    return parse_target(uri, endpoint=endpoint, region=region)


def test_path_style_uri_gives_bucket_and_decoded_key() -> None:
    target = parse("http://127.0.0.1:9000/lake/wh/t1/data/a%20b%2Bc.parquet")
    assert (target.bucket, target.key, target.operation) == (
        "lake",
        "wh/t1/data/a b+c.parquet",
        "object",
    )


def test_aws_virtual_host_and_path_style_uris() -> None:
    virtual = parse("https://lake.s3.us-east-1.amazonaws.com/wh/t1/x.avro", None)
    assert (virtual.bucket, virtual.key) == ("lake", "wh/t1/x.avro")
    dotted = parse("https://my.lake.s3.eu-west-1.amazonaws.com/k", None, "eu-west-1")
    assert (dotted.bucket, dotted.key) == ("my.lake", "k")
    legacy = parse("https://lake.s3-eu-west-1.amazonaws.com/k", None, "eu-west-1")
    assert legacy.bucket == "lake"
    path = parse("https://s3.us-east-1.amazonaws.com/lake/wh/t1/x.avro", None)
    assert (path.bucket, path.key) == ("lake", "wh/t1/x.avro")
    assert parse("https://lake.s3.amazonaws.com/k", None).bucket == "lake"
    # Another region's host, an access point, or any other host: refused.
    for elsewhere in (
        "https://lake.s3.eu-west-1.amazonaws.com/k",
        "https://ap-123.s3-accesspoint.us-east-1.amazonaws.com/k",
        "https://lake.example.com/k",
        "http://127.0.0.1:9000/lake/k",
    ):
        with pytest.raises(ForbiddenError):
            parse(elsewhere, None)


def test_custom_hosts_follow_the_endpoint() -> None:
    endpoint = "http://minio.local:9000"
    assert parse("http://minio.local:9000/lake/k", endpoint).bucket == "lake"
    virtual = parse("http://lake.minio.local:9000/k", endpoint)
    assert (virtual.bucket, virtual.key) == ("lake", "k")
    for elsewhere in ("http://other.example:9000/lake/k", "http://minio.local:9001/lake/k"):
        with pytest.raises(ForbiddenError):
            parse(elsewhere, endpoint)
    # An IP endpoint has no virtual hosts; an endpoint's path comes before the bucket.
    with pytest.raises(ForbiddenError):
        parse("http://lake.127.0.0.1:9000/k")
    based = parse("https://store.example/s3/lake/wh/k", "https://store.example/s3")
    assert (based.bucket, based.key) == ("lake", "wh/k")
    with pytest.raises(ForbiddenError):
        parse("https://store.example/lake/wh/k", "https://store.example/s3")


def test_operations_from_the_query() -> None:
    base = "http://127.0.0.1:9000/lake"
    listing = parse(f"{base}?list-type=2&prefix=wh%2Ft1%2Fdata%2F&delimiter=%2F")
    assert (listing.key, listing.operation, listing.param("prefix")) == ("", "list", "wh/t1/data/")
    assert parse(f"{base}/wh/t1/k?uploads").operation == "create-multipart"
    part = parse(f"{base}/wh/t1/k?partNumber=2&uploadId=abc")
    assert (part.operation, part.param("uploadId")) == ("upload-part", "abc")
    assert parse(f"{base}/wh/t1/k?uploadId=abc").operation == "multipart"
    assert parse(f"{base}?delete").operation == "delete-objects"
    assert parse(f"{base}?delete=").has_param("delete")
    assert parse(f"{base}/wh/t1/k?tagging").operation == "unsupported:tagging"
    assert parse(f"{base}/wh/t1/k?versionId=1&response-content-type=x").operation == "object"
    assert parse(base).operation == "bucket"
    assert parse(f"{base}/wh/t1/k?acl").operation.startswith("unsupported")
    assert parse(f"{base}?policy").operation.startswith("unsupported")


def test_malformed_uris_are_bad_requests() -> None:
    for uri in ("s3://lake/k", "/lake/k", "http://127.0.0.1:9000/", "http:///lake"):
        with pytest.raises(BadRequestError):
            parse(uri)


# --- check_allowed ------------------------------------------------------------------


def allowed(uri: str, method: str = "GET", *, write: bool = True, body: str | None = None) -> bool:
    try:
        check_allowed(
            parse(f"http://127.0.0.1:9000{uri}"),
            method,
            allowed=ALLOWED,
            write=write,
            body=body,
        )
    except ForbiddenError:
        return False
    return True


def test_keys_must_be_inside_an_allowed_prefix_by_segment() -> None:
    assert allowed("/lake/wh/t1/data/a.parquet")
    assert allowed("/lake/wh/t1")
    assert allowed("/lake/wh/t1/metadata/v1.json", "PUT")
    assert not allowed("/lake/wh/t10/data/a.parquet")  # sibling sharing a string prefix
    assert not allowed("/lake/wh/t")
    assert not allowed("/other/wh/t1/data/a.parquet")  # other bucket
    assert not allowed("/lake/wh/t1/../t2/a.parquet")
    assert not allowed("/lake/wh/t1/%2E%2E/t2/a.parquet")


def test_allowed_spellings_and_trailing_slashes() -> None:
    target = parse("http://127.0.0.1:9000/lake/wh/t1/a")
    for spelling in ("s3a://lake/wh/t1", "s3n://lake/wh/t1/", "s3://lake/wh/"):
        check_allowed(target, "GET", allowed=[spelling], write=False, body=None)
    check_allowed(target, "GET", allowed=["s3://elsewhere/x", "s3://lake"], write=False, body=None)


def test_writes_need_write_access() -> None:
    for method in ("PUT", "POST", "DELETE"):
        assert not allowed("/lake/wh/t1/data/a.parquet", method, write=False)
        assert allowed("/lake/wh/t1/data/a.parquet", method, write=True)
    assert allowed("/lake/wh/t1/data/a.parquet", "HEAD", write=False)
    assert allowed("/lake/wh/t1/data/a.parquet", "get", write=False)


def test_unknown_methods_and_sub_resources_are_forbidden() -> None:
    for method in ("PATCH", "OPTIONS", "TRACE", "CONNECT"):
        assert not allowed("/lake/wh/t1/a", method)
    assert not allowed("/lake/wh/t1/a?acl", "PUT")
    assert not allowed("/lake/wh/t1/a?restore", "POST")
    assert not allowed("/lake/wh/t1/a?versionId=1&versionId=2")  # repeated parameter
    assert allowed("/lake/wh/t1/a?uploads", "POST")
    assert allowed("/lake/wh/t1/a?partNumber=1&uploadId=u", "PUT")
    assert allowed("/lake/wh/t1/a?uploadId=u", "DELETE")
    assert allowed("/lake/wh/t1/a?versionId=1")
    assert allowed("/lake/wh/t1/a?versionId=1", "HEAD")


@pytest.mark.attack
def test_attack_the_signer_allows_no_more_than_vended_credentials() -> None:
    """The session policy of vended credentials has no DeleteObjectVersion, tagging,
    attributes, version or upload listings: the signer (the catalog's own key) neither."""
    for uri, method in (
        ("/lake/wh/t1/a?versionId=1", "DELETE"),
        ("/lake/wh/t1/a?versionId=1", "PUT"),
        ("/lake/wh/t1/a?tagging", "PUT"),
        ("/lake/wh/t1/a?tagging", "DELETE"),
        ("/lake/wh/t1/a?tagging", "GET"),
        ("/lake/wh/t1/a?attributes", "GET"),
    ):
        assert not allowed(uri, method), (method, uri)
    versioned = (
        "<Delete><Object><Key>wh/t1/a</Key><VersionId>3HL4kqtJlc</VersionId></Object></Delete>"
    )
    assert not allowed("/lake?delete", "POST", body=versioned)
    assert allowed(
        "/lake?delete", "POST", body="<Delete><Object><Key>wh/t1/a</Key></Object></Delete>"
    )


def test_listing_prefix_must_be_inside() -> None:
    assert allowed("/lake?list-type=2&prefix=wh%2Ft1%2Fdata%2F&delimiter=%2F", write=False)
    assert allowed("/lake?list-type=2&prefix=wh%2Ft1%2F")
    assert not allowed("/lake?uploads&prefix=wh%2Ft1%2F")  # s3:ListBucketMultipartUploads
    assert not allowed("/lake?versions&prefix=wh%2Ft1%2F")  # s3:ListBucketVersions
    assert not allowed("/lake?list-type=2&prefix=wh%2Ft1")  # would list t10 too
    assert not allowed("/lake?list-type=2&prefix=wh%2F")
    assert not allowed("/lake?list-type=2&prefix=wh%2Ft10%2F")
    assert not allowed("/lake?list-type=2")
    assert not allowed("/lake")  # ListObjects v1 of the whole bucket
    assert not allowed("/other?list-type=2&prefix=wh%2Ft1%2F")
    assert not allowed("/lake?list-type=2&prefix=wh%2Ft1%2F", "POST")


def test_bucket_level_requests() -> None:
    whole = ["s3://lake"]
    head = parse("http://127.0.0.1:9000/lake")
    check_allowed(head, "HEAD", allowed=whole, write=False, body=None)
    check_allowed(head, "GET", allowed=whole, write=False, body=None)
    with pytest.raises(ForbiddenError):
        check_allowed(head, "HEAD", allowed=ALLOWED, write=False, body=None)
    for method in ("PUT", "DELETE", "POST"):  # create / drop the bucket itself
        with pytest.raises(ForbiddenError):
            check_allowed(head, method, allowed=whole, write=True, body=None)


def delete_body(*keys: str, namespace: bool = True) -> str:
    xmlns = ' xmlns="http://s3.amazonaws.com/doc/2006-03-01/"' if namespace else ""
    objects = "".join(f"<Object><Key>{key}</Key></Object>" for key in keys)
    prolog = '<?xml version="1.0" encoding="UTF-8"?>'
    return f"{prolog}<Delete{xmlns}>{objects}<Quiet>true</Quiet></Delete>"


def test_bulk_delete_checks_every_key_in_the_body() -> None:
    inside = delete_body("wh/t1/data/a.parquet", "wh/t1/metadata/v1.json")
    assert allowed("/lake?delete", "POST", body=inside)
    assert allowed("/lake?delete", "POST", body=delete_body("wh/t1/a", namespace=False))
    assert not allowed("/lake?delete", "POST", body=None)
    assert not allowed("/lake?delete", "POST", body="")
    assert not allowed("/lake?delete", "POST", body=delete_body("wh/t1/a", "wh/t10/b"))
    assert not allowed("/lake?delete", "POST", body=delete_body())
    assert not allowed("/lake?delete", "POST", body="not xml")
    assert not allowed("/lake?delete", "POST", body=inside, write=False)
    assert not allowed("/lake?delete", "GET", body=inside)
    dtd = '<!DOCTYPE d [<!ENTITY e "wh/t10/x">]><Delete><Object><Key>&e;</Key></Object></Delete>'
    assert not allowed("/lake?delete", "POST", body=dtd)


def test_messages_name_the_location() -> None:
    with pytest.raises(ForbiddenError) as raised:
        check_allowed(
            parse("http://127.0.0.1:9000/lake/wh/t10/x"),
            "GET",
            allowed=ALLOWED,
            write=True,
            body=None,
        )
    assert "s3://lake/wh/t10/x" in raised.value.message
    assert raised.value.status == 403


# --- sign ---------------------------------------------------------------------------


def reference_signature(
    secret: str, region: str, method: str, uri: str, headers: Mapping[str, str], signed: str
) -> str:
    """An independent SigV4 computation over the headers the Authorization header names."""
    parts = urlsplit(uri)
    lower = {k.lower(): v for k, v in headers.items()}
    lower.setdefault("host", parts.netloc)
    names = signed.split(";")
    query = "&".join(sorted(parts.query.split("&"))) if parts.query else ""
    query = "&".join(p if "=" in p else p + "=" for p in query.split("&")) if query else ""
    canonical = "\n".join(
        [
            method,
            parts.path,
            query,
            "".join(f"{n}:{lower[n].strip()}\n" for n in names),
            signed,
            lower["x-amz-content-sha256"],
        ]
    )
    stamp = lower["x-amz-date"]
    scope = f"{stamp[:8]}/{region}/s3/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = f"AWS4{secret}".encode()
    for part in (stamp[:8], region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def authorization_parts(value: str) -> dict[str, str]:
    scheme, _, rest = value.partition(" ")
    assert scheme == "AWS4-HMAC-SHA256"
    return dict(item.strip().split("=", 1) for item in rest.split(","))


def test_sign_put_uses_the_client_payload_hash() -> None:
    uri = "http://127.0.0.1:9000/lake/wh/t1/data/a%20b.parquet"
    client = {
        "x-amz-content-sha256": [BODY_HASH],
        "Content-Type": ["application/octet-stream"],
        "x-amz-meta-writer": ["icelog"],
        "User-Agent": ["pyiceberg"],
        "Range": ["bytes=0-1"],
        "amz-sdk-invocation-id": ["abc"],
    }
    response = sign(ACCESS, region="eu-west-1", method="PUT", uri=uri, headers=client)
    assert response["uri"] == uri
    headers = response["headers"]
    # Only what the client lacks comes back; its own headers are signed as sent.
    assert set(headers) == {"Authorization", "X-Amz-Date"}
    assert headers["X-Amz-Date"] == ["20260102T030405Z"]
    auth = authorization_parts(headers["Authorization"][0])
    assert auth["Credential"] == "AKIDSIGNING/20260102/eu-west-1/s3/aws4_request"
    assert auth["SignedHeaders"] == (
        "content-type;host;x-amz-content-sha256;x-amz-date;x-amz-meta-writer"
    )
    sent = {k: v[0] for k, v in client.items()} | {"X-Amz-Date": "20260102T030405Z"}
    expected = reference_signature(SECRET, "eu-west-1", "PUT", uri, sent, auth["SignedHeaders"])
    assert auth["Signature"] == expected


def test_sign_without_a_client_hash_signs_unsigned_payload() -> None:
    uri = "http://127.0.0.1:9000/lake?list-type=2&prefix=wh%2Ft1%2F&delimiter=%2F"
    response = sign(ACCESS, region="us-east-1", method="GET", uri=uri, headers={})
    headers = response["headers"]
    assert headers["X-Amz-Content-SHA256"] == ["UNSIGNED-PAYLOAD"]
    auth = authorization_parts(headers["Authorization"][0])
    assert auth["SignedHeaders"] == "host;x-amz-content-sha256;x-amz-date"
    sent = {"X-Amz-Date": headers["X-Amz-Date"][0], "x-amz-content-sha256": "UNSIGNED-PAYLOAD"}
    assert auth["Signature"] == reference_signature(
        SECRET, "us-east-1", "GET", uri, sent, auth["SignedHeaders"]
    )


def test_sign_with_a_session_token() -> None:
    access = S3Access(
        region="us-east-1", access_key_id="ASIATEMP", secret_access_key=SECRET, session_token=TOKEN
    )
    uri = "https://lake.s3.us-east-1.amazonaws.com/wh/t1/a"
    response = sign(access, region="us-east-1", method="HEAD", uri=uri, headers={})
    headers = response["headers"]
    assert headers["X-Amz-Security-Token"] == [TOKEN]
    auth = authorization_parts(headers["Authorization"][0])
    assert auth["Credential"].startswith("ASIATEMP/20260102/us-east-1/s3/")
    assert "x-amz-security-token" in auth["SignedHeaders"].split(";")
    sent = {k: v[0] for k, v in headers.items()}
    assert auth["Signature"] == reference_signature(
        SECRET, "us-east-1", "HEAD", uri, sent, auth["SignedHeaders"]
    )


def test_a_stale_client_signature_is_replaced_not_trusted() -> None:
    client = {"Authorization": ["AWS4-HMAC-SHA256 forged"], "X-Amz-Date": ["19990101T000000Z"]}
    uri = "http://127.0.0.1:9000/lake/wh/t1/a"
    headers = sign(ACCESS, region="us-east-1", method="GET", uri=uri, headers=client)["headers"]
    assert headers["X-Amz-Date"] == ["20260102T030405Z"]
    assert "forged" not in headers["Authorization"][0]


def test_the_secret_never_shows() -> None:
    uri = "http://127.0.0.1:9000/lake/wh/t1/a"
    response = sign(ACCESS, region="us-east-1", method="GET", uri=uri, headers={})
    assert SECRET not in repr(response)
    with pytest.raises(ForbiddenError) as raised:
        sign(
            ACCESS,
            region="us-east-1",
            method="PUT",
            uri=uri,
            headers={"x-amz-copy-source": ["/x/y"]},
        )
    assert SECRET not in raised.value.message


def test_server_side_copy_is_refused() -> None:
    uri = "http://127.0.0.1:9000/lake/wh/t1/copy"
    for name in ("x-amz-copy-source", "X-Amz-Copy-Source"):
        with pytest.raises(ForbiddenError):
            sign(
                ACCESS, region="us-east-1", method="PUT", uri=uri, headers={name: ["other/secret"]}
            )


def signed_payload_hash(headers: Mapping[str, list[str]], response: Mapping[str, object]) -> str:
    """The x-amz-content-sha256 the signed request carries: the client's or the answer's."""
    returned = response["headers"]
    assert isinstance(returned, dict)
    lower = {k.lower(): v[0] for k, v in headers.items()} | {
        k.lower(): v[0] for k, v in returned.items()
    }
    return str(lower["x-amz-content-sha256"])


def md5_of(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()  # noqa: S324


def test_bulk_delete_body_is_pinned_by_its_sha256() -> None:
    uri = "http://127.0.0.1:9000/lake?delete"
    body = delete_body("wh/t1/a")
    data = body.encode()
    sha = hashlib.sha256(data).hexdigest()
    declared = [
        {},
        {"Content-MD5": [md5_of(data)]},
        {"x-amz-checksum-crc32": [base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()]},
        {"x-amz-checksum-sha256": [base64.b64encode(hashlib.sha256(data).digest()).decode()]},
        {"x-amz-content-sha256": [sha]},
    ]
    for headers in declared:
        response = sign(
            ACCESS, region="us-east-1", method="POST", uri=uri, headers=headers, body=body
        )
        # Whatever else the client declared, the signature covers the checked body's hash.
        assert signed_payload_hash(headers, response) == sha
    # UNSIGNED-PAYLOAD only next to a digest S3 verifies and that matches.
    unsigned = {"x-amz-content-sha256": [UNSIGNED], "Content-MD5": [md5_of(data)]}
    response = sign(ACCESS, region="us-east-1", method="POST", uri=uri, headers=unsigned, body=body)
    assert signed_payload_hash(unsigned, response) == UNSIGNED
    with pytest.raises(ForbiddenError):  # no body to check
        sign(ACCESS, region="us-east-1", method="POST", uri=uri, headers={})


@pytest.mark.attack
def test_attack_bulk_delete_body_swapped_under_a_weak_checksum() -> None:
    uri = "http://127.0.0.1:9000/lake?delete"
    body = delete_body("wh/t1/a")
    data = body.encode()
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    refused = [
        # A CRC is easy to match with another body: it pins nothing.
        {"x-amz-content-sha256": [UNSIGNED], "x-amz-checksum-crc32": [crc]},
        {"x-amz-content-sha256": [UNSIGNED]},
        {"x-amz-content-sha256": ["STREAMING-UNSIGNED-PAYLOAD-TRAILER"]},
        {"x-amz-content-sha256": [UNSIGNED], "x-amz-checksum-sha1": ["AAAA"]},
        # Digests of another body.
        {"x-amz-content-sha256": [hashlib.sha256(b"other").hexdigest()]},
        {"Content-MD5": [md5_of(b"other")]},
        {"x-amz-checksum-sha256": [base64.b64encode(hashlib.sha256(b"x").digest()).decode()]},
        # Checksums that arrive after the signature.
        {"x-amz-trailer": ["x-amz-checksum-crc32"]},
        {"Content-Encoding": ["aws-chunked"]},
    ]
    for headers in refused:
        with pytest.raises(ForbiddenError):
            sign(ACCESS, region="us-east-1", method="POST", uri=uri, headers=headers, body=body)


def test_default_credential_chain_when_the_storage_has_no_keys(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    keyless = S3Access(region="us-east-1", endpoint=ENDPOINT)
    uri = "http://127.0.0.1:9000/lake/wh/t1/a"
    headers = sign(keyless, region="us-east-1", method="GET", uri=uri, headers={})["headers"]
    assert authorization_parts(headers["Authorization"][0])["Credential"].startswith("AKIDFROMENV/")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    for name in ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ForbiddenError) as raised:
        sign(keyless, region="us-east-1", method="GET", uri=uri, headers={})
    assert "no S3 credential" in raised.value.message


def test_target_is_a_plain_value() -> None:
    target = parse("http://127.0.0.1:9000/lake/wh/t1/a?versionId=7")
    assert target == S3Target("lake", "wh/t1/a", "object", (("versionId", "7"),))


# --- attacks on addressing: what is signed is what was checked ------------------------

MINIO = S3Access(
    region="us-east-1",
    endpoint="http://minio.local:9000",
    access_key_id="AKIDSIGNING",
    secret_access_key=SECRET,
)


def signed(
    uri: str,
    headers: Mapping[str, list[str]] | None = None,
    method: str = "GET",
    access: S3Access = MINIO,
) -> bool:
    try:
        sign(access, region="us-east-1", method=method, uri=uri, headers=dict(headers or {}))
    except (ForbiddenError, BadRequestError):
        return False
    return True


@pytest.mark.attack
def test_attack_a_client_host_never_reaches_the_signature() -> None:
    # The attack: checked as bucket `lake` key `victim`, sent path-style with the endpoint as
    # Host, S3 reads bucket `victim`. The client's Host is refused, in every spelling.
    uri = "http://lake.minio.local:9000/victim"
    for name in ("host", "Host", "HOST", ":authority"):
        for value in ("minio.local:9000", "victim.minio.local:9000", "lake.minio.local:9001"):
            assert not signed(uri, {name: [value]}), (name, value)
    target = parse_target(uri, endpoint=MINIO.endpoint, region="us-east-1")
    assert (target.bucket, target.key) == ("lake", "victim")
    assert not signed(uri, {"Host": ["lake.minio.local:9000", "minio.local:9000"]})
    assert not signed(uri, {"Host": ["lake.minio.local:9000"], "host": ["minio.local:9000"]})
    # The URI's own authority may be sent (any case, default port spelled or not).
    assert signed(uri, {"Host": ["Lake.Minio.Local:9000"]})
    aws = S3Access(region="us-east-1", access_key_id="AKIDSIGNING", secret_access_key=SECRET)
    aws_uri = "http://lake.s3.amazonaws.com/wh/t1/a"
    assert signed(aws_uri, {"host": ["lake.s3.amazonaws.com:80"]}, access=aws)
    assert not signed(aws_uri, {"host": ["s3.amazonaws.com"]}, access=aws)


@pytest.mark.attack
def test_attack_the_signed_host_is_derived_from_the_uri() -> None:
    for uri, host in (
        ("http://lake.minio.local:9000/wh/t1/a", "lake.minio.local:9000"),
        ("http://minio.local:9000/lake/wh/t1/a", "minio.local:9000"),
        ("http://MINIO.local:9000/lake/wh/t1/a", "minio.local:9000"),
    ):
        for client in ({}, {"Host": [host]}):
            response = sign(MINIO, region="us-east-1", method="GET", uri=uri, headers=client)
            headers = response["headers"]
            assert not {"host", ":authority"} & {k.lower() for k in headers}
            auth = authorization_parts(headers["Authorization"][0])
            assert "host" in auth["SignedHeaders"].split(";")
            sent = {k: v[0] for k, v in headers.items()} | {"host": host}
            path_uri = uri.replace("MINIO", "minio")
            expected = reference_signature(
                SECRET, "us-east-1", "GET", path_uri, sent, auth["SignedHeaders"]
            )
            assert auth["Signature"] == expected
            # A signature for another Host (the attack's path-style send) differs.
            other = sent | {"host": "minio.local:9000" if host != "minio.local:9000" else "x"}
            assert auth["Signature"] != reference_signature(
                SECRET, "us-east-1", "GET", path_uri, other, auth["SignedHeaders"]
            )


@pytest.mark.attack
def test_attack_uris_that_could_address_another_bucket_are_refused() -> None:
    refused = [
        "http://user@minio.local:9000/lake/wh/t1/a",  # userinfo
        "http://minio.local:9000@victim.example/lake/wh/t1/a",
        "http://minio.local:9001/lake/wh/t1/a",  # another port
        "http://minio.local/lake/wh/t1/a",  # the default port is not the endpoint's
        "https://minio.local:9000/lake/wh/t1/a",  # another scheme
        "http://minio.local.:9000/lake/wh/t1/a",  # trailing dot
        "http://lake.minio.local.:9000/wh/t1/a",
        "http://evil.example/lake/wh/t1/a",
        "http://lake.evil.example:9000/wh/t1/a",
        "http://minio.local:9000/lake%2Fvictim/wh/t1/a",  # encoded slash in the bucket
        "http://minio.local:9000/%6Cake/wh/t1/a",  # encoded bucket
        "http://minio.local:9000/lake/wh/t1/..%2F..%2Fx",
        "http://minio.local:9000/lake/wh/t1/%2e%2e/%2e%2e/x",
        "http://minio.local:9000/lake/wh/t1/../../x",
        "http://minio.local:9000/lake/wh/t1/./a",
        "http://lake.minio.local:9000/../victim/x",
        "http://minio.local:9000/lake/wh/t1/a%5C..%5Cb",
        "http://minio.local:9000/lake/wh/t1/a\\b",
        "http://minio.local:9000/lake/wh/t1/a#frag",
        "http://minio.local:9000/lake/wh/t1/a b",
        "http://minio.local:9000/lake/wh/t1/\u00e9",
        "http://minio.local:9000/LAKE/wh/t1/a",
        "http://minio.local:9000//lake/wh/t1/a",
        "http://[::1]:9000/lake/wh/t1/a",
        "http://[::2]:9000/lake/wh/t1/a",
    ]
    for uri in refused:
        assert not signed(uri), uri
        with pytest.raises((ForbiddenError, BadRequestError)):
            parse_target(uri, endpoint=MINIO.endpoint, region="us-east-1")
    # Per-table checks see exactly one bucket: the virtual host's, not the path's first part.
    target = parse_target(
        "http://lake.minio.local:9000/victim/x", endpoint=MINIO.endpoint, region="us-east-1"
    )
    assert (target.bucket, target.key) == ("lake", "victim/x")
    dotted = parse_target(
        "http://victim.lake.minio.local:9000/x", endpoint=MINIO.endpoint, region="us-east-1"
    )
    assert dotted.bucket == "victim.lake"  # one (dotted) bucket, which the location check refuses


@pytest.mark.attack
def test_attack_headers_that_route_or_copy_are_refused() -> None:
    uri = "http://minio.local:9000/lake/wh/t1/a"
    for headers in (
        {"X-Forwarded-Host": ["victim.minio.local:9000"]},
        {"Forwarded": ["host=victim.minio.local:9000"]},
        {"X-Original-URL": ["/victim/x"]},
        {"x-amz-copy-source": ["victim/x"]},
        {"x-amz-copy-source-range": ["bytes=0-1"]},
        {":path": ["/victim/x"]},
        {"x-amz-meta-a\r\nHost": ["x"]},
        {"x-amz-meta-a": ["x\r\nHost: minio.local:9000"]},
    ):
        assert not signed(uri, headers, "PUT"), headers
    assert signed(uri, {"x-amz-meta-owner": ["t1"]}, "PUT")


def test_unparsable_ports_are_bad_requests_not_refusals() -> None:
    for uri in ("http://127.0.0.1:abc/lake/k", "http://127.0.0.1:99999/lake/k"):
        with pytest.raises(BadRequestError):
            parse(uri)
        with pytest.raises(BadRequestError):
            sign(ACCESS, region="us-east-1", method="GET", uri=uri, headers={})


def test_an_ipv6_endpoint_signs_its_own_uris() -> None:
    """urlsplit gives the endpoint's host without brackets; the URI's authority has them."""
    v6 = S3Access(
        region="us-east-1",
        endpoint="http://[::1]:9000",
        access_key_id="AKIDSIGNING",
        secret_access_key=SECRET,
    )
    uri = "http://[::1]:9000/lake/wh/t1/a"
    target = parse_target(uri, endpoint=v6.endpoint, region="us-east-1")
    assert (target.bucket, target.key) == ("lake", "wh/t1/a")
    assert signed(uri, access=v6)
    assert signed(uri, {"Host": ["[::1]:9000"]}, access=v6)
    assert not signed("http://[::2]:9000/lake/wh/t1/a", access=v6)
    assert not signed("http://lake.[::1]:9000/wh/t1/a", access=v6)


@pytest.mark.attack
def test_attack_headers_asking_more_than_a_plain_write_are_refused() -> None:
    uri = "http://minio.local:9000/lake/wh/t1/a"
    for headers in (
        {"x-amz-acl": ["public-read"]},
        {"X-Amz-Acl": ["private"]},
        {"x-amz-grant-read": ['uri="http://acs.amazonaws.com/groups/global/AllUsers"']},
        {"x-amz-grant-full-control": ["id=someone"]},
        {"x-amz-object-lock-mode": ["COMPLIANCE"]},
        {"x-amz-object-lock-legal-hold": ["ON"]},
        {"x-amz-bypass-governance-retention": ["true"]},
        {"x-amz-website-redirect-location": ["https://attacker.example/"]},
        {"x-amz-storage-class": ["DEEP_ARCHIVE"]},
        {"x-amz-tagging": ["a=b"]},
        {"x-amz-server-side-encryption": ["aws:kms"]},
        {"x-amz-server-side-encryption-aws-kms-key-id": ["arn:aws:kms:us-east-1:9:key/x"]},
        {"x-amz-server-side-encryption-customer-algorithm": ["AES256"]},
        {"x-amz-server-side-encryption": ["AES256", "aws:kms"]},
        {"x-amz-mfa": ["x 1"]},
        {"x-amz-something-new": ["1"]},
    ):
        assert not signed(uri, headers, "PUT"), headers
    # What PyIceberg (botocore) and Iceberg-Java (SDK v2) S3FileIO send.
    for headers in (
        {
            "x-amz-content-sha256": ["STREAMING-UNSIGNED-PAYLOAD-TRAILER"],
            "x-amz-decoded-content-length": ["11"],
            "x-amz-trailer": ["x-amz-checksum-crc32"],
            "x-amz-sdk-checksum-algorithm": ["CRC32"],
            "Content-Encoding": ["aws-chunked"],
            "amz-sdk-invocation-id": ["1"],
            "amz-sdk-request": ["attempt=1; max=3"],
        },
        {"x-amz-checksum-crc32": ["AAAAAA=="], "x-amz-meta-owner": ["t1"]},
        {"x-amz-date": ["20260102T030405Z"], "x-amz-security-token": ["t"]},
        {"x-amz-user-agent": ["aws-sdk-java"], "x-amz-request-payer": ["requester"]},
        {"x-amz-expected-bucket-owner": ["123456789012"]},
        {"x-amz-server-side-encryption": ["AES256"], "x-amz-storage-class": ["STANDARD"]},
    ):
        assert signed(uri, headers, "PUT"), headers
    assert signed(uri, {"x-amz-checksum-mode": ["ENABLED"]}, "GET")

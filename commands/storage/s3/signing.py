"""Server side of Iceberg's S3 remote signing (`POST .../v1/aws/s3/sign`).

The catalog keeps the S3 credential; a client describes the request it is about to send
(method, URI, headers; for bulk deletes also the body) and gets back SigV4 headers for it.
Before signing, the route checks that the request targets the table's own location:
`parse_target` → `check_allowed` → `sign`.

Which headers come back (measured with PyIceberg 0.12 + s3fs against moto in auth mode,
and read from Iceberg-Java's S3V4RestSignerClient):
- PyIceberg's fsspec signer `add_header`s every returned header. botocore then collapses
  the headers into a case-insensitive dict before sending (the last copy wins), so an
  echoed header does not go out twice, but a returned value overrides the client's.
- Iceberg-Java merges the returned headers *under* the request's own (the client's win).
So the response carries only what the client lacks: Authorization, X-Amz-Date,
X-Amz-Security-Token (with a session credential) and X-Amz-Content-SHA256 when the client
did not send one (PyIceberg never does; we then sign UNSIGNED-PAYLOAD, or the body's
SHA-256 for a bulk delete). Client headers are signed exactly as sent and never
rewritten, so both merge orders give the same request, with one exception: Host. It is
computed from the URI (`s3_addressing`), the same way the checked bucket and key are, and
a client Host that differs is refused: S3 routes by Host, so a signed Host the client
chose would let a request checked for one bucket be sent to another.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from xml.etree import ElementTree

import botocore.session
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import BotoCoreError

from icelog.commands.storage.kind import SignRequest
from icelog.commands.storage.s3.addressing import address, check_addressing_headers
from icelog.commands.storage.s3.objects import S3Access, split_location
from icelog.domain.errors import ForbiddenError, ServiceUnavailableError

UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
WRITE_METHODS = frozenset({"PUT", "POST", "DELETE"})
READ_METHODS = frozenset({"GET", "HEAD"})

# S3 caps DeleteObjects at 1000 keys; 1000 maximal keys in XML stay far below this.
MAX_DELETE_BODY = 2 * 1024 * 1024

# The signer signs with the warehouse's own credential, so it allows exactly the S3
# actions vended credentials get (`vending.session_policy`): GetObject(Version),
# PutObject, DeleteObject, AbortMultipartUpload, ListMultipartUploadParts, ListBucket.
# Sub-resources an Iceberg client uses on objects (multipart, a version to read, response
# overrides). Anything else (acl, tagging, attributes, retention, legal-hold, restore,
# select, ...) is refused, and `versionId` only reads (a versioned DELETE is
# s3:DeleteObjectVersion, a permanent delete past versioning).
_OBJECT_PARAMS = frozenset(
    {
        "uploads",
        "uploadId",
        "partNumber",
        "versionId",
        "x-id",
        "max-parts",
        "part-number-marker",
    }
)
# Bucket-level: object listings and bulk delete only (no versions or multipart-upload
# listings, which need s3:ListBucketVersions / s3:ListBucketMultipartUploads, and no
# policy, acl, lifecycle, cors, ...).
_BUCKET_PARAMS = frozenset(
    {
        "list-type",
        "prefix",
        "delimiter",
        "continuation-token",
        "start-after",
        "max-keys",
        "encoding-type",
        "fetch-owner",
        "marker",
        "optional-object-attributes",
        "delete",
        "x-id",
    }
)

# Client `x-amz-*` headers the signer signs. Many others change what a PutObject does
# beyond writing bytes, with rights vended credentials lack and effects no revoke in the
# catalog undoes: x-amz-acl / x-amz-grant-* (s3:PutObjectAcl), x-amz-tagging,
# x-amz-object-lock-* (a lock a purge cannot lift), x-amz-storage-class (an archive class
# no reader can GET), x-amz-website-redirect-location, SSE with a KMS or customer key
# (the catalog could not read the object back). They are refused, like any unknown one.
_SIGNABLE_AMZ = frozenset(
    {
        "x-amz-content-sha256",
        "x-amz-decoded-content-length",
        "x-amz-trailer",
        "x-amz-expected-bucket-owner",
        "x-amz-request-payer",
        "x-amz-user-agent",
        # Ours: set by the signer, a client copy is dropped (see _UNSIGNED_HEADERS).
        "x-amz-date",
        "x-amz-security-token",
    }
)
_SIGNABLE_AMZ_PREFIXES = ("x-amz-meta-", "x-amz-checksum-", "x-amz-sdk-")
# Headers allowed only with the value that changes nothing: the warehouse profile has no
# encryption setting, so objects get the bucket's default encryption; SSE-S3 (AES256) is
# what S3 applies without a header. STANDARD is the default storage class.
_SIGNABLE_VALUES = {
    "x-amz-server-side-encryption": frozenset({"AES256"}),
    "x-amz-storage-class": frozenset({"STANDARD"}),
}

# Headers left out of the signature. Ours to set (a client copy would be stale); those
# botocore never signs; hop-by-hop ones; and those that vary between attempts of one
# request (range, amz-sdk-*), so a signature Iceberg-Java caches for a GET stays valid.
_UNSIGNED_HEADERS = frozenset(
    {
        "authorization",
        "date",
        "x-amz-date",
        "x-amz-security-token",
        "user-agent",
        "expect",
        "transfer-encoding",
        "x-amzn-trace-id",
        "connection",
        "keep-alive",
        "te",
        "upgrade",
        "content-length",
        "range",
        "amz-sdk-invocation-id",
        "amz-sdk-request",
        "amz-sdk-retry",
    }
)

# Computed by the signer from the URI, never taken from the client, never returned (an
# HTTP client derives Host from the URI it sends to, which is exactly what was signed).
_OURS = frozenset({"host", ":authority"})


@dataclass(frozen=True)
class S3Target:
    """What an S3 request touches. `key` is URL-decoded; "" for bucket-level requests.

    `operation` is one of: object, create-multipart, upload-part, multipart (complete,
    abort, list parts), list, delete-objects, bucket (HEAD bucket).
    """

    bucket: str
    key: str
    operation: str
    params: tuple[tuple[str, str], ...] = ()

    def param(self, name: str) -> str | None:
        for key, value in self.params:
            if key == name:
                return value
        return None

    def has_param(self, name: str) -> bool:
        return any(key == name for key, _ in self.params)


def parse_target(uri: str, *, endpoint: str | None, region: str = "us-east-1") -> S3Target:
    """Bucket, key and operation of an S3 request URI.

    `endpoint` and `region` are the warehouse's (S3Access.endpoint, .region): the URI must
    address that S3 service, path-style or virtual-host; `s3_addressing.address` decides
    the one bucket and key, and `sign` signs the Host it derives from the same inputs.
    """
    addressed = address(uri, endpoint=endpoint, region=region)
    params = tuple(parse_qsl(addressed.query, keep_blank_values=True))
    return S3Target(
        bucket=addressed.bucket,
        key=addressed.key,
        operation=_operation(addressed.key, params),
        params=params,
    )


def _operation(key: str, params: tuple[tuple[str, str], ...]) -> str:
    names = {name for name, _ in params}
    if len(names) != len(params):
        # S3 and this check might pick different copies of a repeated parameter.
        return "unsupported:repeated query parameters"
    if key:
        unknown = {n for n in names - _OBJECT_PARAMS if not n.startswith("response-")}
        if unknown:
            return "unsupported:" + ",".join(sorted(unknown))
        if "uploads" in names:
            return "create-multipart"
        if "uploadId" in names:
            return "upload-part" if "partNumber" in names else "multipart"
        return "object"
    if unknown := names - _BUCKET_PARAMS:
        return "unsupported:" + ",".join(sorted(unknown))
    if "delete" in names:
        return "delete-objects"
    return "list" if names - {"x-id"} else "bucket"


@dataclass(frozen=True)
class _Prefix:
    bucket: str
    prefix: str  # no trailing slash; "" is the whole bucket

    def holds_key(self, bucket: str, key: str) -> bool:
        if bucket != self.bucket:
            return False
        return not self.prefix or key == self.prefix or key.startswith(self.prefix + "/")

    def holds_listing(self, bucket: str, prefix: str) -> bool:
        # A listing prefix without the trailing slash would also name siblings (t1 → t10).
        return bucket == self.bucket and (not self.prefix or prefix.startswith(self.prefix + "/"))


def _prefixes(allowed: Sequence[str]) -> list[_Prefix]:
    found = []
    for location in allowed:
        bucket, prefix = split_location(location)
        found.append(_Prefix(bucket, prefix.rstrip("/")))
    return found


def _has_dot_segment(key: str) -> bool:
    # S3 keeps `..` literally, but a proxy on the way might not: refuse such keys outright.
    return any(segment in (".", "..") for segment in key.split("/"))


def check_allowed(
    target: S3Target,
    method: str,
    *,
    allowed: Sequence[str],
    write: bool,
    body: str | None,
) -> None:
    """Raise ForbiddenError unless the request stays inside `allowed` ("s3://bucket/prefix")."""
    method = method.upper()
    where = f"s3://{target.bucket}/{target.key}"
    if method not in READ_METHODS | WRITE_METHODS:
        raise ForbiddenError(f"Method {method} is not allowed for remote signing")
    if method in WRITE_METHODS and not write:
        raise ForbiddenError(f"Write access is not allowed: {method} {where}")
    if target.operation.startswith("unsupported:"):
        wanted = target.operation.split(":", 1)[1]
        raise ForbiddenError(f"S3 sub-resource not allowed for remote signing: {wanted}")
    prefixes = _prefixes(allowed)

    # A bucket GET without sub-resources is ListObjects (v1) of the whole bucket.
    if target.operation == "list" or (target.operation == "bucket" and method == "GET"):
        if method != "GET":
            raise ForbiddenError(f"Method {method} is not allowed on bucket {target.bucket}")
        listed = target.param("prefix") or ""
        if _has_dot_segment(listed) or not any(
            p.holds_listing(target.bucket, listed) for p in prefixes
        ):
            raise ForbiddenError(
                f"Listing outside the allowed locations: s3://{target.bucket}/{listed}"
            )
        return
    if target.operation == "delete-objects":
        if method != "POST":
            raise ForbiddenError(f"Method {method} is not allowed on bucket {target.bucket}")
        for key in _delete_keys(body):
            if _has_dot_segment(key) or not any(p.holds_key(target.bucket, key) for p in prefixes):
                raise ForbiddenError(
                    f"Bulk delete outside the allowed locations: s3://{target.bucket}/{key}"
                )
        return
    if target.has_param("versionId") and method not in READ_METHODS:
        # DELETE ?versionId is s3:DeleteObjectVersion, beyond what vended credentials get.
        raise ForbiddenError(f"Only reads may name an object version: {method} {where}")
    if target.operation == "bucket" and method != "HEAD":
        # Bucket-level PUT/DELETE would create or drop the bucket itself.
        raise ForbiddenError(f"Method {method} is not allowed on bucket {target.bucket}")
    if _has_dot_segment(target.key) or not any(
        p.holds_key(target.bucket, target.key) for p in prefixes
    ):
        raise ForbiddenError(f"Access outside the allowed locations: {where}")


def _delete_keys(body: str | None) -> list[str]:
    """Keys of a DeleteObjects body (`<Delete><Object><Key>...`), namespace or not."""
    if not body:
        raise ForbiddenError("Bulk delete requests must include the request body to be signed")
    if len(body) > MAX_DELETE_BODY:
        raise ForbiddenError("Bulk delete body is too large")
    try:
        # No DTDs or entities are needed here; refuse them rather than expand them.
        if "<!DOCTYPE" in body or "<!ENTITY" in body:
            raise ValueError("DTD")
        root = ElementTree.fromstring(body)  # noqa: S314 - DTDs refused above
    except (ElementTree.ParseError, ValueError):
        raise ForbiddenError("Bulk delete body is not a DeleteObjects XML document") from None
    objects = [obj for obj in root if _local(obj.tag) == "Object"]
    if any(_local(element.tag) == "VersionId" for obj in objects for element in obj):
        # Deleting a version is s3:DeleteObjectVersion: past versioning, for good.
        raise ForbiddenError("Bulk delete may not name object versions")
    keys = [
        element.text or "" for obj in objects for element in obj if _local(element.tag) == "Key"
    ]
    if _local(root.tag) != "Delete" or not keys:
        raise ForbiddenError("Bulk delete body names no objects")
    return keys


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


class _ClientPayloadSigner(S3SigV4Auth):  # type: ignore[misc]  # botocore ships no types
    """SigV4 for S3 with the payload hash the client declared.

    We never see the body, so the hash botocore would compute (of an empty body) is wrong
    for PUTs. The client's `x-amz-content-sha256` is signed as sent; S3 then verifies the
    body against it (or accepts any body for UNSIGNED-PAYLOAD, as the client chose).
    """

    def __init__(self, credentials: Credentials, region: str, payload_hash: str) -> None:
        super().__init__(credentials, "s3", region)
        self._payload_hash = payload_hash

    def payload(self, request: Any) -> str:
        return self._payload_hash


def _header(headers: Mapping[str, Sequence[str]], name: str) -> str | None:
    for key, values in headers.items():
        if key.lower() == name:
            return ", ".join(values)
    return None


def _bulk_delete_payload_hash(headers: Mapping[str, Sequence[str]], body: str) -> str:
    """The payload hash to sign for a bulk delete, so S3 refuses any other body.

    The keys were checked in this body; the signature must pin it. Only SHA-256 and MD5
    count: a CRC (or SHA-1) checksum header is cheap to match with another body. Without
    a declared `x-amz-content-sha256` we sign the body's SHA-256 (and return the header);
    a declared one must be that hash, or UNSIGNED-PAYLOAD next to a matching Content-MD5
    or x-amz-checksum-sha256 (which S3 verifies). Chunked uploads and trailers (whose
    checksums come after the signature) are refused.
    """
    data = body.encode()
    body_sha = hashlib.sha256(data).hexdigest()
    declared = _header(headers, "x-amz-content-sha256")
    md5 = _header(headers, "content-md5")
    sha_b64 = _header(headers, "x-amz-checksum-sha256")
    body_md5 = base64.b64encode(hashlib.md5(data).digest()).decode()  # noqa: S324 - S3's own
    body_sha_b64 = base64.b64encode(hashlib.sha256(data).digest()).decode()
    if md5 is not None and md5 != body_md5:
        raise ForbiddenError("Bulk delete Content-MD5 does not match the body")
    if sha_b64 is not None and sha_b64 != body_sha_b64:
        raise ForbiddenError("Bulk delete x-amz-checksum-sha256 does not match the body")
    chunked = "aws-chunked" in (_header(headers, "content-encoding") or "").lower()
    if chunked or _header(headers, "x-amz-trailer") is not None:
        raise ForbiddenError("Bulk delete bodies must be sent whole, not chunked")
    if declared is None or declared == body_sha:
        return body_sha
    if declared == UNSIGNED_PAYLOAD and (md5 is not None or sha_b64 is not None):
        return UNSIGNED_PAYLOAD
    raise ForbiddenError("Bulk delete body is not covered by its SHA-256 or Content-MD5")


def check_signable_headers(headers: Mapping[str, Sequence[str]]) -> None:
    """Refuse `x-amz-*` headers outside `_SIGNABLE_AMZ` (and the prefixes there), and
    value-restricted ones with another value. Other headers (Content-*, If-*, Range, ...)
    only describe the bytes or condition the request; they are signed as sent."""
    for name, values in headers.items():
        lower = name.lower()
        if not lower.startswith("x-amz-"):
            continue
        if lower in _SIGNABLE_AMZ or lower.startswith(_SIGNABLE_AMZ_PREFIXES):
            continue
        accepted = _SIGNABLE_VALUES.get(lower)
        if accepted is None:
            raise ForbiddenError(f"Header {name} is not allowed for remote signing")
        if any(value.strip() not in accepted for value in values):
            raise ForbiddenError(
                f"Header {name} is allowed for remote signing only as {', '.join(sorted(accepted))}"
            )


def _credentials(access: S3Access) -> Credentials:
    """The storage's own keys, else botocore's default chain (env, profile, instance role),
    which is also what client_for() falls back to for the catalog's own S3 calls."""
    if access.access_key_id and access.secret_access_key:
        return Credentials(access.access_key_id, access.secret_access_key, access.session_token)
    try:
        found = botocore.session.Session().get_credentials()
        # One consistent key/secret/token triple, even while a role credential refreshes.
        frozen = found.get_frozen_credentials() if found is not None else None
    except BotoCoreError:
        raise ServiceUnavailableError("Could not load the S3 credential for signing") from None
    if frozen is None:
        raise ForbiddenError("Remote signing has no S3 credential configured for this storage")
    return Credentials(frozen.access_key, frozen.secret_key, frozen.token)


def sign(
    access: S3Access,
    *,
    region: str,
    method: str,
    uri: str,
    headers: Mapping[str, Sequence[str]],
    body: str | None = None,
) -> dict[str, Any]:
    """SigV4-sign the described request; returns the S3SignResponse (`uri`, `headers`).

    The URI is addressed as `parse_target` does (same endpoint and region, from `access`)
    and the signature covers the Host derived from it, never a client's Host. Only headers
    the client lacks are returned (see the module docstring). Raises ForbiddenError for
    requests this signer refuses whatever the location: a Host or routing header that
    points elsewhere, server-side copies (their source is a header, outside the URI
    check), `x-amz-*` headers that ask S3 for more than a plain read or write
    (`check_signable_headers`) and bulk deletes whose body the signature would not pin.
    """
    addressed = address(uri, endpoint=access.endpoint, region=access.region)
    check_addressing_headers(headers, addressed, scheme=urlsplit(uri).scheme)
    if any(name.lower().startswith("x-amz-copy-source") for name in headers):
        raise ForbiddenError("Server-side copy is not allowed for remote signing")
    check_signable_headers(headers)
    credentials = _credentials(access)
    sent = {name.lower(): ", ".join(values) for name, values in headers.items()}
    payload_hash = sent.get("x-amz-content-sha256") or UNSIGNED_PAYLOAD
    is_bulk_delete = method.upper() == "POST" and "delete" in dict(
        parse_qsl(addressed.query, keep_blank_values=True)
    )
    if is_bulk_delete:
        if body is None:
            raise ForbiddenError("Bulk delete requests must include the request body to be signed")
        payload_hash = _bulk_delete_payload_hash(headers, body)

    signed_headers = {
        name: ", ".join(values)
        for name, values in headers.items()
        if name.lower() not in _UNSIGNED_HEADERS and name.lower() not in _OURS
    }
    signed_headers["host"] = addressed.host
    request = AWSRequest(method=method.upper(), url=uri, headers=signed_headers)
    _ClientPayloadSigner(credentials, region, payload_hash).add_auth(request)

    returned: dict[str, list[str]] = {}
    for name, value in request.headers.items():
        if name.lower() not in _OURS and sent.get(name.lower()) != value:
            returned[name] = [value]
    return {"uri": uri, "headers": returned}


@dataclass(frozen=True)
class S3Signer:
    """A warehouse's remote signer (`RemoteSigner`): its S3 access, whose endpoint and region
    both address a request's URI and sign it, so that what is signed is what was checked."""

    access: S3Access

    def _target(self, request: SignRequest) -> S3Target:
        if request.region != self.access.region:
            raise ForbiddenError(
                f"This warehouse's bucket is in {self.access.region}, not {request.region}"
            )
        return parse_target(request.uri, endpoint=self.access.endpoint, region=self.access.region)

    def addressed(self, request: SignRequest) -> str:
        target = self._target(request)
        return f"s3://{target.bucket}/{target.param('prefix') or target.key}".rstrip("/")

    def sign(self, request: SignRequest, *, allowed: Sequence[str], write: bool) -> dict[str, Any]:
        target = self._target(request)
        check_allowed(target, request.method, allowed=allowed, write=write, body=request.body)
        return sign(
            self.access,
            region=request.region,
            method=request.method,
            uri=request.uri,
            headers=request.headers,
            body=request.body,
        )

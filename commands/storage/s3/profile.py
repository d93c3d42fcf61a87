"""S3 storage profiles and credentials (Lakekeeper's shapes), and the access probe.

A profile describes where a warehouse lives and how clients get access; it is stored in
the event log, so it never holds a secret. The credential (access key + secret) is
validated here and stored by the caller in the secret vault; the profile keeps only its id.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, InvalidRegionError
from botocore.utils import validate_region_name

from icelog.commands.storage.deadline import within_deadline
from icelog.commands.storage.kind import SHARED_PROFILE_FIELDS
from icelog.commands.storage.profile_fields import (
    DERIVED_FIELDS,
    flag,
    int_in_range,
    key_prefix,
    optional_str,
    optional_url,
    refuse_unknown_fields,
)
from icelog.commands.storage.s3.objects import (
    NOT_S3,
    S3Access,
    client_for,
    failure_reason,
    split_location,
)
from icelog.domain.errors import BadRequestError
from icelog.domain.locations import Location

# Fields a profile may carry: its own, and those of every kind (`storage-layout`), which the
# registry takes out and normalises before a profile reaches `normalize_s3_profile`.
# Lakekeeper fields icelog does not act on yet are refused, so that a setting never
# silently does nothing.
_FIELDS = SHARED_PROFILE_FIELDS | {
    "type",
    "bucket",
    "key-prefix",
    "region",
    "endpoint",
    "path-style-access",
    "flavor",
    "sts-enabled",
    "sts-endpoint",
    "assume-role-arn",
    "sts-role-arn",
    "sts-token-validity-seconds",
    "remote-signing-enabled",
    "allow-alternative-protocols",
}
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
# botocore's own rule for region names (a name it refuses would fail later, not here).
_REGION = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?$")
_ARN = re.compile(r"^arn:[A-Za-z0-9\-]+:[A-Za-z0-9\-]+:[A-Za-z0-9\-]*:[0-9]*:.+$")
MIN_VALIDITY_S, MAX_VALIDITY_S = 900, 43_200


def _botocore_region(region: str) -> bool:
    try:
        validate_region_name(region)
    except InvalidRegionError:
        return False
    return True


def normalize_s3_profile(profile: dict[str, Any]) -> dict[str, Any]:
    """Check an `s3` profile and return it with every field present and `base-location`."""
    refuse_unknown_fields(profile, _FIELDS | DERIVED_FIELDS, "storage-profile")
    bucket = profile.get("bucket")
    if not isinstance(bucket, str) or not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise BadRequestError(
            "storage-profile.bucket must be an S3 bucket name (3-63 lowercase letters, "
            "digits, '.' or '-')"
        )
    region = profile.get("region")
    if not isinstance(region, str) or not _REGION.fullmatch(region) or not _botocore_region(region):
        raise BadRequestError("storage-profile.region is required (e.g. us-east-1)")
    prefix = key_prefix(profile)
    flavor = profile.get("flavor") or "aws"
    if flavor not in ("aws", "s3-compat"):
        raise BadRequestError("storage-profile.flavor must be 'aws' or 's3-compat'")
    validity = int_in_range(
        profile,
        "sts-token-validity-seconds",
        default=3600,
        low=MIN_VALIDITY_S,
        high=MAX_VALIDITY_S,
    )
    roles = {}
    for key in ("assume-role-arn", "sts-role-arn"):
        arn = optional_str(profile, key)
        if arn is not None and not _ARN.match(arn):
            raise BadRequestError(f"storage-profile.{key} must be an IAM role ARN")
        roles[key] = arn
    sts_enabled = flag(profile, "sts-enabled", False)
    no_role = roles["sts-role-arn"] is None and roles["assume-role-arn"] is None
    if sts_enabled and flavor == "aws" and no_role:
        raise BadRequestError(
            "storage-profile.sts-role-arn (or assume-role-arn) is required for STS "
            "credential vending on AWS"
        )
    base = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
    # The same rules as every other location (no encoded dots, lengths, characters).
    base = str(Location.parse(base, "storage-profile.key-prefix"))
    return {
        "type": "s3",
        "bucket": bucket,
        "key-prefix": prefix,
        "region": region,
        "endpoint": optional_url(profile, "endpoint"),
        "path-style-access": flag(profile, "path-style-access", False),
        "flavor": flavor,
        "sts-enabled": sts_enabled,
        "sts-endpoint": optional_url(profile, "sts-endpoint"),
        "assume-role-arn": roles["assume-role-arn"],
        "sts-role-arn": roles["sts-role-arn"],
        "sts-token-validity-seconds": validity,
        "remote-signing-enabled": flag(profile, "remote-signing-enabled", True),
        "allow-alternative-protocols": flag(profile, "allow-alternative-protocols", False),
        "base-location": base,
    }


def normalize_s3_credential(credential: object) -> dict[str, Any]:
    """`{"type": "s3", "credential-type": "access-key", ...}`; the `aws-` spellings that
    the Doris and Fluss guides send are accepted too. Messages never echo values."""
    if not isinstance(credential, dict):
        raise BadRequestError("storage-credential must be an object")
    if credential.get("type") != "s3":
        raise BadRequestError("storage-credential.type must be 's3' for an s3 storage profile")
    kind = credential.get("credential-type", "access-key")
    if kind != "access-key":
        raise BadRequestError(
            f"storage-credential.credential-type {kind!r} is not supported; use 'access-key'"
        )
    key_id = credential.get("access-key-id", credential.get("aws-access-key-id"))
    secret = credential.get("secret-access-key", credential.get("aws-secret-access-key"))
    if not isinstance(key_id, str) or not key_id.strip():
        raise BadRequestError("storage-credential.access-key-id is required")
    if not isinstance(secret, str) or not secret:
        raise BadRequestError("storage-credential.secret-access-key is required")
    external_id = credential.get("external-id")
    if external_id is not None and not isinstance(external_id, str):
        raise BadRequestError("storage-credential.external-id must be a string")
    normalized: dict[str, Any] = {
        "type": "s3",
        "credential-type": "access-key",
        "access-key-id": key_id.strip(),
        "secret-access-key": secret,
    }
    if external_id:
        normalized["external-id"] = external_id
    return normalized


def s3_access(profile: dict[str, Any], credential: dict[str, Any] | None) -> S3Access:
    """How the catalog itself reaches a warehouse's bucket."""
    return S3Access(
        region=str(profile["region"]),
        endpoint=profile.get("endpoint"),
        path_style=bool(profile.get("path-style-access")),
        access_key_id=None if credential is None else credential["access-key-id"],
        secret_access_key=None if credential is None else credential["secret-access-key"],
    )


def probe_s3_access(profile: dict[str, Any], access: S3Access) -> None:
    """The access check within the access-check deadline (`_probe` says what it checks)."""
    within_deadline(
        lambda: _probe(profile, access), no_answer=NOT_S3, thread_name="icelog-s3-probe"
    )


def _probe(profile: dict[str, Any], access: S3Access) -> None:
    """Write, read, list and delete one object below the base location, as Lakekeeper
    does at warehouse creation. When an S3 service answered with an error, the error names
    the step and the S3 error code; any other failure, at whatever step, is the one phrase
    NOT_S3 — so that the check cannot tell a closed port from a web server (docs/security.md).
    """
    bucket, prefix = split_location(profile["base-location"])
    key = (
        f"{prefix}/.icelog-probe-{uuid.uuid4().hex}"
        if prefix
        else f".icelog-probe-{uuid.uuid4().hex}"
    )
    not_s3 = BadRequestError(f"Storage validation failed: {NOT_S3}")
    try:
        client = client_for(access, quick=True)
    except (BotoCoreError, ValueError):
        raise not_s3 from None
    payload = b"icelog storage probe"
    step = "write"
    try:
        client.put_object(Bucket=bucket, Key=key, Body=payload)
        step = "read"
        read = client.get_object(Bucket=bucket, Key=key)["Body"].read(len(payload) + 1)
        if read != payload:
            raise not_s3  # no S3 service answers a read with other bytes
        step = "list"
        client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
        step = "delete"
        client.delete_object(Bucket=bucket, Key=key)
    except (ClientError, BotoCoreError) as exc:
        reason = failure_reason(exc)
        if reason == NOT_S3:
            raise not_s3 from None
        raise BadRequestError(
            f"Storage validation failed: could not {step} s3://{bucket}/{key}: {reason}"
        ) from None

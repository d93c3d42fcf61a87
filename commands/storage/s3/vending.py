"""STS credential vending: short-lived S3 credentials scoped to one table's location.

loadTable / createTable can hand a client temporary credentials instead of the catalog's
own key (`X-Iceberg-Access-Delegation: vended-credentials`). The catalog calls STS
AssumeRole with its stored credential and a session policy that narrows the role to the
table's prefix, and returns the result in the REST spec's `storage-credentials` shape.

Results are cached in memory and reused only during the first half of their lifetime, so
a client always receives credentials that stay valid for at least half the configured
validity. Nothing here logs or raises with a key, secret, session token or external id.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

# Re-exported: callers knew them here before storage kinds had a module of their own.
from icelog.commands.storage.kind import VendedCredentials as VendedCredentials  # noqa: PLC0414
from icelog.commands.storage.kind import storage_credentials as storage_credentials  # noqa: PLC0414
from icelog.commands.storage.s3.objects import S3Access, failure_reason, split_location
from icelog.commands.storage.vend_cache import VendCache
from icelog.domain.errors import (
    BadRequestError,
    ServiceUnavailableError,
    UnsupportedOperationError,
)

# MinIO and SeaweedFS accept any role ARN (the credential's own policy applies), but the
# STS API still requires one; this is the conventional placeholder.
PLACEHOLDER_ROLE_ARN = "arn:aws:iam::000000000000:role/icelog-vended"

_READ_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion")
_WRITE_ACTIONS = (
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)
# `*`, `?` are IAM wildcards and `${` starts a policy variable: a prefix holding one of
# them would widen the grant beyond the table, so such a location is never vended for.
_POLICY_METACHARS = re.compile(r"[*?]|\$\{")
# AWS's RoleSessionName alphabet (its \w is ASCII) and length bounds.
_SESSION_UNSAFE = re.compile(r"[^\w+=,.@-]", re.ASCII)
_SESSION_MAX = 64
_SESSION_PREFIX = "icelog-"
# Vending sits on the loadTable path: fail within seconds rather than hang the request.
_STS_CONFIG = Config(
    connect_timeout=5,
    read_timeout=15,
    retries={"mode": "standard", "max_attempts": 3},
)

AssumeRole = Callable[[S3Access, str | None, str, Mapping[str, Any]], Mapping[str, Any]]
"""(catalog access, STS endpoint or None for AWS's, region, AssumeRole parameters) →
the response's `Credentials` (AccessKeyId, SecretAccessKey, SessionToken, Expiration)."""


def session_policy(
    bucket: str, key_prefix: str, *, write: bool, partition: str = "aws"
) -> dict[str, Any]:
    """An IAM session policy allowing only objects below `key_prefix` (a table location).

    Object resources end in `/*` so that `db/t1` never reaches `db/t10/...`. Listing is
    allowed for `prefix/` and below it, never for the bare prefix (whose listing names
    the keys of `db/t10/`; the signer's `holds_listing` refuses it too). GetBucketLocation
    sits in its own statement because its requests carry no `s3:prefix`, so the list
    condition would always deny it.
    """
    prefix = key_prefix.strip("/")
    if not prefix:
        raise ValueError("a session policy needs a non-empty key prefix (never a whole bucket)")
    if _POLICY_METACHARS.search(prefix) or _POLICY_METACHARS.search(bucket):
        raise ValueError("a location holding '*', '?' or '${' cannot be scoped by a policy")
    bucket_arn = f"arn:{partition}:s3:::{bucket}"
    actions = [*_READ_ACTIONS, *(_WRITE_ACTIONS if write else ())]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "TableObjects",
                "Effect": "Allow",
                "Action": actions,
                "Resource": [f"{bucket_arn}/{prefix}/*"],
            },
            {
                "Sid": "ListTablePrefix",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": [bucket_arn],
                # Never the bare prefix: ListObjects(Prefix="db/t1") also lists db/t10/...
                "Condition": {"StringLike": {"s3:prefix": [f"{prefix}/", f"{prefix}/*"]}},
            },
            {
                "Sid": "LocateBucket",
                "Effect": "Allow",
                "Action": ["s3:GetBucketLocation"],
                "Resource": [bucket_arn],
            },
        ],
    }


def role_session_name(location: str) -> str:
    """`icelog-<last path segment>`, made to fit STS's alphabet and 64 characters.

    The session name shows up in CloudTrail / server logs, so it names the table; the
    tail is kept when cutting because icelog's table directories end in the table id.
    """
    segment = location.rstrip("/").rsplit("/", 1)[-1]
    safe = _SESSION_UNSAFE.sub("_", segment) or "table"
    return _SESSION_PREFIX + safe[-(_SESSION_MAX - len(_SESSION_PREFIX)) :]


def _partition(role_arn: str) -> str:
    # aws-cn / aws-us-gov roles need bucket ARNs in the same partition.
    parts = role_arn.split(":")
    return parts[1] if len(parts) > 1 and parts[1] else "aws"


def boto3_assume_role(
    access: S3Access, endpoint: str | None, region: str, params: Mapping[str, Any]
) -> Mapping[str, Any]:
    """The real STS AssumeRole call, signed with the catalog's own credential."""
    where = endpoint or "the AWS STS endpoint"
    try:
        client = boto3.client(
            "sts",
            region_name=region,
            endpoint_url=endpoint,
            aws_access_key_id=access.access_key_id,
            aws_secret_access_key=access.secret_access_key,
            aws_session_token=access.session_token,
            config=_STS_CONFIG,
        )
        credentials: Mapping[str, Any] = client.assume_role(**params)["Credentials"]
    except (ClientError, BotoCoreError) as exc:
        raise ServiceUnavailableError(
            f"Could not vend storage credentials: STS AssumeRole at {where} failed: "
            f"{failure_reason(exc, 'STS')}"
        ) from None
    except KeyError:
        raise ServiceUnavailableError(
            f"Could not vend storage credentials: STS AssumeRole at {where} returned no credentials"
        ) from None
    return credentials


class CredentialVendor:
    """Vends and caches table-scoped STS credentials (`VendCache` says for how long, and
    why two concurrent misses may both call STS); safe to share between threads.
    `clock` must tell wall-clock seconds (it is compared with STS's Expiration).
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        max_entries: int = 10_000,
        assume_role: AssumeRole | None = None,
    ) -> None:
        self._clock = clock
        self._assume_role = assume_role or boto3_assume_role
        self._cache = VendCache(max_entries)

    def vend(
        self,
        profile: Mapping[str, Any],
        access: S3Access,
        location: str,
        *,
        write: bool,
        external_id: str | None = None,
    ) -> VendedCredentials:
        """Credentials for `location` (a table location inside the profile's bucket and
        key prefix): read-only, or read-write when `write`."""
        if profile.get("type") != "s3" or not profile.get("sts-enabled"):
            raise UnsupportedOperationError(
                "Credential vending is not enabled for this warehouse's storage profile"
            )
        bucket, key = split_location(location)
        key = key.strip("/")
        base_prefix = str(profile.get("key-prefix") or "").strip("/")
        # Defence in depth: the catalog already keeps tables inside their warehouse, and
        # a credential must never be stretched to a bucket or prefix it was not given for.
        if bucket != profile["bucket"] or not key:
            raise BadRequestError(f"Cannot vend credentials for {location}: not a table location")
        if base_prefix and not key.startswith(base_prefix + "/"):
            raise BadRequestError(f"Cannot vend credentials for {location}: outside the warehouse")
        if _POLICY_METACHARS.search(key):
            raise BadRequestError(
                f"Cannot vend credentials for {location}: '*', '?' and '${{' cannot be scoped"
            )

        role_arn = profile.get("sts-role-arn") or profile.get("assume-role-arn")
        if role_arn is None:
            if profile.get("flavor") != "s3-compat":
                raise BadRequestError(
                    "Credential vending on AWS needs storage-profile.sts-role-arn"
                )
            role_arn = PLACEHOLDER_ROLE_ARN
        sts_endpoint: str | None = profile.get("sts-endpoint") or profile.get("endpoint")
        duration = int(profile["sts-token-validity-seconds"])
        # Everything that shapes the answer is in the key, so a profile edit (endpoint,
        # region, validity) is never answered from a stale entry.
        cache_key = (
            profile.get("credential-id"),
            role_arn,
            sts_endpoint,
            location,
            write,
            external_id,
            profile["region"],
            profile.get("endpoint"),
            bool(profile.get("path-style-access")),
            duration,
        )
        now = self._clock()
        cached = self._cache.get(cache_key, now)
        if cached is not None:
            return cached

        params: dict[str, Any] = {
            "RoleArn": role_arn,
            "RoleSessionName": role_session_name(location),
            "Policy": json.dumps(
                session_policy(bucket, key, write=write, partition=_partition(role_arn)),
                separators=(",", ":"),  # packed-policy size counts; spaces waste it
            ),
            "DurationSeconds": duration,
        }
        if external_id:
            params["ExternalId"] = external_id
        sts = self._assume_role(access, sts_endpoint, str(profile["region"]), params)
        vended, lifetime = _vended(profile, location, sts, issued_at=now, requested=duration)
        return self._cache.put(cache_key, vended, now=now, lifetime_s=lifetime)


def _vended(
    profile: Mapping[str, Any],
    location: str,
    sts: Mapping[str, Any],
    *,
    issued_at: float,
    requested: int,
) -> tuple[VendedCredentials, float]:
    """The client config, and the lifetime in seconds the cache may count on."""
    try:
        key_id, secret, token = sts["AccessKeyId"], sts["SecretAccessKey"], sts["SessionToken"]
        expiration = sts["Expiration"]
    except KeyError:
        raise ServiceUnavailableError(
            "Could not vend storage credentials: STS AssumeRole returned incomplete credentials"
        ) from None
    if not isinstance(expiration, datetime):
        raise ServiceUnavailableError(
            "Could not vend storage credentials: STS AssumeRole returned no expiration"
        )
    expires_at = expiration.timestamp()
    # Measured from before the call; capped at what was asked for, so that a clock behind
    # the STS server's never stretches reuse past half the real validity.
    lifetime = max(0.0, min(float(requested), expires_at - issued_at))
    region = str(profile["region"])
    expires_at_ms = int(expires_at * 1000)
    config = {
        "s3.access-key-id": str(key_id),
        "s3.secret-access-key": str(secret),
        "s3.session-token": str(token),
        "s3.session-token-expires-at-ms": str(expires_at_ms),
        "client.region": region,
        "s3.region": region,
    }
    if profile.get("endpoint"):
        config["s3.endpoint"] = str(profile["endpoint"])
    # DuckDB accepts only these two literal spellings.
    config["s3.path-style-access"] = "true" if profile.get("path-style-access") else "false"
    return VendedCredentials(prefix=location, config=config, expires_at_ms=expires_at_ms), lifetime

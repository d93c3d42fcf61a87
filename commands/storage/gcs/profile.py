"""GCS storage profiles and credentials (Lakekeeper's shapes), checked and normalised.

A profile is stored in the event log, so it never holds a secret; the credential (a
service-account key) is checked here and sealed by the caller. Messages never echo a value
of the credential.
"""

from __future__ import annotations

import json
import re
from typing import Any

from google.oauth2 import service_account

from icelog.commands.storage.profile_fields import (
    DERIVED_FIELDS,
    flag,
    http_url,
    key_prefix,
    refuse_unknown_fields,
    reject_any_control_character,
)
from icelog.domain.errors import BadRequestError
from icelog.domain.locations import Location

DEFAULT_ENDPOINT = "https://storage.googleapis.com"
DEFAULT_STS_ENDPOINT = "https://sts.googleapis.com/v1/token"
DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token"  # noqa: S105 - a URL
GOOGLE_UNIVERSE = "googleapis.com"

_FIELDS = {
    "type",
    "bucket",
    "key-prefix",
    "sts-enabled",
    "storage-layout",
    "endpoint",
    "sts-endpoint",
}
# Google's bucket naming rules: 3-63 characters (up to 222 with dots, 63 per dot-separated
# part), lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or
# digit; no "goog" prefix, no "google" inside, not an IP address.
_BUCKET_CHARS = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_BUCKET_RULES = (
    "storage-profile.bucket must be a GCS bucket name: 3-63 lowercase letters, digits, '-', "
    "'_' or '.' (up to 222 with dots, 63 between dots), starting and ending with a letter or "
    "digit, not starting with 'goog', without 'google', not an IP address"
)

_KEY_FIELDS = (
    "type",
    "project_id",
    "private_key_id",
    "private_key",
    "client_email",
    "client_id",
    "auth_uri",
    "token_uri",
    "auth_provider_x509_cert_url",
    "client_x509_cert_url",
    "universe_domain",
)
# What icelog needs of a key; Lakekeeper requires all eleven, Google's key files have them.
_KEY_REQUIRED = ("type", "project_id", "private_key_id", "private_key", "client_email")
_EMAIL = re.compile(r"^[^@\s]{1,128}@[A-Za-z0-9.-]{1,253}$")
# Project ids: 6-30 lowercase letters, digits, '-'; legacy domain-scoped ones hold
# `domain.com:` before it.
_PROJECT_ID = re.compile(r"^(?:[a-z0-9.-]{1,63}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$")


def bucket_problem(name: object) -> str | None:
    """Why `name` is not a GCS bucket name (None when it is one)."""
    if not isinstance(name, str) or not _BUCKET_CHARS.fullmatch(name):
        return _BUCKET_RULES
    parts = name.split(".")
    if any(not part or len(part) > 63 for part in parts) or (len(parts) == 1 and len(name) > 63):
        return _BUCKET_RULES
    if name.startswith("goog") or "google" in name or "g00gle" in name or _IPV4.fullmatch(name):
        return _BUCKET_RULES
    return None


def http_url_or_default(value: object, what: str, default: str) -> str:
    """An `http_url` without control characters or spaces; `default` when absent."""
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise BadRequestError(f"{what} must be a string")
    reject_any_control_character(value, what)
    url = http_url(value, what)
    if " " in value:
        raise BadRequestError(f"{what} must not hold spaces")
    return url


def _key_prefix(profile: dict[str, Any]) -> str:
    """`key_prefix`, and no character that could not sit inside the quoted prefix of a
    downscoping rule (`'`, '\\'), nor '%' (one folder must have one spelling)."""
    prefix = key_prefix(profile)
    if "'" in prefix or "%" in prefix or "\\" in prefix:
        raise BadRequestError("storage-profile.key-prefix must not hold ', % or \\")
    return prefix


def normalize_gcs_profile(profile: dict[str, Any]) -> dict[str, Any]:
    """Check a `gcs` profile; return it with every field present and its `base-location`."""
    refuse_unknown_fields(profile, _FIELDS | DERIVED_FIELDS, "storage-profile")
    bucket = profile.get("bucket")
    problem = bucket_problem(bucket)
    if problem is not None:
        raise BadRequestError(problem)
    assert isinstance(bucket, str)
    prefix = _key_prefix(profile)
    base = f"gs://{bucket}/{prefix}" if prefix else f"gs://{bucket}"
    # The same rules as every other location (lengths, characters, dot segments).
    base = str(Location.parse(base, "storage-profile.key-prefix"))
    return {
        "type": "gcs",
        "bucket": bucket,
        "key-prefix": prefix,
        "sts-enabled": flag(profile, "sts-enabled", True),
        # The storage registry checks and normalises layouts for every kind.
        "storage-layout": profile.get("storage-layout"),
        "endpoint": http_url_or_default(
            profile.get("endpoint"), "storage-profile.endpoint", DEFAULT_ENDPOINT
        ),
        "sts-endpoint": http_url_or_default(
            profile.get("sts-endpoint"), "storage-profile.sts-endpoint", DEFAULT_STS_ENDPOINT
        ),
        "base-location": base,
    }


def _key_text(key: dict[str, Any], name: str, *, required: bool) -> str | None:
    value = key.get(name)
    if value is None or value == "":
        if required:
            raise BadRequestError(f"storage-credential.key.{name} is required")
        return None
    if not isinstance(value, str):
        raise BadRequestError(f"storage-credential.key.{name} must be a string")
    if name != "private_key":  # a PEM holds line breaks; its content is checked by parsing
        reject_any_control_character(value, f"storage-credential.key.{name}")
    return value


def normalize_gcs_credential(credential: object) -> dict[str, Any]:
    """`{"type": "gcs", "credential-type": "service-account-key", "key": {...}}`, the key
    being the JSON object of a Google service-account key file (or its text). Returns the
    credential to seal: the key's known fields only."""
    if credential is None:
        raise BadRequestError("A gcs storage profile needs a storage-credential")
    if not isinstance(credential, dict):
        raise BadRequestError("storage-credential must be an object")
    if credential.get("type") != "gcs":
        raise BadRequestError("storage-credential.type must be 'gcs' for a gcs storage profile")
    kind = credential.get("credential-type")
    if kind != "service-account-key":
        raise BadRequestError(
            "storage-credential.credential-type must be 'service-account-key' (icelog does not "
            "use the server's own GCP identity)"
        )
    refuse_unknown_fields(credential, {"type", "credential-type", "key"}, "storage-credential")
    key = parse_key(credential.get("key"))
    checked: dict[str, str] = {}
    for name in _KEY_FIELDS:
        value = _key_text(key, name, required=name in _KEY_REQUIRED)
        if value is not None:
            checked[name] = value
    if checked["type"] != "service_account":
        raise BadRequestError("storage-credential.key.type must be 'service_account'")
    if not _PROJECT_ID.fullmatch(checked["project_id"]):
        raise BadRequestError("storage-credential.key.project_id is not a GCP project id")
    if not _EMAIL.fullmatch(checked["client_email"]):
        raise BadRequestError("storage-credential.key.client_email is not an e-mail address")
    checked["token_uri"] = http_url_or_default(
        checked.get("token_uri"), "storage-credential.key.token_uri", DEFAULT_TOKEN_URI
    )
    universe = checked.setdefault("universe_domain", GOOGLE_UNIVERSE)
    if universe != GOOGLE_UNIVERSE:
        # Other universes sign their own tokens (no token_uri, no STS): not supported.
        raise BadRequestError(f"storage-credential.key.universe_domain must be '{GOOGLE_UNIVERSE}'")
    check_private_key(checked)
    return {"type": "gcs", "credential-type": "service-account-key", "key": checked}


def parse_key(value: object) -> dict[str, Any]:
    """The key object; its JSON text (a pasted key file) is read too."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise BadRequestError(
                "storage-credential.key must be a service-account key (a JSON object)"
            ) from None
    if not isinstance(value, dict):
        raise BadRequestError(
            "storage-credential.key must be a service-account key (a JSON object)"
        )
    return value


def check_private_key(key: dict[str, str]) -> None:
    """The private key must be one google-auth can sign with (an RSA key in PEM)."""
    try:
        service_account.Credentials.from_service_account_info(key)
    except Exception:  # whatever the parser says may quote the key: one fixed message
        raise BadRequestError(
            "storage-credential.key.private_key is not an RSA private key in PEM form"
        ) from None

"""The management API's models of an `s3` profile and its credential (Lakekeeper's shapes)."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)

from icelog.commands.storage.s3.profile import (
    _ARN,
    _BUCKET,
    _REGION,
    MAX_VALIDITY_S,
    MIN_VALIDITY_S,
)
from icelog.commands.storage.shapes import ProfileBody, StorageBody, documented, optional

_URL = "^$|^https?://[^/?#]"  # an http(s) URL with a host (profile_fields.http_url)


class S3StorageProfile(ProfileBody):
    """An S3 bucket (or a folder of it), Lakekeeper's shape. Stored (and returned) with every
    field present, defaults filled in. At creation and update the server writes, reads, lists
    and deletes a probe object with the credential (and assumes the role once when
    `sts-enabled`); a failing step is a 400. `ICELOG_SKIP_STORAGE_VALIDATION=true` skips the
    probe. Absent, null and (for text) empty fields take their defaults."""

    type: Literal["s3"]
    bucket: StrictStr = documented(
        "3-63 lowercase letters, digits, '.' or '-'; no '..'", pattern=_BUCKET.pattern
    )
    key_prefix: StrictStr | None = optional(
        "Folder of the warehouse in the bucket; outer '/' are dropped and no part may be "
        "empty, '.' or '..'. Default: the whole bucket (stored as \"\")."
    )
    region: StrictStr = documented("e.g. us-east-1", pattern=_REGION.pattern)
    endpoint: StrictStr | None = optional(
        "S3 endpoint (an http(s) URL) for S3-compatible storage", pattern=_URL
    )
    path_style_access: StrictBool | None = optional("Default false")
    flavor: Literal["aws", "s3-compat"] | None = optional("Default aws")
    sts_enabled: StrictBool | None = optional(
        "Vend STS credentials to clients (default false); on AWS it needs `sts-role-arn` or "
        "`assume-role-arn`"
    )
    sts_endpoint: StrictStr | None = optional(
        "STS endpoint (an http(s) URL); default: `endpoint`", pattern=_URL
    )
    assume_role_arn: StrictStr | None = optional("IAM role ARN", pattern=_ARN.pattern)
    sts_role_arn: StrictStr | None = optional("IAM role ARN", pattern=_ARN.pattern)
    sts_token_validity_seconds: StrictInt | None = optional(
        "Default 3600", minimum=MIN_VALIDITY_S, maximum=MAX_VALIDITY_S
    )
    remote_signing_enabled: StrictBool | None = optional(
        "Clients may have S3 requests signed (default true)"
    )
    allow_alternative_protocols: StrictBool | None = optional(
        "Accept s3a:// and s3n:// table locations (default false)"
    )
    base_location: StrictStr | None = optional(
        "`s3://<bucket>[/<key-prefix>]`, set by the server (ignored in requests)", readOnly=True
    )
    credential_id: UUID | None = optional(
        "The sealed credential's id, set by the server (ignored in requests); the credential "
        "itself is never returned",
        readOnly=True,
    )


_KEY_ALIASES = {
    "access-key-id": "aws-access-key-id",
    "secret-access-key": "aws-secret-access-key",
}


def _credential_schema(schema: dict[str, Any]) -> None:
    """Document the `aws-` spellings next to the plain ones (either one of each pair)."""
    properties = schema["properties"]
    for plain, aws in _KEY_ALIASES.items():
        properties[aws] = dict(properties[plain])
    schema["required"] = [name for name in schema["required"] if name not in _KEY_ALIASES]
    schema["allOf"] = [
        {"anyOf": [{"required": [plain]}, {"required": [aws]}]}
        for plain, aws in _KEY_ALIASES.items()
    ]


class S3StorageCredential(StorageBody):
    """An access key. The `aws-` spellings (as the Doris and Fluss guides send them) are
    accepted too; the plain ones win when both are sent."""

    model_config = ConfigDict(json_schema_extra=_credential_schema)

    type: Literal["s3"]
    credential_type: Literal["access-key"] = "access-key"
    access_key_id: StrictStr = Field(
        validation_alias=AliasChoices("access-key-id", "aws-access-key-id"),
        json_schema_extra={"pattern": "\\S"},
    )
    secret_access_key: StrictStr = Field(
        validation_alias=AliasChoices("secret-access-key", "aws-secret-access-key"),
        json_schema_extra={"minLength": 1},
        repr=False,  # never in a log line
    )
    external_id: StrictStr | None = optional("External id for assuming `sts-role-arn`")

    @model_validator(mode="before")
    @classmethod
    def _plain_spelling_wins(cls, data: Any) -> Any:
        if isinstance(data, dict):
            losing = [aws for plain, aws in _KEY_ALIASES.items() if plain in data and aws in data]
            if losing:
                return {key: value for key, value in data.items() if key not in losing}
        return data

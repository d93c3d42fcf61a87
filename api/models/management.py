"""The management API's bodies (`/management/v1`), shaped like Lakekeeper's.

Requests refuse unknown fields and take JSON types strictly (`"true"` is not `true`); they
check shape only. What a value means (names, bucket and region rules, locations, whether
the storage answers) is checked where it always was, in `commands/`, which takes the
validated values as plain dicts (`as_dict`). Answers keep the explicit nulls icelog has
always sent (`Answer`).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal
from uuid import UUID

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)
from typing_extensions import TypeAliasType

from icelog.api.edge import Body, Query
from icelog.commands.storage.s3.profile import (
    _ARN,
    _BUCKET,
    _REGION,
    MAX_VALIDITY_S,
    MIN_VALIDITY_S,
)

Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


def documented(description: str, **schema: Any) -> Any:
    """A required field's description, and JSON-schema keywords that document a rule the
    server checks elsewhere (in `commands/`, with its own messages) without the model
    enforcing it twice."""
    return Field(description=description, json_schema_extra=schema or None)


def optional(description: str, **schema: Any) -> Any:
    """An optional field (default None), documented as `documented` does."""
    return Field(default=None, description=description, json_schema_extra=schema or None)


def as_dict(model: BaseModel | None) -> dict[str, Any] | None:
    """A validated body as the JSON object `commands/` takes (absent and null alike left out)."""
    return None if model is None else model.model_dump(by_alias=True, exclude_none=True)


class Answer(Body):
    """A management answer: a field left unset is absent, one set to None is `null`."""

    leave_out: ClassVar[Literal["none", "unset"]] = "unset"


# -- errors -----------------------------------------------------------------------------------
class ErrorModel(Answer):
    """JSON error payload returned in a response with further details on the error (the
    Iceberg REST `ErrorModel`)."""

    message: str = Field(description="Human-readable error message")
    type: str = Field(
        description="Internal type definition of the error",
        examples=["NoSuchWarehouseException"],
    )
    code: int = Field(ge=400, le=600, description="HTTP response code", examples=[404])
    stack: list[str] | None = None


class ErrorResponse(Answer):
    """Every error: `{"error": {"message", "type", "code"}}`."""

    error: ErrorModel


# -- server -----------------------------------------------------------------------------------
class ServerInfo(Answer):
    version: str
    bootstrapped: bool
    server_id: UUID
    default_project_id: UUID
    authz_backend: Literal["allow-all", "grants"] = documented(
        "`allow-all` without an identity provider; `grants`: icelog's in-process authorizer"
    )
    aws_system_identities_enabled: bool
    azure_system_identities_enabled: bool
    gcp_system_identities_enabled: bool
    queues: list[str]
    backend: str = documented("The event store's database", enum=["sqlite", "postgres"])


class BootstrapRequest(Body):
    accept_terms_of_use: StrictBool = documented("Must be true", const=True)
    is_operator: StrictBool = False
    # Lakekeeper's: who bootstraps. Accepted; unused until icelog authenticates.
    user_name: StrictStr | None = None
    user_email: StrictStr | None = None
    user_type: Literal["human", "application"] | None = None


# -- projects ---------------------------------------------------------------------------------
NAME_RULES = {"minLength": 1, "maxLength": 128, "pattern": "^[^/]*$"}


class CreateProjectRequest(Body):
    project_name: StrictStr = documented("Name of the project", **NAME_RULES)
    project_id: UUID | None = Field(
        default=None, description="Request a specific project id (default: a new one)"
    )


class CreateProjectResponse(Answer):
    project_id: UUID


class GetProjectResponse(Answer):
    project_id: UUID
    project_name: str


class ListProjectsResponse(Answer):
    projects: list[GetProjectResponse]


class RenameProjectRequest(Body):
    new_name: StrictStr = documented("The new name", **NAME_RULES)


class RenameWarehouseRequest(Body):
    new_name: StrictStr = documented("The new name", **NAME_RULES)


# -- storage ----------------------------------------------------------------------------------
_URL = "^$|^https?://[^/?#]"  # an http(s) URL with a host (commands/storage/s3_profile._url)


class FileStorageProfile(Body):
    type: Literal["file"]
    base_location: StrictStr = documented(
        "A `file:///<absolute directory>` URI (or an absolute path); the server must be able "
        "to write there."
    )


class S3StorageProfile(Body):
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


StorageProfile = TypeAliasType(
    "StorageProfile",
    Annotated[FileStorageProfile | S3StorageProfile, Field(discriminator="type")],
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


class S3StorageCredential(Body):
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


# One kind today; Lakekeeper's other kinds (system identity, R2, ...) would join here.
StorageCredential = TypeAliasType(
    "StorageCredential",
    Annotated[
        S3StorageCredential,
        Field(
            discriminator="type",
            description="A secret for the storage: encrypted at rest outside the event log, "
            "never part of a response.",
            json_schema_extra={"writeOnly": True},
        ),
    ],
)


class HardDeleteProfile(Body):
    type: Literal["hard"]


class SoftDeleteProfile(Body):
    type: Literal["soft"]
    expiration_seconds: Annotated[StrictInt, Field(ge=0)]


DeleteProfile = TypeAliasType(
    "DeleteProfile",
    Annotated[HardDeleteProfile | SoftDeleteProfile, Field(discriminator="type")],
)


# -- warehouses -------------------------------------------------------------------------------
class CreateWarehouseRequest(Body):
    warehouse_name: StrictStr = documented("Unique in its project", **NAME_RULES)
    project_id: UUID | None = Field(
        default=None, description="Default: `x-project-id`, else the nil UUID."
    )
    storage_profile: StorageProfile
    storage_credential: StorageCredential | None = Field(
        default=None,
        description="Required for an s3 profile; a file profile takes none (absent or null).",
    )
    delete_profile: DeleteProfile | None = Field(default=None, description="Default: hard")


class CreateWarehouseResponse(Answer):
    warehouse_id: UUID


class GetWarehouseResponse(Answer):
    id: UUID
    warehouse_id: UUID
    project_id: UUID
    name: str
    storage_profile: StorageProfile
    delete_profile: DeleteProfile
    status: Literal["active", "inactive"]
    protected: bool


class ListWarehousesResponse(Answer):
    warehouses: list[GetWarehouseResponse]


class UpdateWarehouseStorageRequest(Body):
    """New settings for the same storage: the type and the base location cannot change.
    Without `storage-credential` an s3 warehouse keeps its credential; a file warehouse takes
    none."""

    storage_profile: StorageProfile
    storage_credential: StorageCredential | None = None


class UpdateWarehouseCredentialRequest(Body):
    """An s3 warehouse needs `new-storage-credential`; for a file warehouse it must be absent
    or null (nothing changes)."""

    new_storage_credential: StorageCredential | None = None


class UpdateWarehouseDeleteProfileRequest(Body):
    delete_profile: DeleteProfile


# -- protection -------------------------------------------------------------------------------
class SetProtectionRequest(Body):
    protected: StrictBool


class ProtectionResponse(Answer):
    protected: bool
    updated_at: Timestamp


# -- query parameters -------------------------------------------------------------------------
class Filters(Query):
    """Query parameters where an empty value is no value (`?namespace=` filters nothing)."""

    @model_validator(mode="before")
    @classmethod
    def _empty_is_absent(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value != ""}
        return data


def _flag(value: Any) -> Any:
    """`true` / `false` in any case (a query parameter)."""
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError("must be true or false")


Flag = Annotated[bool, BeforeValidator(_flag)]


class DropNamespaceQuery(Filters):
    recursive: Flag = Field(default=False, description="Drop everything inside first")
    purge: Flag = Field(default=False, description="Purge the tables' files (with recursive)")

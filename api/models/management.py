"""The management API's bodies (`/management/v1`), shaped like Lakekeeper's.

Requests refuse unknown fields and take JSON types strictly (`"true"` is not `true`); they
check shape only. What a value means (names, bucket and region rules, locations, whether
the storage answers) is checked where it always was, in `commands/`, which takes the
validated values as plain dicts (`as_dict`). Answers keep the explicit nulls icelog has
always sent (`Answer`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Union
from uuid import UUID

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)
from typing_extensions import TypeAliasType

from icelog.api.edge import Body, Query
from icelog.commands.storage import KINDS

# Re-exported: the S3 models were defined here before each kind had a folder, and tests
# import them from here.
from icelog.commands.storage.s3.models import S3StorageCredential as S3StorageCredential  # noqa: PLC0414
from icelog.commands.storage.s3.models import S3StorageProfile as S3StorageProfile  # noqa: PLC0414

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
# Each storage kind's profile and credential models live in its folder (commands/storage/
# <kind>/models.py); the unions are built from the registered kinds, so a kind adds its
# models by being registered.
def _union(models: list[type[BaseModel]]) -> Any:
    return Union[tuple(models)]  # noqa: UP007 - its members are only known here


_CREDENTIALED = [kind for kind in KINDS if kind.credential_model is not None]
_WITHOUT = [kind.name for kind in KINDS if kind.credential_model is None]

if TYPE_CHECKING:  # the unions are built at import time; to a type checker, any model
    StorageProfile = BaseModel
    StorageCredential = BaseModel
else:
    StorageProfile = TypeAliasType(
        "StorageProfile",
        Annotated[
            _union([kind.profile_model for kind in KINDS]),
            Field(discriminator="type"),
        ],
    )
    StorageCredential = TypeAliasType(
        "StorageCredential",
        Annotated[
            _union([kind.credential_model for kind in _CREDENTIALED]),
            Field(
                discriminator="type",
                description="A secret for the storage: encrypted at rest outside the event "
                "log, never part of a response.",
                json_schema_extra={"writeOnly": True},
            ),
        ],
    )
_CREDENTIAL_RULE = (
    f"Required for {', '.join(kind.name for kind in _CREDENTIALED)} profiles; "
    f"{', '.join(_WITHOUT) or 'no'} profiles take none (absent or null)."
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
    storage_credential: StorageCredential | None = Field(default=None, description=_CREDENTIAL_RULE)
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
    Without `storage-credential` a warehouse keeps its credential, unless the change points
    it at another store (an s3 endpoint, bucket, region or STS endpoint); a file warehouse
    takes none."""

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

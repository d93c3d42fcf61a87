"""Roles and permission assignments (`/management/v1/role`, `/management/v1/permissions`),
shaped like Lakekeeper's."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from pydantic import Field, StrictStr, model_validator

from icelog.api.edge import Body, Query
from icelog.api.models.management import Answer, Timestamp

Relation = Annotated[StrictStr, Field(min_length=1, max_length=64, pattern=r"^[a-z_]+$")]
UserId = Annotated[StrictStr, Field(min_length=1, max_length=300)]


class Assignment(Body):
    """One grant: a relation (`type`) for a user or a role (exactly one of them)."""

    type: Relation = Field(description="The relation, e.g. `select`, `ownership`")
    user: UserId | None = Field(default=None, description="`oidc~<subject>`")
    role: UUID | None = Field(default=None, description="A role's id")

    @model_validator(mode="after")
    def _one_principal(self) -> Assignment:
        if (self.user is None) == (self.role is None):
            raise ValueError("exactly one of user and role must be set")
        return self


class AssignmentAnswer(Answer):
    type: str
    user: str | None = None
    role: UUID | None = None


class GetAssignmentsResponse(Answer):
    assignments: list[AssignmentAnswer]
    as_of_position: int | None = Field(
        default=None, description="With `as-of`: the log position the answer is as of"
    )


class UpdateAssignmentsRequest(Body):
    writes: list[Assignment] = Field(default_factory=list, max_length=100)
    deletes: list[Assignment] = Field(default_factory=list, max_length=100)


AS_OF = (
    "A log position or an RFC 3339 time: the answer as the grants were then (who could do "
    "what on 1 March); the object must still exist"
)
AsOf = Annotated[StrictStr, Field(min_length=1, max_length=64)]


class AssignmentsQuery(Query):
    relations: list[Relation] | None = Field(
        default=None, description="Only these relations (repeat the parameter)"
    )
    as_of: AsOf | None = Field(default=None, alias="as-of", description=AS_OF)


class AccessQuery(Query):
    principal_user: UserId | None = Field(default=None, alias="principalUser")
    principal_role: UUID | None = Field(default=None, alias="principalRole")
    as_of: AsOf | None = Field(default=None, alias="as-of", description=AS_OF)


class GetAccessResponse(Answer):
    allowed_actions: list[str]
    as_of_position: int | None = Field(
        default=None, description="With `as-of`: the log position the answer is as of"
    )


class CheckObject(Body):
    """The object of a check, by id (`project-id` absent: the caller's project)."""

    action: Relation
    project_id: UUID | None = None
    warehouse_id: UUID | None = None
    namespace_id: UUID | None = None
    table_id: UUID | None = None
    view_id: UUID | None = None
    role_id: UUID | None = None


class CheckOperation(Body):
    server: CheckObject | None = None
    project: CheckObject | None = None
    warehouse: CheckObject | None = None
    namespace: CheckObject | None = None
    table: CheckObject | None = None
    view: CheckObject | None = None
    role: CheckObject | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> CheckOperation:
        given = [k for k, v in self.__dict__.items() if v is not None]
        if len(given) != 1:
            raise ValueError("name exactly one object kind")
        return self


class CheckIdentity(Body):
    user: UserId | None = None
    role: UUID | None = None


class CheckRequest(Body):
    identity: CheckIdentity | None = None
    operation: CheckOperation


class CheckResponse(Answer):
    allowed: bool


# -- roles --------------------------------------------------------------------------------------
RoleName = Annotated[StrictStr, Field(min_length=1, max_length=128)]


class CreateRoleRequest(Body):
    name: RoleName
    description: Annotated[StrictStr, Field(max_length=1024)] | None = None
    project_id: UUID | None = Field(default=None, description="Default: `x-project-id`")


class UpdateRoleRequest(Body):
    name: RoleName
    description: Annotated[StrictStr, Field(max_length=1024)] | None = None


class RoleAnswer(Answer):
    id: UUID
    project_id: UUID
    name: str
    description: str | None = None
    created_at: Timestamp
    updated_at: Timestamp | None = None


class ListRolesResponse(Answer):
    roles: list[RoleAnswer]
    next_page_token: str | None = None


class ListRolesQuery(Query):
    name: Annotated[StrictStr, Field(max_length=128)] | None = None
    page_token: StrictStr | None = Field(default=None, alias="pageToken")
    page_size: Annotated[int, Field(ge=1, le=1000)] = Field(default=100, alias="pageSize")


class NamespaceIdQuery(Query):
    namespace: Annotated[StrictStr, Field(min_length=1)] = Field(
        description="The namespace's levels separated by 0x1F (`%1F`), as in the catalog API"
    )


class NamespaceIdResponse(Answer):
    namespace_id: UUID

"""Users (`/management/v1/user`, `/whoami`), shaped like Lakekeeper's."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictStr

from icelog.api.edge import Body, Query
from icelog.api.models.management import Answer, Timestamp

UserType = Literal["human", "application"]
UserId = Annotated[StrictStr, Field(min_length=1, max_length=300, pattern=r"^[a-z0-9_-]+~\S+$")]
Text = Annotated[StrictStr, Field(min_length=1, max_length=512)]


class User(Answer):
    id: str = Field(description="`oidc~<subject>`")
    name: str
    email: str | None = None
    user_type: UserType
    last_updated_with: Literal[
        "create-endpoint", "config-call-creation", "update-endpoint", "role-provider"
    ] = Field(description="How the user was last provisioned or updated")
    created_at: Timestamp
    updated_at: Timestamp | None = None


class ListUsersResponse(Answer):
    users: list[User]
    next_page_token: str | None = None


class CreateUserRequest(Body):
    """Without `id`: the caller provisions themself from their token. With `id`: a user of
    the identity provider is recorded before their first call."""

    id: UserId | None = None
    name: Text | None = None
    email: Text | None = None
    user_type: UserType | None = None
    update_if_exists: StrictBool = False


class UpdateUserRequest(Body):
    name: Text
    email: Text | None = None
    user_type: UserType


class ListUsersQuery(Query):
    name: Annotated[StrictStr, Field(max_length=512)] | None = Field(
        default=None, description="Part of the name or e-mail, any case"
    )
    page_token: StrictStr | None = Field(default=None, alias="pageToken")
    page_size: Annotated[int, Field(ge=1, le=1000)] = Field(default=100, alias="pageSize")

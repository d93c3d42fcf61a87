"""Users: who am I, list, get, provision, update, delete (Lakekeeper's routes)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from icelog.api.auth.authorizer import SERVER
from icelog.api.auth.guards import may, require
from icelog.api.auth.management_guards import project_of
from icelog.api.auth.principal import Principal
from icelog.api.http import context, path_param
from icelog.api.models.users import (
    CreateUserRequest,
    ListUsersQuery,
    ListUsersResponse,
    UpdateUserRequest,
    User,
)
from icelog.api.routes import services
from icelog.commands.users import BY_CALL, BY_CREATE_ENDPOINT, BY_UPDATE_ENDPOINT, UserFacts
from icelog.domain.errors import BadRequestError, ForbiddenError, NoSuchUserError
from icelog.projections.queries import decode_token, encode_token


def _principal(request: Request) -> Principal | None:
    found = getattr(request.state, "principal", None)
    return found if isinstance(found, Principal) else None


def _user(request: Request, user_id: str) -> User:
    row = services(request).primary.user(user_id)
    if row is None:
        raise NoSuchUserError(f"User does not exist: {user_id}")
    return User.model_validate(row)


def whoami(request: Request) -> User:
    principal = _principal(request)
    if principal is None:
        raise NoSuchUserError(
            "The caller is anonymous: authentication is off (ICELOG_OPENID_PROVIDER_URI)"
        )
    return _user(request, principal.user_id)


def _may_read_directory(request: Request) -> None:
    """Users, their names and e-mails are the server admin's to read (`list_users`), and
    the grant-givers' of a project (`read_assignments` there, i.e. its security and project
    admins), who must find whom to grant to; nobody else's."""
    if not request.app.state.authorizer.enabled:
        return
    if may(request, SERVER, "list_users") or may(request, project_of(request), "read_assignments"):
        return
    raise ForbiddenError(
        "Not allowed to list_users: the server's admin, or a project's security admin, may"
    )


def list_users(request: Request, query: ListUsersQuery) -> ListUsersResponse:
    _may_read_directory(request)
    after = _after(query.page_token) if query.page_token else None
    rows = services(request).queries.users(
        name=query.name, ids=None, after=after, limit=query.page_size + 1
    )
    token = None
    if len(rows) > query.page_size:
        rows = rows[: query.page_size]
        token = encode_token(orjson.dumps([rows[-1]["name"], rows[-1]["id"]]).decode())
    return ListUsersResponse(users=[User.model_validate(r) for r in rows], next_page_token=token)


def _after(token: str) -> tuple[str, str]:
    try:
        found: Any = orjson.loads(decode_token(token))
    except orjson.JSONDecodeError:
        found = None
    if not (isinstance(found, list) and len(found) == 2 and all(isinstance(v, str) for v in found)):
        raise BadRequestError(f"Invalid pageToken: {token!r}")
    return found[0], found[1]


def get_user(request: Request) -> User:
    """A user reads themself; anyone else needs the directory's right."""
    user_id = path_param(request, "user_id")
    principal = _principal(request)
    if principal is None or principal.user_id != user_id:
        _may_read_directory(request)
    return _user(request, user_id)


def create_user(request: Request, body: CreateUserRequest) -> User:
    """Without an id, the caller from their token; with one, any user (name required).
    Only the server admin records a user other than as their token names them: someone
    else, or the caller under another name, e-mail or type."""
    principal = _principal(request)
    if body.id is None:
        if principal is None:
            raise BadRequestError("id is required when the caller is anonymous (no token)")
        facts = UserFacts(
            principal.user_id,
            body.name or principal.name,
            body.email if body.email is not None else principal.email,
            body.user_type or principal.user_type,
        )
        how = BY_CALL
    else:
        if body.name is None:
            raise BadRequestError("name is required with an id")
        facts = UserFacts(body.id, body.name, body.email, body.user_type or "human")
        how = BY_CREATE_ENDPOINT
    as_token_says = principal is not None and facts == UserFacts(
        principal.user_id, principal.name, principal.email, principal.user_type
    )
    if not as_token_says and request.app.state.authorizer.enabled:
        # Lakekeeper: provision_users, the server admin's.
        require(request, SERVER, "provision_users")
    svc = services(request)
    exists = svc.primary.user(facts.user_id) is not None
    if not exists or body.update_if_exists:
        svc.catalog.access.provision_user(context(request), facts, how=how)
    return _user(request, facts.user_id)


def update_user(request: Request, body: UpdateUserRequest) -> None:
    user_id = path_param(request, "user_id")
    _user(request, user_id)
    facts = UserFacts(user_id, body.name, body.email, body.user_type)
    services(request).catalog.access.provision_user(context(request), facts, how=BY_UPDATE_ENDPOINT)


def delete_user(request: Request) -> None:
    user_id = path_param(request, "user_id")
    services(request).catalog.access.delete_user(context(request), user_id)
    request.app.state.known_users.forget(user_id)

"""User commands: provisioning on a first authenticated call, update, delete."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from icelog.commands.base import CatalogBase
from icelog.domain.context import RequestContext
from icelog.domain.errors import ConflictError, NoSuchUserError
from icelog.domain.grants import Grant
from icelog.domain.identifiers import SERVER_ID, user_aggregate_id
from icelog.domain.permissions import ObjectRef
from icelog.domain.user import User

# Lakekeeper's `last-updated-with` values.
BY_CALL = "config-call-creation"
BY_CREATE_ENDPOINT = "create-endpoint"
BY_UPDATE_ENDPOINT = "update-endpoint"


@dataclass(frozen=True)
class UserFacts:
    """What a token (or the create endpoint) says about a user."""

    user_id: str
    name: str
    email: str | None
    user_type: str


class UserCommands(CatalogBase):
    # The grants on an object as the read model holds them now (relation, principal kind,
    # principal id), on the primary; handed in by the composition root because commands/
    # cannot import projections/. The grants stream of an object remembers every grant
    # its events made, but the read model ends them with the object (a dropped namespace
    # and the next one of its name share the stream): what is held is the read model's.
    grants_now: Callable[[ObjectRef], set[Grant]] = staticmethod(lambda _obj: set())

    def get_user(self, user_id: str) -> User:
        user = self.get_or_none(user_aggregate_id(user_id), User)
        if user is None or user.deleted:
            raise NoSuchUserError(f"User does not exist: {user_id}")
        return user

    def provision_user(self, ctx: RequestContext, facts: UserFacts, *, how: str) -> bool:
        """Record the user (or their new name, e-mail, type); False when nothing changed.
        Two first calls at once append the same stream version: the loser finds the user."""
        user = self.get_or_none(user_aggregate_id(facts.user_id), User)
        if user is None:
            user = User.provision(
                user_id=facts.user_id, name=facts.name, email=facts.email,
                user_type=facts.user_type, how=how, actor=ctx.actor, request_id=ctx.request_id,
            )  # fmt: skip
        else:
            user.update(
                name=facts.name, email=facts.email, user_type=facts.user_type, how=how,
                actor=ctx.actor, request_id=ctx.request_id,
            )  # fmt: skip
        if not user.pending_events:
            return False
        try:
            self.save_all(user)
        except Exception:
            if self.get_or_none(user_aggregate_id(facts.user_id), User) is not None:
                return False
            raise
        return True

    def delete_user(self, ctx: RequestContext, user_id: str) -> None:
        user = self.get_user(user_id)
        self._keep_a_server_admin(user_id)
        user.delete(actor=ctx.actor, request_id=ctx.request_id)
        self.save_all(user)

    def _keep_a_server_admin(self, user_id: str) -> None:
        """A deleted user's grants end with them; the server's last admin would leave it
        with none, for good (bootstrap stays closed once used), so that delete is refused."""
        held = self.grants_now(ObjectRef("server", str(SERVER_ID)))
        admins = {p for relation, kind, p in held if kind == "user" and relation in _ADMINS}
        if admins == {user_id}:
            raise ConflictError(
                f"User {user_id} is the server's last admin: grant admin to another user first"
            )


_ADMINS = ("admin", "operator")

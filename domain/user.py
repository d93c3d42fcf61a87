"""Users: principals of an identity provider, provisioned on their first authenticated call
(Lakekeeper's model; ids `oidc~<subject>`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from eventsourcing.domain import Aggregate

from icelog.domain.attributed import AttributedEvent, fixed
from icelog.domain.identifiers import user_aggregate_id

USER_TYPES = ("human", "application")


class _UserEvent(AttributedEvent):
    user_id: str  # on every event: a consumer needs no earlier one to know whose


class _Profile(_UserEvent):
    """Who the user is, as last seen; `how` it was learnt."""

    name: str
    email: str | None
    user_type: str
    how: str

    COPIES: ClassVar[tuple[str, ...]] = ("name", "email", "user_type")
    SETS = fixed(deleted=False)


class User(Aggregate):
    """A user. Its stream id derives from the user id, so provisioning is idempotent."""

    TOPIC = "icelog.user"

    class Event(_UserEvent):
        TOPIC = "icelog.user.event.v1"

    class Provisioned(Event, _Profile, Aggregate.Created):
        """A user of an identity provider was recorded: by their first authenticated call (`how`:
        `config-call-creation`, actor the user) or by `POST /management/v1/user`
        (`create-endpoint`).

        Data fields:
            user-id: `oidc~<subject>`: the provider's subject (`oid`, `sub`, or
                ICELOG_OPENID_SUBJECT_CLAIM).
            name: Display name from the token (`name`, given and family name, ...).
            email: E-mail from the token (`email`, or `upn` / `preferred_username` with an @).
            user-type: `human` or `application`.
            how: Lakekeeper's `last-updated-with`: `config-call-creation` or `create-endpoint`.
        """

        TOPIC = "icelog.user.provisioned.v1"

        COPIES = ("user_id", *_Profile.COPIES)

    class Updated(Event, _Profile):
        """A user's name, e-mail or type changed: a later token said otherwise
        (`config-call-creation`), or `PUT /management/v1/user/{id}` (`update-endpoint`). Also brings
        back a deleted user.

        Data fields:
            user-id: `oidc~<subject>`.
            name: The new display name.
            email: The new e-mail (null: none).
            user-type: `human` or `application`.
            how: `config-call-creation` or `update-endpoint`.
        """

        TOPIC = "icelog.user.updated.v1"

    class Deleted(Event):
        """`DELETE /management/v1/user/{id}`; the user's next authenticated call provisions them
        again.

        Data fields:
            user-id: `oidc~<subject>`.
        """

        TOPIC = "icelog.user.deleted.v1"

        SETS = fixed(deleted=True)

    # State is set by the events' apply(); declared for type checkers only, because
    # class annotations would make the library generate an __init__ from them.
    if TYPE_CHECKING:
        user_id: str
        name: str
        email: str | None
        user_type: str
        deleted: bool

    @classmethod
    def provision(cls, *, user_id: str, **profile: Any) -> User:
        """Record a user; `profile` as on `Provisioned`."""
        return cls._create(
            cls.Provisioned, id=user_aggregate_id(user_id), user_id=user_id, **profile
        )

    def update(
        self,
        *,
        name: str,
        email: str | None,
        user_type: str,
        how: str,
        actor: str,
        request_id: str,
    ) -> None:
        if (name, email, user_type) == (self.name, self.email, self.user_type) and not self.deleted:
            return
        self.trigger_event(
            self.Updated, name=name, email=email, user_type=user_type, how=how, actor=actor,
            request_id=request_id, user_id=self.user_id,
        )  # fmt: skip

    def delete(self, *, actor: str, request_id: str) -> None:
        if not self.deleted:
            self.trigger_event(
                self.Deleted, actor=actor, request_id=request_id, user_id=self.user_id
            )

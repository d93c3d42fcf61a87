"""Access: users, grants, roles and the first admin (docs/auth.md)."""

from __future__ import annotations

from uuid import UUID, uuid4, uuid5

from eventsourcing.domain import Aggregate

from icelog.commands.application import CatalogApplication
from icelog.commands.ports import ReadPorts
from icelog.commands.users import UserFacts
from icelog.domain.claims import NameClaim, claim
from icelog.domain.context import RequestContext
from icelog.domain.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    NoSuchProjectError,
    NoSuchRoleError,
    NoSuchUserError,
    NotFoundError,
)
from icelog.domain.grants import Grants, grants_id
from icelog.domain.identifiers import ICELOG_NAMESPACE, NIL_UUID, SERVER_ID, user_aggregate_id
from icelog.domain.namespace import Namespace
from icelog.domain.permissions import ObjectRef, PrincipalRef
from icelog.domain.project import Project
from icelog.domain.role import Role
from icelog.domain.table import Table
from icelog.domain.user import User
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse

Change = list[tuple[str, PrincipalRef]]
SERVER_OBJECT = ObjectRef("server", str(SERVER_ID))


class AlreadyBootstrappedError(BadRequestError):
    error_type = "CatalogAlreadyBootstrapped"


def role_claim_id(project_id: UUID, name: str) -> UUID:
    """Role names are unique per project."""
    return uuid5(ICELOG_NAMESPACE, f"role:{project_id}:{name}")


class AccessCommands:
    """Who may do what: users, the grants on objects, roles."""

    def __init__(self, app: CatalogApplication, ports: ReadPorts) -> None:
        self.app = app
        self.ports = ports

    # -- users -------------------------------------------------------------------------------
    def get_user(self, user_id: str) -> User:
        user = self.app.get_or_none(user_aggregate_id(user_id), User)
        if user is None or user.deleted:
            raise NoSuchUserError(f"User does not exist: {user_id}")
        return user

    def provision_user(self, ctx: RequestContext, facts: UserFacts, *, how: str) -> bool:
        """Record the user (or their new name, e-mail, type); False when nothing changed.
        Two first calls at once append the same stream version: the loser finds the user."""
        user = self.app.get_or_none(user_aggregate_id(facts.user_id), User)
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
            self.app.save_all(user)
        except Exception:
            if self.app.get_or_none(user_aggregate_id(facts.user_id), User) is not None:
                return False
            raise
        return True

    def delete_user(self, ctx: RequestContext, user_id: str) -> None:
        user = self.get_user(user_id)
        self._keep_a_server_admin(user_id)
        user.delete(actor=ctx.actor, request_id=ctx.request_id)
        self.app.save_all(user)

    def _keep_a_server_admin(self, user_id: str) -> None:
        """A deleted user's grants end with them; the server's last admin would leave it
        with none, for good (bootstrap stays closed once used), so that delete is refused."""
        held = self.ports.grants_now(ObjectRef("server", str(SERVER_ID)))
        admins = {p for relation, kind, p in held if kind == "user" and relation in _ADMINS}
        if admins == {user_id}:
            raise ConflictError(
                f"User {user_id} is the server's last admin: grant admin to another user first"
            )

    # -- grants ------------------------------------------------------------------------------
    def change_grants(
        self, ctx: RequestContext, obj: ObjectRef, *, writes: Change, deletes: Change
    ) -> int:
        """Apply one assignments request on one object; the number of grant events. 404
        when the object does not exist (or no longer does: the append checks it again)."""

        def attempt() -> int:
            self._require_object(obj)
            for _, who in writes:
                if who.kind == "role":
                    self._require_object(ObjectRef("role", who.id))
            grants = self.app.get_or_none(grants_id(obj), Grants)
            if grants is None:
                grants = Grants.start(obj, actor=ctx.actor, request_id=ctx.request_id)
            try:
                grants.change(
                    obj, writes=writes, deletes=deletes, actor=ctx.actor,
                    request_id=ctx.request_id, held_now=self.ports.grants_now(obj),
                )  # fmt: skip
            except ValueError as exc:
                raise BadRequestError(str(exc)) from None
            changed = sum(
                isinstance(e, (Grants.Granted, Grants.Revoked)) for e in grants.pending_events
            )
            if changed:
                self.app.save_all(grants)
            return changed

        return self.app.retrying(attempt)

    def _require_object(self, obj: ObjectRef) -> None:
        """NotFoundError unless `obj` exists now (a soft-dropped table or view still does)."""
        found: Aggregate | None
        if obj.kind == "server":
            return
        try:
            oid = UUID(obj.id)
        except ValueError:
            raise NotFoundError(f"{obj.kind.capitalize()} does not exist: {obj.id}") from None
        kinds: dict[str, type[Aggregate]] = {
            "project": Project, "warehouse": Warehouse, "namespace": Namespace,
            "table": Table, "view": View, "role": Role,
        }  # fmt: skip
        found = self.app.get_or_none(oid, kinds[obj.kind])
        if found is not None and _exists(found):
            return
        if obj.kind == "project":
            raise NoSuchProjectError(f"Project does not exist: {obj.id}")
        if obj.kind == "role":
            raise NoSuchRoleError(f"Role does not exist: {obj.id}")
        raise NotFoundError(f"{obj.kind.capitalize()} does not exist: {obj.id}")

    def grant_first_admin(self, ctx: RequestContext, *, is_operator: bool) -> None:
        """Bootstrap with authentication: the first caller becomes the server's admin (and
        operator if asked) and project_admin of the default project; once."""

        def attempt() -> None:
            server = self.app.get_or_none(grants_id(SERVER_OBJECT), Grants)
            if server is not None and any(r in ("admin", "operator") for r, _, _ in server.held):
                raise AlreadyBootstrappedError("Catalog already bootstrapped")
            if server is None:
                server = Grants.start(SERVER_OBJECT, actor=ctx.actor, request_id=ctx.request_id)
            me = PrincipalRef("user", ctx.actor)
            relations = ["admin", "operator"] if is_operator else ["admin"]
            server.change(
                SERVER_OBJECT, writes=[(r, me) for r in relations], deletes=[],
                actor=ctx.actor, request_id=ctx.request_id,
            )  # fmt: skip
            default = ObjectRef("project", str(NIL_UUID))
            project = self.app.get_or_none(grants_id(default), Grants)
            if project is None:
                project = Grants.start(default, actor=ctx.actor, request_id=ctx.request_id)
            project.change(
                default, writes=[("project_admin", me)], deletes=[], actor=ctx.actor,
                request_id=ctx.request_id,
            )  # fmt: skip
            self.app.save_all(server, project)

        self.app.retrying(attempt)

    # -- roles -------------------------------------------------------------------------------
    def get_role(self, role_id: UUID) -> Role:
        role = self.app.get_or_none(role_id, Role)
        if role is None or role.deleted:
            raise NoSuchRoleError(f"Role does not exist: {role_id}")
        return role

    def create_role(
        self, ctx: RequestContext, project_id: UUID, name: str, description: str | None
    ) -> UUID:
        project = self.app.get_or_none(project_id, Project)
        if project is None or project.deleted:
            raise NoSuchProjectError(f"Project does not exist: {project_id}")
        role_id = uuid4()

        def attempt() -> UUID:
            name_claim = self._claim_role_name(ctx, project_id, name, role_id)
            role = Role.create(
                role_id=role_id, project_id=project_id, name=name, description=description,
                actor=ctx.actor, request_id=ctx.request_id,
            )  # fmt: skip
            self.app.save_all(name_claim, role)
            return role_id

        return self.app.retrying(attempt)

    def update_role(
        self, ctx: RequestContext, role_id: UUID, name: str, description: str | None
    ) -> None:
        def attempt() -> None:
            role = self.get_role(role_id)
            claims: list[NameClaim | None] = []
            if name != role.name:
                claims.append(self._claim_role_name(ctx, role.project_id, name, role_id))
                old = self.app.get_or_none(role_claim_id(role.project_id, role.name), NameClaim)
                if old is not None:
                    old.release(actor=ctx.actor, request_id=ctx.request_id)
                claims.append(old)
            role.update(name=name, description=description, actor=ctx.actor,
                        request_id=ctx.request_id)  # fmt: skip
            self.app.save_all(*claims, role)

        self.app.retrying(attempt)

    def delete_role(self, ctx: RequestContext, role_id: UUID) -> None:
        def attempt() -> None:
            role = self.get_role(role_id)
            old = self.app.get_or_none(role_claim_id(role.project_id, role.name), NameClaim)
            if old is not None:
                old.release(actor=ctx.actor, request_id=ctx.request_id)
            role.delete(actor=ctx.actor, request_id=ctx.request_id)
            self.app.save_all(old, role)

        self.app.retrying(attempt)

    def _claim_role_name(
        self, ctx: RequestContext, project_id: UUID, name: str, role_id: UUID
    ) -> NameClaim:
        claim_id = role_claim_id(project_id, name)
        existing = self.app.get_or_none(claim_id, NameClaim)
        if existing is not None and existing.is_held:
            raise AlreadyExistsError(f"Role already exists: {name}")
        return claim(
            existing, claim_id=claim_id, kind="role", holder_id=role_id,
            name=f"{project_id}/{name}", actor=ctx.actor, request_id=ctx.request_id,
        )  # fmt: skip


_ADMINS = ("admin", "operator")


def _exists(aggregate: Aggregate) -> bool:
    if isinstance(aggregate, (Table, View)):
        return not aggregate.dropped or bool(getattr(aggregate, "soft_deleted", False))
    return not (getattr(aggregate, "deleted", False) or getattr(aggregate, "dropped", False))

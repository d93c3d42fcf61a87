"""Server, project and warehouse commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID, uuid4

from icelog.commands.application import CatalogApplication
from icelog.commands.lookups import get_project, get_warehouse
from icelog.commands.ports import ReadPorts
from icelog.commands.storage import (
    StoragePolicy,
    check_storage_access,
    credential_for,
    kind_for,
    storage_root,
    validate_storage_profile,
)
from icelog.domain.claims import NameClaim, claim
from icelog.domain.context import SYSTEM, RequestContext
from icelog.domain.errors import (
    AlreadyExistsError,
    BadRequestError,
    NotEmptyError,
    ServiceUnavailableError,
)
from icelog.domain.identifiers import SERVER_ID, reject_control_characters, warehouse_claim_id
from icelog.domain.project import Project
from icelog.domain.protection import ensure_unprotected
from icelog.domain.server import Server
from icelog.domain.storage_roots import STORAGE_ROOTS_ID, StorageRoots
from icelog.domain.warehouse import Warehouse

R = TypeVar("R")
# How long a replaced or deleted warehouse's credential stays readable: far longer than
# any replica keeps a storage profile cached (commands/application.py STORAGE_PROFILE_TTL_S).
CREDENTIAL_GRACE_S = 60.0
HARD_DELETE: dict[str, Any] = {"type": "hard"}


def validate_delete_profile(profile: object) -> dict[str, Any]:
    """Lakekeeper's delete profile: hard, or soft with an expiration delay in seconds."""
    if profile is None:
        return dict(HARD_DELETE)
    if not isinstance(profile, dict) or profile.get("type") not in ("hard", "soft"):
        raise BadRequestError("delete-profile must be {'type': 'hard'} or {'type': 'soft', ...}")
    if profile["type"] == "hard":
        return dict(HARD_DELETE)
    seconds = profile.get("expiration-seconds")
    if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 0:
        raise BadRequestError("delete-profile.expiration-seconds must be a non-negative integer")
    return {"type": "soft", "expiration-seconds": seconds}


def validate_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise BadRequestError(f"{what} must be a non-empty string")
    reject_control_characters(name, what)
    if "/" in name or len(name) > 128:
        raise BadRequestError(f"{what} must not contain '/' and be at most 128 characters")
    return name


def _warehouse_claim(
    existing: NameClaim | None,
    claim_id: UUID,
    warehouse_id: UUID,
    readable: str,
    ctx: RequestContext,
) -> NameClaim:
    return claim(
        existing,
        claim_id=claim_id,
        kind="warehouse",
        holder_id=warehouse_id,
        name=readable,
        actor=ctx.actor,
        request_id=ctx.request_id,
    )


class ManagementCommands:
    """Bootstrap, projects and warehouses (Lakekeeper-shaped management API)."""

    def __init__(
        self, app: CatalogApplication, ports: ReadPorts, storage_policy: StoragePolicy
    ) -> None:
        """`storage_policy`: where warehouses may live (settings)."""
        self.app = app
        self.ports = ports
        self.storage_policy = storage_policy

    # -- server ----------------------------------------------------------------------------
    def is_bootstrapped(self) -> bool:
        return self.app.get_or_none(SERVER_ID, Server) is not None

    def bootstrap(self, ctx: RequestContext, *, is_operator: bool = False) -> bool:
        """Bootstrap once; returns False when the server was already bootstrapped."""
        if self.is_bootstrapped():
            return False
        server = Server._create(
            Server.Bootstrapped,
            id=SERVER_ID,
            is_operator=is_operator,
            actor=ctx.actor,
            request_id=ctx.request_id,
        )
        try:
            self.app.save_all(server)
        except Exception:
            if self.is_bootstrapped():
                return False
            raise
        return True

    # -- projects --------------------------------------------------------------------------
    def get_project(self, project_id: UUID) -> Project:
        return get_project(self.app, project_id)

    def create_project(
        self, ctx: RequestContext, name: str, project_id: UUID | None = None
    ) -> UUID:
        validate_name(name, "project-name")
        pid = project_id or uuid4()
        existing = self.app.get_or_none(pid, Project)
        if existing is not None:
            raise AlreadyExistsError(f"Project already exists: {pid}")
        project = Project.create(
            project_id=pid, name=name, actor=ctx.actor, request_id=ctx.request_id
        )
        try:
            self.app.save_all(project)
        except Exception:
            if self.app.get_or_none(pid, Project) is not None:
                raise AlreadyExistsError(f"Project already exists: {pid}") from None
            raise
        return pid

    def rename_project(self, ctx: RequestContext, project_id: UUID, name: str) -> None:
        validate_name(name, "new-name")

        def attempt() -> None:
            project = self.get_project(project_id)
            if project.name != name:
                project.rename(name, actor=ctx.actor, request_id=ctx.request_id)
                self.app.save_all(project)

        self.app.retrying(attempt)

    def delete_project(self, ctx: RequestContext, project_id: UUID) -> None:
        def attempt() -> None:
            project = self.get_project(project_id)
            if project.warehouse_count > 0:
                raise NotEmptyError(
                    f"Project {project_id} still has {project.warehouse_count} warehouse(s)"
                )
            # Its roles would outlive it, with their members and grants: delete them first
            # (as its warehouses). The append refuses a role that lands meanwhile.
            roles = self.ports.project_role_count(str(project_id))
            if roles > 0:
                raise NotEmptyError(f"Project {project_id} still has {roles} role(s)")
            project.delete(actor=ctx.actor, request_id=ctx.request_id)
            self.app.save_all(project)

        self.app.retrying(attempt)

    # -- warehouses ------------------------------------------------------------------------
    def get_warehouse(self, warehouse_id: UUID) -> Warehouse:
        return get_warehouse(self.app, warehouse_id)

    def create_warehouse(
        self,
        ctx: RequestContext,
        *,
        project_id: UUID,
        name: str,
        storage_profile: object,
        storage_credential: object = None,
        delete_profile: object = None,
        check_access: bool = True,
    ) -> UUID:
        validate_name(name, "warehouse-name")
        deletion = validate_delete_profile(delete_profile)
        profile, credential = validate_storage_profile(
            storage_profile, storage_credential, check_access=False, policy=self.storage_policy
        )
        root = storage_root(profile)
        # Before the access check, which creates a file root: a refused warehouse must leave
        # nothing behind (the claim in the append below is what decides, under races).
        self._storage_roots(SYSTEM).check_free(root)
        if check_access:
            check_storage_access(profile, credential)
        warehouse_id = uuid4()
        secret_id = self._seal_credential(profile, credential)

        def attempt() -> UUID:
            project = self.get_project(project_id)
            claim_id = warehouse_claim_id(project_id, name)
            existing = self.app.get_or_none(claim_id, NameClaim)
            if existing is not None and existing.is_held:
                raise AlreadyExistsError(f"Warehouse already exists: {name}")
            name_claim = _warehouse_claim(
                existing, claim_id, warehouse_id, f"{project_id}/{name}", ctx
            )
            warehouse = Warehouse.create(
                warehouse_id=warehouse_id,
                project_id=project_id,
                name=name,
                storage_profile=profile,
                delete_profile=deletion,
                actor=ctx.actor,
                request_id=ctx.request_id,
            )
            project.add_warehouse(warehouse_id, actor=ctx.actor, request_id=ctx.request_id)
            roots = self._storage_roots(ctx)
            roots.claim(warehouse_id, root, actor=ctx.actor, request_id=ctx.request_id)
            self.app.save_all(name_claim, warehouse, project, roots)
            return warehouse_id

        return self._forget_on_failure(
            secret_id, warehouse_id, lambda: self.app.retrying(attempt), warehouse_id
        )

    # -- storage ---------------------------------------------------------------------------
    def _storage_roots(self, ctx: RequestContext) -> StorageRoots:
        """The registry of warehouse roots; started from the live warehouses when the log
        has none yet (a catalog that predates it)."""
        found = self.app.get_or_none(STORAGE_ROOTS_ID, StorageRoots)
        if found is not None:
            return found
        roots: dict[str, str] = {}
        for warehouse_id, profile in sorted(self.ports.warehouse_profiles().items()):
            try:
                roots[warehouse_id] = str(storage_root(profile))
            except BadRequestError:
                continue  # a legacy location that no longer parses overlaps nothing
        return StorageRoots.start(roots, actor=ctx.actor, request_id=ctx.request_id)

    def _seal_credential(
        self, profile: dict[str, Any], credential: dict[str, Any] | None
    ) -> UUID | None:
        """Store a credential encrypted, outside the log; the profile gets only its id."""
        if credential is None:
            return None
        if self.app.secrets is None:
            raise ServiceUnavailableError("This server cannot store storage credentials")
        secret_id = self.app.secrets.put(credential)
        profile["credential-id"] = str(secret_id)
        return secret_id

    def _forget_on_failure(
        self, secret_id: UUID | None, warehouse_id: UUID, command: Callable[[], R], done: R
    ) -> R:
        """A credential sealed for a command that then failed is deleted again — only when
        the command certainly did not land: an append can fail after the database committed
        it, and deleting the credential a warehouse names would break the warehouse. Landed
        is answered as landed (`done`); when the log cannot tell, the secret is kept."""
        try:
            return command()
        except BaseException as failure:
            if secret_id is None or self.app.secrets is None:
                raise
            try:
                warehouse = self.app.get_or_none(warehouse_id, Warehouse)
            except Exception:
                raise failure from None  # the outcome is unknown: the secret is kept
            in_use = warehouse is not None and warehouse.storage_profile.get(
                "credential-id"
            ) == str(secret_id)
            if in_use:
                return done
            self.app.secrets.delete(secret_id)
            raise

    def update_storage(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        *,
        storage_profile: object,
        storage_credential: object = None,
        check_access: bool = True,
    ) -> None:
        """New storage settings for the same storage location. Without a new credential the
        current one is kept (and used for the access check)."""
        current = self.get_warehouse(warehouse_id)
        old_profile = current.storage_profile
        if isinstance(storage_profile, dict) and storage_profile.get("type") != old_profile.get(
            "type"
        ):
            raise BadRequestError("The storage profile's type cannot change")
        # Without a new credential the sealed one is kept, if the kind allows it for the
        # new settings: checked before any access check, which would send the credential
        # wherever the new settings point.
        keep_credential = storage_credential is None and "credential-id" in old_profile
        if keep_credential:
            storage_credential = credential_for(old_profile, self.app.secrets)
        profile, credential = validate_storage_profile(
            storage_profile, storage_credential, check_access=False, policy=self.storage_policy
        )
        self._same_location(old_profile, profile)
        if keep_credential and not kind_for(old_profile).keeps_credential(old_profile, profile):
            raise BadRequestError(
                "This change of the storage profile needs the storage-credential again: the "
                "stored credential is only used with the store it was given for"
            )
        if check_access:
            check_storage_access(profile, credential)
        if keep_credential:
            profile["credential-id"] = old_profile["credential-id"]
            secret_id = None
        else:
            secret_id = self._seal_credential(profile, credential)
        self._replace_profile(ctx, warehouse_id, profile, secret_id)

    @staticmethod
    def _same_location(old: dict[str, Any], new: dict[str, Any]) -> None:
        if new["base-location"] != old["base-location"]:
            raise BadRequestError(
                "The storage location cannot change (tables live there): "
                f"{old['base-location']} → {new['base-location']}"
            )

    def update_storage_credential(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        storage_credential: object,
        *,
        check_access: bool = True,
    ) -> None:
        """A new credential for the same profile (key rotation at the storage provider)."""
        current = self.get_warehouse(warehouse_id)
        settings = {k: v for k, v in current.storage_profile.items() if k not in ("credential-id",)}
        profile, credential = validate_storage_profile(
            settings, storage_credential, check_access=check_access, policy=self.storage_policy
        )
        secret_id = self._seal_credential(profile, credential)
        self._replace_profile(ctx, warehouse_id, profile, secret_id)

    def _replace_profile(
        self,
        ctx: RequestContext,
        warehouse_id: UUID,
        profile: dict[str, Any],
        secret_id: UUID | None,
    ) -> None:
        replaced: list[str] = []

        def attempt() -> None:
            warehouse = self.get_warehouse(warehouse_id)
            if warehouse.storage_profile == profile:
                return
            old_credential = warehouse.storage_profile.get("credential-id")
            warehouse.change_storage_profile(profile, actor=ctx.actor, request_id=ctx.request_id)
            # Known before the append: an append that lands but reports a failure still
            # retires the credential it replaced.
            replaced[:] = []
            if old_credential is not None and old_credential != profile.get("credential-id"):
                replaced.append(str(old_credential))
            self.app.save_all(warehouse)

        self._forget_on_failure(secret_id, warehouse_id, lambda: self.app.retrying(attempt), None)
        self.app.forget_storage_profile(warehouse_id)
        # The replaced credential is no longer referenced by the current profile; it is
        # deleted so that a revoked key does not linger, even encrypted.
        for old in replaced:
            if self.app.secrets is not None:
                self.app.secrets.retire(UUID(old), CREDENTIAL_GRACE_S)

    def rename_warehouse(self, ctx: RequestContext, warehouse_id: UUID, name: str) -> None:
        validate_name(name, "new-name")

        def attempt() -> None:
            warehouse = self.get_warehouse(warehouse_id)
            if warehouse.name == name:
                return
            old_id = warehouse_claim_id(warehouse.project_id, warehouse.name)
            new_id = warehouse_claim_id(warehouse.project_id, name)
            old_claim = self.app.get_or_none(old_id, NameClaim)
            existing = self.app.get_or_none(new_id, NameClaim)
            if existing is not None and existing.is_held:
                raise AlreadyExistsError(f"Warehouse already exists: {name}")
            new_claim = _warehouse_claim(
                existing, new_id, warehouse_id, f"{warehouse.project_id}/{name}", ctx
            )
            if old_claim is not None:
                old_claim.release(actor=ctx.actor, request_id=ctx.request_id)
            warehouse.rename(name, actor=ctx.actor, request_id=ctx.request_id)
            self.app.save_all(old_claim, new_claim, warehouse)

        self.app.retrying(attempt)

    def delete_warehouse(self, ctx: RequestContext, warehouse_id: UUID) -> None:
        def attempt() -> object:
            warehouse = self.get_warehouse(warehouse_id)
            ensure_unprotected(warehouse.is_protected, f"Warehouse {warehouse.name}")
            if warehouse.namespace_count > 0:
                raise NotEmptyError(
                    f"Warehouse {warehouse.name} is not empty: it has "
                    f"{warehouse.namespace_count} namespace(s)"
                )
            pending = self.ports.open_task_count(str(warehouse_id))
            if pending > 0:
                raise NotEmptyError(
                    f"Warehouse {warehouse.name} still has {pending} open task(s) (purges of "
                    "dropped tables); delete it once they have run"
                )
            project = self.app.get_or_none(warehouse.project_id, Project)
            name_claim = self.app.get_or_none(
                warehouse_claim_id(warehouse.project_id, warehouse.name), NameClaim
            )
            if name_claim is not None and name_claim.holder_id == warehouse_id:
                name_claim.release(actor=ctx.actor, request_id=ctx.request_id)
            warehouse.delete(actor=ctx.actor, request_id=ctx.request_id)
            if project is not None and not project.deleted:
                project.remove_warehouse(warehouse_id, actor=ctx.actor, request_id=ctx.request_id)
            roots = self.app.get_or_none(STORAGE_ROOTS_ID, StorageRoots)
            if roots is not None:
                roots.release(warehouse_id, actor=ctx.actor, request_id=ctx.request_id)
            self.app.save_all(name_claim, warehouse, project, roots)
            return warehouse.storage_profile.get("credential-id")

        credential_id = self.app.retrying(attempt)
        if credential_id is not None and self.app.secrets is not None:
            self.app.secrets.retire(UUID(str(credential_id)), CREDENTIAL_GRACE_S)

    def change_delete_profile(
        self, ctx: RequestContext, warehouse_id: UUID, delete_profile: Any
    ) -> dict[str, Any]:
        profile = validate_delete_profile(delete_profile)

        def attempt() -> dict[str, Any]:
            warehouse = self.get_warehouse(warehouse_id)
            if warehouse.delete_profile != profile:
                warehouse.change_delete_profile(profile, actor=ctx.actor, request_id=ctx.request_id)
                self.app.save_all(warehouse)
            return profile

        return self.app.retrying(attempt)

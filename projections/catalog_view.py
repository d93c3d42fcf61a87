"""The catalog read model: what REST reads (loadTable, list*, config) query.

The same projection runs inline — inside the transaction that appends the events,
so reads never lag — and in a rebuild that folds the whole log into fresh tables.
Commands hand it already-rendered documents ("hints") so the inline path never
reads or re-folds; a rebuild has no hints and folds from the previous row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import orjson
from eventsourcing.persistence import IntegrityError

from icelog.domain.function import Function
from icelog.domain.function_metadata import apply_function_changes
from icelog.domain.grants import Grants
from icelog.domain.identifiers import NamespaceName, properties_hint_key
from icelog.domain.locations import location_set_by, normalize_location
from icelog.domain.metadata_fold import replay_commit
from icelog.domain.namespace import Namespace
from icelog.domain.ownership import GrantsEnded, grants_ended_by, owned_by_creation
from icelog.domain.permissions import Kind, ObjectRef
from icelog.domain.project import Project
from icelog.domain.role import Role
from icelog.domain.table import Table
from icelog.domain.task import Task
from icelog.domain.user import User
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse
from icelog.projections import location_overlap
from icelog.projections.schema import TABULAR_COLUMNS, grant_row_id

# A DB-API cursor of either library (sqlite3 via eventsourcing, or psycopg): their
# execute() signatures differ, so the type stays open.
Cursor = Any


class CatalogView:
    """Applies domain events to the read-model tables through a DB-API cursor."""

    def __init__(self, dialect: str, prefix: str = "", *, guard: bool = False) -> None:
        self.dialect = dialect
        self.prefix = prefix
        # Live appends only (the inline projection), never a rebuild of what the log holds:
        # inside the append's transaction, where appends are serialised, refuse (as a
        # conflict: the command reloads and answers) what two concurrent commands that
        # each passed their own check could otherwise both land — a table or view
        # location that overlaps another's, something created in a namespace that is
        # gone, a namespace dropped while it still holds something (ADR 0018).
        self.guard = guard

    def _sql(self, statement: str) -> str:
        statement = statement.replace("{p}", self.prefix)
        return statement.replace("?", "%s") if self.dialect == "postgres" else statement

    def _exec(self, cur: Cursor, statement: str, params: Sequence[Any]) -> None:
        if self.dialect == "postgres":
            # Never prepare inside the library's pipeline: when an append loses a version
            # race the pipeline aborts, and psycopg would still believe the statement was
            # prepared ("prepared statement _pg3_N does not exist" on the next use).
            cur.execute(self._sql(statement), params, prepare=False)
        else:
            cur.execute(self._sql(statement), params)

    def _blob(self, data: bytes) -> Any:
        return data

    def apply(self, cur: Cursor, events: Sequence[object], hints: Mapping[str, bytes]) -> None:
        for event in events:
            self.apply_one(cur, event, hints)

    @staticmethod
    def plain_commit(
        event: object, hints: Mapping[str, bytes]
    ) -> tuple[str, tuple[str, bytes, int, str]] | None:
        """A commit that only moves a tabular's row to a document handed in (no new
        location): (tabular id, (metadata location, document, version, time)), the row
        update the one-statement append writes (projections/recorders.py); None for any
        other event."""
        if not isinstance(event, (Table.Committed, View.Replaced)):
            return None
        data = hints.get(event.metadata_location)
        if data is None or location_set_by(event.updates) is not None:
            return None
        stamp = event.timestamp.isoformat()
        row = (event.metadata_location, data, event.originator_version, stamp)
        return str(event.originator_id), row

    def apply_one(self, cur: Cursor, event: object, hints: Mapping[str, bytes]) -> None:
        if isinstance(event, (Table.Event, View.Event)):
            self._tabular(cur, event, hints)
        elif isinstance(event, Namespace.Event):
            self._namespace(cur, event, hints)
        elif isinstance(event, Function.Event):
            self._function(cur, event, hints)
        elif isinstance(event, Warehouse.Event):
            self._warehouse(cur, event)
        elif isinstance(event, Project.Event):
            self._project(cur, event)
        elif isinstance(event, Task.Event):
            self._task(cur, event)
        elif isinstance(event, User.Event):
            self._user(cur, event)
        elif isinstance(event, Grants.Event):
            self._grant(cur, event)
        elif isinstance(event, Role.Event):
            self._role(cur, event)
        ended = grants_ended_by(event)
        if ended is not None:
            # In the same transaction as the object's (or principal's) end: a name never
            # carries the old object's rights (docs/auth.md).
            self.end_grants(cur, ended)
        owned = owned_by_creation(event)
        if owned is not None:
            # Creators own what they create (Lakekeeper): the creation event's actor is the
            # grant, so the log holds it without a second event.
            actor, stamp = getattr(event, "actor", ""), getattr(event, "timestamp", None)
            self._insert_grant(cur, owned, "ownership", "user", actor, stamp)

    def _insert_grant(
        self, cur: Cursor, obj: ObjectRef, relation: str, kind: str, principal: str, at: Any
    ) -> None:
        row_id = grant_row_id(obj.id, relation, kind, principal)
        self._exec(
            cur,
            "INSERT INTO {p}icelog_grants (id, object_kind, object_id, relation, principal_kind, "
            "principal_id, created_at) SELECT ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM "
            "{p}icelog_grants WHERE id = ?)",
            (row_id, obj.kind, obj.id, relation, kind, principal, at.isoformat(), row_id),
        )

    def end_grants(self, cur: Cursor, ended: GrantsEnded) -> None:
        """Delete the grants on the object that is gone, and those its principal held."""
        if ended.on is not None:
            self._exec(
                cur,
                "DELETE FROM {p}icelog_grants WHERE object_id = ? AND object_kind = ?",
                (ended.on.id, ended.on.kind),
            )
        if ended.held_by is not None:
            self._exec(
                cur,
                "DELETE FROM {p}icelog_grants WHERE principal_id = ? AND principal_kind = ?",
                (ended.held_by.id, ended.held_by.kind),
            )

    # Where each kind of object lives while it exists (a soft-dropped table or view still
    # exists: an undrop brings it back with its grants).
    _OBJECT_ROWS: Mapping[str, tuple[str, ...]] = {
        "project": ("SELECT 1 FROM {p}icelog_projects WHERE id = ?",),
        "warehouse": ("SELECT 1 FROM {p}icelog_warehouses WHERE id = ?",),
        "namespace": ("SELECT 1 FROM {p}icelog_namespaces WHERE id = ?",),
        "table": (
            "SELECT 1 FROM {p}icelog_tabulars WHERE id = ? AND kind = 'table'",
            "SELECT 1 FROM {p}icelog_deleted_tabulars WHERE id = ? AND kind = 'table'",
        ),
        "view": (
            "SELECT 1 FROM {p}icelog_tabulars WHERE id = ? AND kind = 'view'",
            "SELECT 1 FROM {p}icelog_deleted_tabulars WHERE id = ? AND kind = 'view'",
        ),
        "role": ("SELECT 1 FROM {p}icelog_roles WHERE id = ?",),
    }

    def _exists(self, cur: Cursor, kind: str, object_id: str) -> bool:
        statements = self._OBJECT_ROWS.get(kind)
        if statements is None:  # the server
            return True
        for statement in statements:
            self._exec(cur, statement, (object_id,))
            if cur.fetchone() is not None:
                return True
        return False

    def _require_object(self, cur: Cursor, event: Grants.Granted) -> bool:
        """Whether the grant's object (and role, if a role holds it) exists. A grant of
        something gone would outlive it and pass to the next object of that name (a
        namespace's id derives from its name). Live (see `guard`): IntegrityError — it
        was checked before the append and dropped meanwhile. A rebuild skips such a grant
        (the log of an older release may hold one), as the live model no longer has it."""
        gone = None
        if not self._exists(cur, event.object_kind, event.object_id):
            gone = f"the {event.object_kind} {event.object_id} does not exist"
        elif event.principal_kind == "role" and not self._exists(cur, "role", event.principal_id):
            gone = f"the role {event.principal_id} does not exist"
        if gone is not None and self.guard:
            raise IntegrityError(gone)
        return gone is None

    def _grant(self, cur: Cursor, event: Grants.Event) -> None:
        obj = ObjectRef(cast(Kind, event.object_kind), event.object_id)
        if isinstance(event, Grants.Granted):
            if not self._require_object(cur, event):
                return
            self._insert_grant(
                cur, obj, event.relation, event.principal_kind, event.principal_id,
                event.timestamp,
            )  # fmt: skip
        elif isinstance(event, Grants.Revoked):
            row_id = grant_row_id(obj.id, event.relation, event.principal_kind, event.principal_id)
            self._exec(cur, "DELETE FROM {p}icelog_grants WHERE id = ?", (row_id,))

    def _role(self, cur: Cursor, event: Role.Event) -> None:
        rid = str(event.originator_id)
        stamp = event.timestamp.isoformat()
        if isinstance(event, Role.Created):
            self._require_project(cur, str(event.project_id))
            self._exec(
                cur,
                "INSERT INTO {p}icelog_roles (id, project_id, name, description, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (rid, str(event.project_id), event.name, event.description, stamp),
            )
        elif isinstance(event, Role.Updated):
            self._exec(
                cur,
                "UPDATE {p}icelog_roles SET name = ?, description = ?, updated_at = ? WHERE id = ?",
                (event.name, event.description, stamp, rid),
            )
        elif isinstance(event, Role.Deleted):
            # Its memberships, the grants on it and those it held go with it (end_grants).
            self._exec(cur, "DELETE FROM {p}icelog_roles WHERE id = ?", (rid,))

    def _user(self, cur: Cursor, event: User.Event) -> None:
        stamp = event.timestamp.isoformat()
        if isinstance(event, User.Provisioned):
            self._exec(
                cur,
                "INSERT INTO {p}icelog_users (id, name, email, user_type, last_updated_with, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (event.user_id, event.name, event.email, event.user_type, event.how, stamp),
            )
            return
        user_id = event.user_id
        if isinstance(event, User.Updated):
            # An update after a delete brings the user back (the row went with the delete).
            self._exec(
                cur,
                "UPDATE {p}icelog_users SET name = ?, email = ?, user_type = ?, "
                "last_updated_with = ?, updated_at = ? WHERE id = ?",
                (event.name, event.email, event.user_type, event.how, stamp, user_id),
            )
            self._exec(
                cur,
                "INSERT INTO {p}icelog_users (id, name, email, user_type, last_updated_with, "
                "created_at, updated_at) SELECT ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS "
                "(SELECT 1 FROM {p}icelog_users WHERE id = ?)",
                (
                    user_id, event.name, event.email, event.user_type, event.how, stamp, stamp,
                    user_id,
                ),
            )  # fmt: skip
        elif isinstance(event, User.Deleted):
            self._exec(cur, "DELETE FROM {p}icelog_users WHERE id = ?", (user_id,))

    # -- projects and warehouses -------------------------------------------------------------
    def _project(self, cur: Cursor, event: Project.Event) -> None:
        pid = str(event.originator_id)
        if isinstance(event, Project.Created):
            self._exec(
                cur,
                "INSERT INTO {p}icelog_projects (id, name, created_at) VALUES (?, ?, ?)",
                (pid, event.name, event.timestamp.isoformat()),
            )
        elif isinstance(event, Project.Renamed):
            self._exec(
                cur, "UPDATE {p}icelog_projects SET name = ? WHERE id = ?", (event.name, pid)
            )
        elif isinstance(event, Project.Deleted):
            self._require_no_roles(cur, pid)
            self._exec(cur, "DELETE FROM {p}icelog_projects WHERE id = ?", (pid,))

    def _require_project(self, cur: Cursor, project_id: str) -> None:
        """IntegrityError (see `guard`) unless the project exists: a role created while its
        project was deleted would outlive it."""
        if self.guard and not self._exists(cur, "project", project_id):
            raise IntegrityError(f"the project {project_id} does not exist")

    def _require_no_roles(self, cur: Cursor, project_id: str) -> None:
        """IntegrityError (see `guard`) while the project has roles: a project is deleted
        only when it holds nothing, roles included (they and their grants would outlive
        it)."""
        if not self.guard:
            return
        self._exec(cur, "SELECT 1 FROM {p}icelog_roles WHERE project_id = ? LIMIT 1", (project_id,))
        if cur.fetchone() is not None:
            raise IntegrityError(f"the project {project_id} still has roles")

    def _warehouse(self, cur: Cursor, event: Warehouse.Event) -> None:
        wid = str(event.originator_id)
        if isinstance(event, Warehouse.Created):
            self._exec(
                cur,
                "INSERT INTO {p}icelog_warehouses (id, project_id, name, storage_profile, "
                "delete_profile, status, created_at) VALUES (?, ?, ?, ?, ?, 'active', ?)",
                (
                    wid,
                    str(event.project_id),
                    event.name,
                    orjson.dumps(event.storage_profile).decode(),
                    orjson.dumps(event.delete_profile).decode(),
                    event.timestamp.isoformat(),
                ),
            )
        elif isinstance(event, Warehouse.Renamed):
            self._exec(
                cur, "UPDATE {p}icelog_warehouses SET name = ? WHERE id = ?", (event.name, wid)
            )
        elif isinstance(event, Warehouse.DeleteProfileChanged):
            self._exec(
                cur,
                "UPDATE {p}icelog_warehouses SET delete_profile = ? WHERE id = ?",
                (orjson.dumps(event.delete_profile).decode(), wid),
            )
        elif isinstance(event, Warehouse.StorageProfileChanged):
            self._exec(
                cur,
                "UPDATE {p}icelog_warehouses SET storage_profile = ? WHERE id = ?",
                (orjson.dumps(event.storage_profile).decode(), wid),
            )
        elif isinstance(event, Warehouse.Deleted):
            self._exec(cur, "DELETE FROM {p}icelog_warehouses WHERE id = ?", (wid,))

    # -- namespaces ------------------------------------------------------------------------
    def _require_namespace(self, cur: Cursor, warehouse_id: str, ns_key: str) -> None:
        """IntegrityError unless the namespace exists (see `guard`)."""
        if not self.guard:
            return
        self._exec(
            cur,
            "SELECT 1 FROM {p}icelog_namespaces WHERE warehouse_id = ? AND ns_key = ?",
            (warehouse_id, ns_key),
        )
        if cur.fetchone() is None:
            raise IntegrityError(f"the namespace {ns_key!r} does not exist")

    def _require_empty(self, cur: Cursor, nid: str) -> None:
        """IntegrityError if the namespace holds a table, view (live or soft-dropped),
        function or namespace (see `guard`). One statement: it runs inside the append."""
        if not self.guard:
            return
        held = "SELECT 1 FROM {p}%s AS c WHERE c.warehouse_id = n.warehouse_id AND c.%s = n.ns_key"
        inside = " OR ".join(
            f"EXISTS ({held % (table, column)})"
            for table, column in (
                ("icelog_tabulars", "ns_key"),
                ("icelog_deleted_tabulars", "ns_key"),
                ("icelog_functions", "ns_key"),
                ("icelog_namespaces", "parent_key"),
            )
        )
        self._exec(
            cur, f"SELECT 1 FROM {{p}}icelog_namespaces AS n WHERE n.id = ? AND ({inside})", (nid,)
        )
        if cur.fetchone() is not None:
            raise IntegrityError("the namespace is not empty")

    def _namespace(self, cur: Cursor, event: Namespace.Event, hints: Mapping[str, bytes]) -> None:
        nid = str(event.originator_id)
        if isinstance(event, (Namespace.Created, Namespace.Recreated)):
            name = NamespaceName(tuple(event.levels))
            parent = name.parent
            if parent is not None:
                self._require_namespace(cur, str(event.warehouse_id), parent.key)
            self._exec(
                cur,
                "INSERT INTO {p}icelog_namespaces (id, warehouse_id, ns_key, parent_key, "
                "properties, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    nid,
                    str(event.warehouse_id),
                    name.key,
                    parent.key if parent else "",
                    orjson.dumps(event.properties).decode(),
                    event.timestamp.isoformat(),
                ),
            )
        elif isinstance(event, Namespace.PropertiesUpdated):
            hint = hints.get(properties_hint_key(event.originator_id))
            if hint is None:
                self._exec(cur, "SELECT properties FROM {p}icelog_namespaces WHERE id = ?", (nid,))
                props: dict[str, str] = orjson.loads(cur.fetchone()[0])
                for key in event.removed:
                    props.pop(key, None)
                props.update(event.updated)
                hint = orjson.dumps(props)
            self._exec(
                cur,
                "UPDATE {p}icelog_namespaces SET properties = ? WHERE id = ?",
                (hint.decode(), nid),
            )
        elif isinstance(event, Namespace.Dropped):
            self._require_empty(cur, nid)
            self._exec(cur, "DELETE FROM {p}icelog_namespaces WHERE id = ?", (nid,))

    # -- tables and views ------------------------------------------------------------------
    def _refuse_overlap(
        self, cur: Cursor, warehouse_id: str | None, tid: str, location: str
    ) -> None:
        """IntegrityError (the append is a conflict: the command reloads, and its own check
        then answers 409) when `location` overlaps another tabular's of the warehouse."""
        if not self.guard:
            return
        at = normalize_location(location)
        if warehouse_id is None:
            self._exec(cur, "SELECT warehouse_id FROM {p}icelog_tabulars WHERE id = ?", (tid,))
            row = cur.fetchone()
            if row is None:
                return
            warehouse_id = str(row[0])
        overlaps, params = location_overlap.clause(self.dialect, at)
        # Live and soft-dropped rows in one statement: this runs inside the append, where
        # every round trip lengthens the time the event table is locked.
        where = f"WHERE warehouse_id = ? AND id <> ? AND {overlaps}"
        self._exec(
            cur,
            f"SELECT 1 FROM (SELECT 1 FROM {{p}}icelog_tabulars {where} "
            f"UNION ALL SELECT 1 FROM {{p}}icelog_deleted_tabulars {where}) AS found LIMIT 1",
            (warehouse_id, tid, *params, warehouse_id, tid, *params),
        )
        if cur.fetchone() is not None:
            raise IntegrityError(f"the location {at} overlaps another table's or view's")

    def _require_namespace_of(
        self, cur: Cursor, table: str, tid: str, namespace: Sequence[str]
    ) -> None:
        """IntegrityError unless the namespace exists in the warehouse of tabular `tid`
        (its row in `table`)."""
        if not self.guard:
            return
        self._exec(
            cur,
            f"SELECT 1 FROM {{p}}{table} AS t JOIN {{p}}icelog_namespaces AS n "
            "ON n.warehouse_id = t.warehouse_id AND n.ns_key = ? WHERE t.id = ?",
            (NamespaceName(tuple(namespace)).key, tid),
        )
        if cur.fetchone() is None:
            raise IntegrityError("the namespace does not exist")

    def _tabular(
        self, cur: Cursor, event: Table.Event | View.Event, hints: Mapping[str, bytes]
    ) -> None:
        """Tables and views share the tabular rows (one identifier space), told apart by kind."""
        tid = str(event.originator_id)
        stamp = event.timestamp.isoformat()
        kind = "view" if isinstance(event, View.Event) else "table"
        if isinstance(event, (Table.Created, Table.Registered, View.Created, View.Registered)):
            ns_key = NamespaceName(tuple(event.namespace)).key
            self._require_namespace(cur, str(event.warehouse_id), ns_key)
            self._refuse_overlap(cur, str(event.warehouse_id), tid, event.location)
            data = hints.get(event.metadata_location) or orjson.dumps(event.metadata)
            self._exec(
                cur,
                "INSERT INTO {p}icelog_tabulars (id, warehouse_id, ns_key, name, kind, location, "
                "metadata_location, metadata, version, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    tid,
                    str(event.warehouse_id),
                    NamespaceName(tuple(event.namespace)).key,
                    event.name,
                    kind,
                    normalize_location(event.location),
                    event.metadata_location,
                    self._blob(data),
                    event.originator_version,
                    stamp,
                    stamp,
                ),
            )
        elif isinstance(event, (Table.Committed, View.Replaced)):
            hinted = hints.get(event.metadata_location)
            location = location_set_by(event.updates)
            if hinted is not None:
                data = hinted
            else:
                self._exec(cur, "SELECT metadata FROM {p}icelog_tabulars WHERE id = ?", (tid,))
                previous = orjson.loads(bytes(cur.fetchone()[0]))
                data = orjson.dumps(replay_commit(event, previous))
            if location is not None:
                self._refuse_overlap(cur, None, tid, location)
                self._exec(
                    cur,
                    "UPDATE {p}icelog_tabulars SET location = ? WHERE id = ?",
                    (normalize_location(location), tid),
                )
            self._exec(
                cur,
                "UPDATE {p}icelog_tabulars SET metadata_location = ?, metadata = ?, version = ?, "
                "updated_at = ? WHERE id = ?",
                (event.metadata_location, self._blob(data), event.originator_version, stamp, tid),
            )
        elif isinstance(event, (Table.Renamed, View.Renamed)):
            self._require_namespace_of(cur, "icelog_tabulars", tid, event.namespace)
            self._exec(
                cur,
                "UPDATE {p}icelog_tabulars SET ns_key = ?, name = ?, version = ?, updated_at = ? "
                "WHERE id = ?",
                (
                    NamespaceName(tuple(event.namespace)).key,
                    event.name,
                    event.originator_version,
                    stamp,
                    tid,
                ),
            )
        elif isinstance(event, (Table.Dropped, View.Dropped)):
            self._exec(cur, "DELETE FROM {p}icelog_tabulars WHERE id = ?", (tid,))
        elif isinstance(event, (Table.SoftDropped, View.SoftDropped)):
            purge = int(bool(getattr(event, "purge_requested", False)))
            self._exec(
                cur,
                f"INSERT INTO {{p}}icelog_deleted_tabulars ({TABULAR_COLUMNS}, deleted_at, "
                "expires_at, purge) SELECT id, warehouse_id, ns_key, name, kind, location, "
                "metadata_location, metadata, ?, created_at, updated_at, ?, ?, ? "
                "FROM {p}icelog_tabulars WHERE id = ?",
                (event.originator_version, stamp, _iso(event.expires_at_ms), purge, tid),
            )
            self._exec(cur, "DELETE FROM {p}icelog_tabulars WHERE id = ?", (tid,))
        elif isinstance(event, (Table.Undropped, View.Undropped)):
            self._require_namespace_of(cur, "icelog_deleted_tabulars", tid, event.namespace)
            # Same columns, with the (possibly new) name and the undrop's version.
            restored = (
                "id, warehouse_id, ?, ?, kind, location, metadata_location, metadata, ?, "
                "created_at, ?"
            )
            self._exec(
                cur,
                f"INSERT INTO {{p}}icelog_tabulars ({TABULAR_COLUMNS}) SELECT {restored} "
                "FROM {p}icelog_deleted_tabulars WHERE id = ?",
                (
                    NamespaceName(tuple(event.namespace)).key,
                    event.name,
                    event.originator_version,
                    stamp,
                    tid,
                ),
            )
            self._exec(cur, "DELETE FROM {p}icelog_deleted_tabulars WHERE id = ?", (tid,))
        elif isinstance(event, (Table.Expired, View.Expired)):
            self._exec(cur, "DELETE FROM {p}icelog_deleted_tabulars WHERE id = ?", (tid,))

    # -- functions -------------------------------------------------------------------------
    def _function(self, cur: Cursor, event: Function.Event, hints: Mapping[str, bytes]) -> None:
        """One row per live function, with its current document (folded from the previous
        one when the command handed none in: a rebuild)."""
        fid = str(event.originator_id)
        stamp = event.timestamp.isoformat()
        if isinstance(event, Function.Created):
            ns_key = NamespaceName(tuple(event.namespace)).key
            self._require_namespace(cur, str(event.warehouse_id), ns_key)
            data = hints.get(event.metadata_location) or orjson.dumps(event.metadata)
            self._exec(
                cur,
                "INSERT INTO {p}icelog_functions (id, warehouse_id, ns_key, name, location, "
                "metadata_location, metadata, version, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    fid,
                    str(event.warehouse_id),
                    NamespaceName(tuple(event.namespace)).key,
                    event.name,
                    normalize_location(event.location),
                    event.metadata_location,
                    self._blob(data),
                    event.originator_version,
                    stamp,
                    stamp,
                ),
            )
        elif isinstance(event, Function.Replaced):
            hinted = hints.get(event.metadata_location)
            if hinted is not None:
                data = hinted
            else:
                self._exec(cur, "SELECT metadata FROM {p}icelog_functions WHERE id = ?", (fid,))
                previous = orjson.loads(bytes(cur.fetchone()[0]))
                folded = apply_function_changes(previous, event.changes, now_ms=event.applied_at_ms)
                data = orjson.dumps(folded)
            self._exec(
                cur,
                "UPDATE {p}icelog_functions SET metadata_location = ?, metadata = ?, version = ?, "
                "updated_at = ? WHERE id = ?",
                (event.metadata_location, self._blob(data), event.originator_version, stamp, fid),
            )
        elif isinstance(event, Function.Dropped):
            self._exec(cur, "DELETE FROM {p}icelog_functions WHERE id = ?", (fid,))

    # -- tasks -----------------------------------------------------------------------------
    def _task(self, cur: Cursor, event: Task.Event) -> None:
        task_id = str(event.originator_id)
        stamp = event.timestamp.isoformat()
        if isinstance(event, Task.Scheduled):
            self._exec(
                cur,
                "INSERT INTO {p}icelog_tasks (id, queue, warehouse_id, entity_kind, entity_id, "
                "status, attempt, max_attempts, due_at_ms, worker, last_error, payload, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'pending', 0, ?, ?, NULL, NULL, "
                "?, ?, ?)",
                (
                    task_id,
                    event.queue,
                    str(event.warehouse_id),
                    event.entity_kind,
                    str(event.entity_id),
                    event.max_attempts,
                    event.due_at_ms,
                    orjson.dumps(event.payload).decode(),
                    stamp,
                    stamp,
                ),
            )
            return
        if isinstance(event, Task.AttemptStarted):
            sets, params = (
                "status = 'running', attempt = ?, worker = ?",
                [
                    event.attempt,
                    event.worker,
                ],
            )
        elif isinstance(event, Task.AttemptAbandoned):
            sets, params = "status = 'pending', worker = NULL", []
        elif isinstance(event, Task.AttemptFailed):
            sets = "status = ?, due_at_ms = ?, worker = NULL, last_error = ?"
            params = ["failed" if event.final else "pending", event.retry_at_ms, event.error]
        elif isinstance(event, Task.Succeeded):
            sets = "status = 'succeeded', worker = NULL, result = ?"
            params = [orjson.dumps(event.result).decode()]
        elif isinstance(event, Task.Cancelled):
            sets, params = "status = 'cancelled', worker = NULL", []
        else:
            return
        self._exec(
            cur,
            f"UPDATE {{p}}icelog_tasks SET {sets}, updated_at = ? WHERE id = ?",
            (*params, stamp, task_id),
        )


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()

"""Tables: the commit unit.

The aggregate keeps only what commands need (name, location, current metadata
location, lifecycle flags). The full metadata lives in the metadata files the
server writes. The events carry enough to rebuild every metadata document from
the log alone: the initial document on create/register, then per commit the
submitted updates, the time they were applied at and the resulting location.
Commits therefore stay linear in size, never the whole metadata per event.

What tables share with views (events' bodies, rules) is in `domain/tabular.py`;
here is what only a table has: commits, unregister, purge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from icelog.domain import protection, tabular
from icelog.domain.attributed import fixed
from icelog.domain.errors import ConflictError, NoSuchTableError
from icelog.domain.tabular import Tabular


class _TablePlaced(tabular.TabularPlaced):
    """A table's first event: a new table has not been purged."""

    SETS = fixed(**tabular.TabularPlaced.SETS, purged=False)


class Table(Tabular):
    """An Iceberg table registered in a warehouse namespace. Beyond what a view does, it
    has data files (a purge deletes them) and can leave the catalog by `unregister`."""

    TOPIC = "icelog.table"
    NOT_FOUND = NoSuchTableError

    class Event(tabular.TabularEvent):
        TOPIC = "icelog.table.event.v1"

    class Created(Event, _TablePlaced):
        """A table was created: `createTable` (`POST …/namespaces/{ns}/tables` without
        `stage-create`), or a create transaction was committed (stage-create, then a commit with
        `assert-create`). `metadata` is the first metadata document, already written to
        `metadata-location`.

        Data fields:
            metadata: The whole first metadata document (Iceberg table metadata JSON).
            updates: What a create transaction submitted (empty for a plain create).
            location: The table's base location.
        """

        TOPIC = "icelog.table.created.v1"
        updates: list[dict[str, Any]]

    class Registered(Event, _TablePlaced):
        """`registerTable` (`POST …/namespaces/{ns}/register`) adopted an existing metadata file as
        a new table. The table gets a new id (`tabularid`): it is not the `table-uuid` inside the
        adopted metadata.

        Data fields:
            metadata: The adopted metadata document.
            metadata-location: The adopted metadata file.
            location: The table's base location (from the metadata).
        """

        TOPIC = "icelog.table.registered.v1"
        registers = True

    class Committed(Event, tabular.Changed):
        """A commit to the table: `updateTable` (`POST …/namespaces/{ns}/tables/{table}`) or this
        table's part of a multi-table transaction (`POST …/transactions/commit`, one event per
        table, all in one append). `updates` were applied at `applied-at-ms` to the metadata at
        `previous-metadata-location`, producing `metadata-location`.
        """

        TOPIC = "icelog.table.committed.v1"

    class Renamed(Event, tabular.Moved):
        """`renameTable` (`POST …/tables/rename`), within a namespace or into another one of the
        same warehouse. The envelope (`subject`, `namespace`, `name`) already has the new name.
        """

        TOPIC = "icelog.table.renamed.v1"

    class Dropped(Event, tabular.Dropped):
        """`dropTable` in a warehouse whose delete profile is `hard` (the default), or a recursive
        namespace drop: the table is gone at once. With `purge-requested` (`?purgeRequested=true`) a
        purge task is scheduled in the same append and `table.purged` follows.

        Data fields:
            purge-requested: Whether the client asked to purge the files (a purge task follows).
        """

        TOPIC = "icelog.table.dropped.v1"
        purge_requested: bool

    class Unregistered(Dropped):
        """`unregisterTable` (`POST …/namespaces/{ns}/tables/{table}/unregister`, Iceberg's main
        spec): the table left the catalog at once, whatever the delete profile, and no file was
        touched — `registerTable` with its last metadata location brings it back. Everything that
        reads the log treats it as a `table.dropped` without purge.

        Data fields:
            purge-requested: Always false: no file is touched.
        """

        TOPIC = "icelog.table.unregistered.v1"

    class SoftDropped(Event, tabular.SoftDropped):
        """`dropTable` in a warehouse with a `soft` delete profile: the name is free at once, but
        the table and its files are kept until `expires-at-ms` (the delay is fixed at drop time).
        Until then it can be undropped; then task `expiration-task-id` makes the drop final
        (`table.expired`).

        Data fields:
            purge-requested: Whether the drop asked for a purge (it runs when the drop expires).
        """

        TOPIC = "icelog.table.soft-dropped.v1"
        purge_requested: bool

    class Undropped(Event, tabular.Undropped):
        """`POST /management/v1/warehouse/{id}/deleted-tabulars/undrop` restored a soft-dropped
        table with its last metadata, under `name` (its old name unless the request gave
        `new-name`). Its expiration task is cancelled in the same append.
        """

        TOPIC = "icelog.table.undropped.v1"

    class Expired(Event, tabular.Expired):
        """A soft drop became final: `reason` is `"expired"` (the expiration task ran) or
        `"dropped"` (a recursive namespace drop removed it). `purge-task-id` is the purge that
        follows when the drop or the namespace drop asked for one.
        """

        TOPIC = "icelog.table.expired.v1"

    class Purged(Event):
        """The purge task of a drop with `purgeRequested=true` deleted the files reachable from the
        table's metadata (data and delete files, manifests, manifest lists, statistics, every
        metadata file the catalog wrote).

        Data fields:
            deleted-files: Files deleted.
            missing-files: Files referenced by the metadata that were already gone.
        """

        TOPIC = "icelog.table.purged.v1"
        deleted_files: int
        missing_files: int

        SETS = fixed(purged=True)

    class ProtectionChanged(Event, protection.ProtectionChanged):
        """Protection switched on or off (`POST
        /management/v1/warehouse/{id}/table/{table-id}/protection`). A protected table cannot be
        dropped.
        """

        TOPIC = "icelog.table.protection-changed.v1"

    if TYPE_CHECKING:
        purged: bool

    @classmethod
    def create(cls, *, table_id: UUID, **fields: Any) -> Table:
        """Create one; `fields` as on `Created`."""
        return cls._create(cls.Created, id=table_id, **fields)

    @classmethod
    def register(cls, *, table_id: UUID, **fields: Any) -> Table:
        """Adopt an existing metadata file; `fields` as on `Registered`."""
        return cls._create(cls.Registered, id=table_id, **fields)

    commit = Tabular.record_change

    def drop(self, *, purge_requested: bool, actor: str, request_id: str) -> None:
        self.ensure_droppable()
        self.trigger_event(
            self.Dropped, purge_requested=purge_requested, actor=actor, request_id=request_id
        )

    def unregister(self, *, actor: str, request_id: str) -> None:
        self.ensure_droppable()
        self.trigger_event(
            self.Unregistered, purge_requested=False, actor=actor, request_id=request_id
        )

    def mark_purged(self, **counts: Any) -> None:
        """Record the purge of the table's files; `counts` as on `Purged`."""
        # Only a table whose drop is final has its files purged, and only once.
        if not self.dropped or self.is_soft_deleted or self.purged:
            raise ConflictError(f"Table {self.dotted} is not awaiting a purge")
        self.trigger_event(self.Purged, **counts)

"""Views: like tables, a name in the shared identifier space pointing at metadata files.

Events carry the first metadata document on create/register and, per replace, the
submitted updates with the time they were applied: folding them with
`domain.view_metadata.apply_view_updates` reproduces every view metadata document.
What views share with tables (events' bodies, rules) is in `domain/tabular.py`.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from icelog.domain import tabular
from icelog.domain.errors import NoSuchViewError
from icelog.domain.tabular import Tabular


class View(Tabular):
    """An Iceberg view registered in a warehouse namespace."""

    TOPIC = "icelog.view"
    KIND = "View"
    CHANGE_EVENT = "Replaced"
    NOT_FOUND = NoSuchViewError

    class Event(tabular.TabularEvent):
        TOPIC = "icelog.view.event.v1"

    class Created(Event, tabular.TabularPlaced):
        """createView: `metadata` is the first document, written to `metadata_location`."""

        TOPIC = "icelog.view.created.v1"

    class Registered(Event, tabular.TabularPlaced):
        """registerView: an existing view metadata file was adopted."""

        TOPIC = "icelog.view.registered.v1"
        registers = True

    class Replaced(Event, tabular.Changed):
        """replaceView: `updates` applied at `applied_at_ms` to the previous document."""

        TOPIC = "icelog.view.replaced.v1"

    class Renamed(Event, tabular.Moved):
        TOPIC = "icelog.view.renamed.v1"

    class Dropped(Event, tabular.Dropped):
        TOPIC = "icelog.view.dropped.v1"

    class SoftDropped(Event, tabular.SoftDropped):
        """Dropped in a soft-delete warehouse: the name is free, the view and its files are
        kept until `expires_at_ms` (delay fixed at drop time), when task
        `expiration_task_id` makes the drop final."""

        TOPIC = "icelog.view.soft-dropped.v1"

    class Undropped(Event, tabular.Undropped):
        """A soft-dropped view restored with its last metadata, under `name` (its old name
        unless the undrop asked for another)."""

        TOPIC = "icelog.view.undropped.v1"

    class Expired(Event, tabular.Expired):
        """A soft drop became final (`reason`: "expired" or "dropped" by a recursive
        namespace drop); `purge_task_id` is the purge that follows, if requested."""

        TOPIC = "icelog.view.expired.v1"

    class ProtectionChanged(Event, tabular.ProtectionChanged):
        """Protection on or off: a protected view cannot be dropped."""

        TOPIC = "icelog.view.protection-changed.v1"

    @classmethod
    def create(cls, *, registered: bool = False, view_id: UUID, **fields: Any) -> View:
        """Create (or, with `registered`, register) a view; `fields` as on the events."""
        event = cls.Registered if registered else cls.Created
        return cls._create(event, id=view_id, **fields)

    replace = Tabular.record_change

    def drop(self, *, actor: str, request_id: str) -> None:
        self.ensure_droppable()
        self.trigger_event(self.Dropped, actor=actor, request_id=request_id)

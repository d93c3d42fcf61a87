"""Views: like tables, a name in the shared identifier space pointing at metadata files.

Events carry the first metadata document on create/register and, per replace, the
submitted updates with the time they were applied: folding them with
`domain.view_metadata.apply_view_updates` reproduces every view metadata document.
What views share with tables (events' bodies, rules) is in `domain/tabular.py`.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from icelog.domain import protection, tabular
from icelog.domain.errors import NoSuchViewError
from icelog.domain.tabular import Tabular


class View(Tabular):
    """An Iceberg view registered in a warehouse namespace."""

    TOPIC = "icelog.view"
    NOT_FOUND = NoSuchViewError

    class Event(tabular.TabularEvent):
        TOPIC = "icelog.view.event.v1"

    class Created(Event, tabular.TabularPlaced):
        """`createView` (`POST …/namespaces/{ns}/views`): `metadata` is the first view metadata
        document, already written to `metadata-location`.

        Data fields:
            metadata: The whole first view metadata document.
            location: The view's base location.
        """

        TOPIC = "icelog.view.created.v1"

    class Registered(Event, tabular.TabularPlaced):
        """`registerView` (`POST …/namespaces/{ns}/register-view`) adopted an existing view metadata
        file. The view gets a new id: it is not the `view-uuid` inside the metadata.

        Data fields:
            metadata: The adopted view metadata document.
            metadata-location: The adopted metadata file.
            location: The view's base location (from the metadata).
        """

        TOPIC = "icelog.view.registered.v1"
        registers = True

    class Replaced(Event, tabular.Changed):
        """`replaceView` (`POST …/namespaces/{ns}/views/{view}`): `updates` were applied at
        `applied-at-ms` to the document at `previous-metadata-location`, producing
        `metadata-location`.
        """

        TOPIC = "icelog.view.replaced.v1"

    class Renamed(Event, tabular.Moved):
        """`renameView` (`POST …/views/rename`). The envelope already has the new name."""

        TOPIC = "icelog.view.renamed.v1"

    class Dropped(Event, tabular.Dropped):
        """`dropView` in a warehouse with a `hard` delete profile, or a recursive namespace drop."""

        TOPIC = "icelog.view.dropped.v1"

    class SoftDropped(Event, tabular.SoftDropped):
        """`dropView` in a warehouse with a `soft` delete profile: the name is free, the view is
        kept until `expires-at-ms`, when task `expiration-task-id` makes the drop final.
        """

        TOPIC = "icelog.view.soft-dropped.v1"

    class Undropped(Event, tabular.Undropped):
        """A soft-dropped view was restored (`…/deleted-tabulars/undrop`) under `name` (its old name
        unless the request gave `new-name`); its expiration task is cancelled.
        """

        TOPIC = "icelog.view.undropped.v1"

    class Expired(Event, tabular.Expired):
        """A soft drop of a view became final: `reason` `"expired"` or `"dropped"` (recursive
        namespace drop). Views have no files to purge, so `purge-task-id` is null.

        Data fields:
            purge-task-id: Always null for views.
        """

        TOPIC = "icelog.view.expired.v1"

    class ProtectionChanged(Event, protection.ProtectionChanged):
        """Protection switched on or off (`…/view/{view-id}/protection`). A protected view cannot be
        dropped.
        """

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

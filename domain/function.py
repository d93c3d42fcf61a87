"""Functions (Iceberg UDFs): a name in a namespace pointing at function metadata files.

Functions have their own identifier space in a namespace (a table and a function may share
a name). Events carry the first metadata document on create and, per replace, the
submitted changes with the time they were applied: folding them with
`domain.function_metadata.apply_function_changes` reproduces every document (ADR 0017).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from icelog.domain import tabular
from icelog.domain.errors import NoSuchFunctionError
from icelog.domain.tabular import Placed, PlacedState, TabularEvent


class Function(PlacedState, Aggregate):
    """An Iceberg function (UDF) in a warehouse namespace."""

    TOPIC = "icelog.function"
    NOT_FOUND = NoSuchFunctionError

    class Event(TabularEvent):
        TOPIC = "icelog.function.event.v1"

    class Created(Event, Placed):
        """A function was created (`POST /management/v1/warehouse/{id}/namespace/{ns-id}/function`):
        `metadata` is the first function metadata document (Iceberg UDF spec), already written to
        `metadata-location`.

        Data fields:
            metadata: The whole first function metadata document.
            location: The function's base location (its metadata files are below it).
        """

        TOPIC = "icelog.function.created.v1"

    class Replaced(Event):
        """A function was replaced (`PUT …/function/{name}`): `changes` were applied at
        `applied-at-ms` to the document at `previous-metadata-location`, producing
        `metadata-location` (ADR 0017).

        Data fields:
            changes: What the request changed, as submitted: `definitions` (each the new current
                version of its signature), `remove-definitions`, `set-current-versions`, `doc`,
                `properties`, `secure`.
            applied-at-ms: When the changes were applied (epoch ms): the new versions' time.
            previous-metadata-location: The metadata file the changes were applied to.
        """

        TOPIC = "icelog.function.replaced.v1"
        changes: dict[str, Any]
        previous_metadata_location: str
        metadata_location: str
        applied_at_ms: int

        COPIES = ("metadata_location",)

    class Dropped(Event, tabular.Dropped):
        """A function was dropped (`DELETE …/function/{name}`, or a recursive namespace drop). Its
        metadata files stay.
        """

        TOPIC = "icelog.function.dropped.v1"

    @classmethod
    def create(cls, *, function_id: UUID, **fields: Any) -> Function:
        """Create a function; `fields` as on `Created`."""
        return cls._create(cls.Created, id=function_id, **fields)

    def replace(self, **change: Any) -> None:
        """The next metadata document; `change` as on `Replaced`, but for the previous
        location (the function's own)."""
        self._change(self.Replaced, previous_metadata_location=self.metadata_location, **change)

    def drop(self, *, actor: str, request_id: str) -> None:
        self._change(self.Dropped, actor=actor, request_id=request_id)

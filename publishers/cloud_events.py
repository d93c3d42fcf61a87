"""Domain events → CloudEvents 1.0 (structured JSON). Pure: no I/O.

Every stored event becomes exactly one CloudEvent:

- `id`: uuid5 of (aggregate id, aggregate version): the same event always gets the same id,
  however often it is re-sent, so consumers (and JetStream) de-duplicate by it;
- `type`: `io.icelog.<aggregate>.<event>.v<N>`, from the event's stored topic;
- `source`: the catalog (configurable); `time`: when the event happened;
- `subject`: what it is about — `ns.table` for tables and views, the dotted namespace, the
  warehouse or project name, the task id;
- `sequence`: the event's position in the log, zero-padded so it also sorts as text;
- extensions (CloudEvents names allow only `[a-z0-9]`): `warehouseid`, `projectid`,
  `tabularid`, `namespace` (dotted), `name`, `aggregateid`, `version` (aggregate version),
  `actor`, `traceid` (the request id);
- `data`: every field of the event (kebab-case keys) plus `aggregate-id` and
  `aggregate-version`, so a consumer needs nothing else: for a commit the requirements,
  updates, previous and new metadata location and the table's version after it.

Ids are unique within one catalog's log. Two catalogs sharing one stream must set distinct
`ICELOG_EVENTS_SOURCE` values and de-duplicate by (source, id) — or, simpler, use a stream each.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid5

from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from icelog.domain.identifiers import ICELOG_NAMESPACE

DEFAULT_SOURCE = "urn:icelog:catalog"
TYPE_PREFIX = "io."
# Fields every stored event has; they become envelope attributes, not data.
_ENVELOPE_FIELDS = ("originator_id", "originator_version", "timestamp", "originator_topic")
_FORMAT = JSONFormat()


@dataclass(frozen=True)
class EventContext:
    """Where an event belongs, as of that event (resolved by publishers.context)."""

    warehouse_id: UUID | None = None
    project_id: UUID | None = None
    tabular_id: UUID | None = None
    namespace: tuple[str, ...] | None = None
    name: str | None = None
    subject: str | None = None


def cloud_event_id(aggregate_id: UUID, version: int) -> str:
    return str(uuid5(ICELOG_NAMESPACE, f"event:{aggregate_id}:{version}"))


def event_type(topic: str) -> str:
    """`icelog.table.committed.v1` → `io.icelog.table.committed.v1`."""
    return TYPE_PREFIX + topic


def sequence(position: int) -> str:
    return f"{position:020d}"


def _plain(value: Any) -> Any:
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def event_data(event: Any) -> dict[str, Any]:
    """The event's own fields, JSON-ready, with kebab-case keys, plus the aggregate's id and
    the version this event gave it (for a commit: the table's version after it)."""
    data = {
        key.replace("_", "-"): _plain(value)
        for key, value in vars(event).items()
        if key not in _ENVELOPE_FIELDS and key not in ("actor", "request_id")
    }
    data["aggregate-id"] = str(event.originator_id)
    data["aggregate-version"] = event.originator_version
    return data


def to_cloud_event(
    event: Any, *, topic: str, position: int, context: EventContext, source: str
) -> CloudEvent:
    aggregate_id: UUID = event.originator_id
    version: int = event.originator_version
    attributes: dict[str, Any] = {
        "id": cloud_event_id(aggregate_id, version),
        "source": source,
        "type": event_type(topic),
        "specversion": "1.0",
        "time": event.timestamp,
        "datacontenttype": "application/json",
        "sequence": sequence(position),
        "aggregateid": str(aggregate_id),
        "version": version,
    }
    if context.subject:
        attributes["subject"] = context.subject
    optional = {
        "warehouseid": context.warehouse_id,
        "projectid": context.project_id,
        "tabularid": context.tabular_id,
        "namespace": ".".join(context.namespace) if context.namespace else None,
        "name": context.name,
        "actor": getattr(event, "actor", None) or None,
        "traceid": getattr(event, "request_id", None) or None,
    }
    attributes.update({k: str(v) for k, v in optional.items() if v is not None})
    return CloudEvent(attributes, event_data(event))


def to_json(event: CloudEvent) -> bytes:
    """Structured content mode: the whole CloudEvent as one JSON document."""
    return _FORMAT.write(event)


def from_json(raw: bytes) -> CloudEvent:
    found = _FORMAT.read(CloudEvent, raw)
    assert isinstance(found, CloudEvent)
    return found

"""What changed, event by event: a table's or view's metadata folded from its own events
(domain/metadata_fold.py), and the difference each event made — schema and partition spec
as field diffs, snapshot summaries, properties — for the console's timelines and its
"as of" pages."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from icelog.domain.metadata_fold import replay_commit
from icelog.domain.table import Table
from icelog.domain.view import View

__all__ = [
    "Change",
    "Step",
    "event_type",
    "fields_of",
    "kind_and_verb",
    "steps",
    "type_filter",
    "type_text",
]

# The one spelling of an event type the console shows: the CloudEvents `type` of
# docs/events.md and of the events API, `io.` + the topic the event is stored under.
TYPE_PREFIX = "io.icelog."


def event_type(name: str) -> str:
    """`icelog.table.committed.v1` (a stored topic) or `table.committed.v1` as the events
    API and the CloudEvents spell it: `io.icelog.table.committed.v1`."""
    if name.startswith(TYPE_PREFIX):
        return name
    if name.startswith("icelog."):
        return "io." + name
    return TYPE_PREFIX + name


def type_filter(typed: str) -> str:
    """The events API's type prefix for what someone typed in a type filter: the shown
    spelling (`io.icelog.table.`) as it is, and the shorter ones people also write
    (`icelog.table.`, `table.committed`) completed to it."""
    text = typed.strip()
    if text.startswith(TYPE_PREFIX) or TYPE_PREFIX.startswith(text):
        return text
    if text.startswith("icelog.") or "icelog.".startswith(text):
        return "io." + text
    return TYPE_PREFIX + text


@dataclass
class Change:
    """One line of a diff: `+` added, `-` removed, `~` changed, `·` a plain fact."""

    sign: str
    text: str


@dataclass
class Step:
    """One event of a table or view, with what it changed and the document after it."""

    version: int
    topic: str
    title: str
    changes: list[Change] = field(default_factory=list)
    document: dict[str, Any] = field(default_factory=dict)
    snapshots: list[dict[str, Any]] = field(default_factory=list)


def type_text(kind: Any) -> str:
    """An Iceberg type in one line: `long`, `struct<…>`, `list<string>`, `map<string, long>`."""
    if isinstance(kind, str):
        return kind
    if not isinstance(kind, dict):
        return str(kind)
    if kind.get("type") == "struct":
        return "struct"
    if kind.get("type") == "list":
        return f"list<{type_text(kind.get('element'))}>"
    if kind.get("type") == "map":
        return f"map<{type_text(kind.get('key'))}, {type_text(kind.get('value'))}>"
    return str(kind.get("type"))


def fields_of(schema: dict[str, Any] | None) -> dict[int, tuple[str, str, bool]]:
    """Every field of a schema, nested ones included: id → (dotted path, type, required)."""
    found: dict[int, tuple[str, str, bool]] = {}

    def walk(kind: Any, prefix: str) -> None:
        if not isinstance(kind, dict):
            return
        if kind.get("type") == "struct":
            for f in kind.get("fields", []):
                path = f"{prefix}{f['name']}"
                found[int(f["id"])] = (path, type_text(f["type"]), bool(f.get("required")))
                walk(f["type"], path + ".")
        elif kind.get("type") == "list":
            eid = kind.get("element-id")
            if eid is not None:
                found[int(eid)] = (
                    f"{prefix}element",
                    type_text(kind.get("element")),
                    bool(kind.get("element-required")),
                )
            walk(kind.get("element"), f"{prefix}element.")
        elif kind.get("type") == "map":
            for part in ("key", "value"):
                pid = kind.get(f"{part}-id")
                if pid is not None:
                    required = part == "key" or bool(kind.get("value-required"))
                    found[int(pid)] = (f"{prefix}{part}", type_text(kind.get(part)), required)
                walk(kind.get(part), f"{prefix}{part}.")

    if schema:
        walk(schema, "")
    return found


def _current(document: dict[str, Any], listing: str, key: str, current: str) -> Any:
    wanted = document.get(current)
    for item in document.get(listing, []) or []:
        if item.get(key) == wanted:
            return item
    return None


def _schema_diff(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    old = fields_of(_current(before, "schemas", "schema-id", "current-schema-id"))
    new = fields_of(_current(after, "schemas", "schema-id", "current-schema-id"))
    changes: list[Change] = []
    for fid, (path, kind, required) in new.items():
        need = " required" if required else ""
        if fid not in old:
            changes.append(Change("+", f"column {path} {kind}{need}"))
        elif old[fid] != new[fid]:
            was_path, was_kind, was_required = old[fid]
            parts = []
            if was_path != path:
                parts.append(f"renamed from {was_path}")
            if was_kind != kind:
                parts.append(f"{was_kind} → {kind}")
            if was_required != required:
                parts.append("now required" if required else "now optional")
            changes.append(Change("~", f"column {path}: {', '.join(parts)}"))
    changes += [
        Change("-", f"column {path} {kind}")
        for fid, (path, kind, _) in old.items()
        if fid not in new
    ]
    return changes


def _spec_text(spec: dict[str, Any] | None, schema: dict[str, Any] | None) -> list[str]:
    names = {fid: path for fid, (path, _, _) in fields_of(schema).items()}
    return [
        f"{f.get('transform')}({names.get(int(f.get('source-id', -1)), f.get('source-id'))})"
        for f in (spec or {}).get("fields", [])
    ]


def _order_text(order: dict[str, Any] | None, schema: dict[str, Any] | None) -> list[str]:
    names = {fid: path for fid, (path, _, _) in fields_of(schema).items()}
    return [
        f"{f.get('transform')}({names.get(int(f.get('source-id', -1)), f.get('source-id'))})"
        f" {f.get('direction')} {f.get('null-order')}"
        for f in (order or {}).get("fields", [])
    ]


def partition_text(document: dict[str, Any]) -> list[str]:
    schema = _current(document, "schemas", "schema-id", "current-schema-id")
    spec = _current(document, "partition-specs", "spec-id", "default-spec-id")
    return _spec_text(spec, schema)


def sort_text(document: dict[str, Any]) -> list[str]:
    schema = _current(document, "schemas", "schema-id", "current-schema-id")
    order = _current(document, "sort-orders", "order-id", "default-sort-order-id")
    return _order_text(order, schema)


def current_schema(document: dict[str, Any]) -> dict[str, Any] | None:
    found: dict[str, Any] | None = _current(document, "schemas", "schema-id", "current-schema-id")
    return found


def _list_diff(what: str, old: list[str], new: list[str]) -> list[Change]:
    if old == new:
        return []
    return [Change("~", f"{what}: [{', '.join(old) or 'none'}] → [{', '.join(new) or 'none'}]")]


def _properties_diff(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    old, new = before.get("properties") or {}, after.get("properties") or {}
    changes = [
        Change("+" if k not in old else "~", f"property {k} = {v}")
        for k, v in new.items()
        if old.get(k) != v
    ]
    changes += [Change("-", f"property {k}") for k in old if k not in new]
    return changes


def _snapshots_added(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    known = {s.get("snapshot-id") for s in before.get("snapshots", []) or []}
    return [s for s in after.get("snapshots", []) or [] if s.get("snapshot-id") not in known]


def _refs_diff(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    old, new = before.get("refs") or {}, after.get("refs") or {}
    changes = []
    for name, ref in new.items():
        if name not in old:
            changes.append(Change("+", f"{ref.get('type')} {name} → {ref.get('snapshot-id')}"))
        elif old[name].get("snapshot-id") != ref.get("snapshot-id"):
            changes.append(Change("~", f"{ref.get('type')} {name} → {ref.get('snapshot-id')}"))
    changes += [Change("-", f"ref {name}") for name in old if name not in new]
    return changes


def summary_text(snapshot: dict[str, Any]) -> str:
    summary = snapshot.get("summary") or {}
    parts = [str(summary.get("operation", "?"))]
    for key in ("added-records", "deleted-records", "added-data-files", "total-records"):
        if key in summary:
            parts.append(f"{key} {summary[key]}")
    return f"snapshot {snapshot.get('snapshot-id')}: " + ", ".join(parts)


def _table_changes(
    before: dict[str, Any], after: dict[str, Any]
) -> tuple[list[Change], list[dict[str, Any]]]:
    changes = _schema_diff(before, after)
    changes += _list_diff("partition spec", partition_text(before), partition_text(after))
    changes += _list_diff("sort order", sort_text(before), sort_text(after))
    added = _snapshots_added(before, after)
    changes += [Change("+", summary_text(s)) for s in added]
    changes += _refs_diff(before, after)
    changes += _properties_diff(before, after)
    if before.get("location") != after.get("location"):
        changes.append(Change("~", f"location {after.get('location')}"))
    return changes, added


def _view_version_text(document: dict[str, Any]) -> list[Change]:
    version = _current(document, "versions", "version-id", "current-version-id") or {}
    found = [Change("·", f"version {version.get('version-id')}")]
    for rep in version.get("representations", []) or []:
        found.append(Change("·", f"{rep.get('dialect')}: {rep.get('sql')}"))
    return found


def steps(events: Iterable[Any]) -> list[Step]:
    """One step per event of a table or view aggregate, in order."""
    found: list[Step] = []
    document: dict[str, Any] = {}
    for event in events:
        topic = getattr(event, "TOPIC", type(event).__name__)
        verb = topic.split(".")[2] if topic.count(".") >= 3 else topic
        step = Step(version=event.originator_version, topic=topic, title=verb)
        if isinstance(event, (Table.Created, Table.Registered, View.Created, View.Registered)):
            document = event.metadata
            step.changes.append(Change("·", f"{verb} at {event.metadata_location}"))
            if isinstance(event, View.Event):
                step.changes += _view_version_text(document)
            else:
                schema = current_schema(document)
                step.changes += [
                    Change("+", f"column {path} {kind}")
                    for path, kind, _ in fields_of(schema).values()
                ]
                spec = partition_text(document)
                if spec:
                    step.changes.append(Change("·", f"partition spec [{', '.join(spec)}]"))
        elif isinstance(event, Table.Committed):
            after = replay_commit(event, document)
            step.changes, step.snapshots = _table_changes(document, after)
            document = after
        elif isinstance(event, View.Replaced):
            after = replay_commit(event, document)
            step.changes = _view_version_text(after) + _properties_diff(document, after)
            document = after
        elif isinstance(event, (Table.Renamed, View.Renamed)):
            step.changes.append(
                Change("~", "renamed to " + ".".join([*event.namespace, event.name]))
            )
        elif isinstance(event, (Table.Undropped, View.Undropped)):
            step.changes.append(
                Change("~", "restored as " + ".".join([*event.namespace, event.name]))
            )
        elif hasattr(event, "protected"):
            step.changes.append(Change("~", f"protected: {event.protected}"))
        step.document = document
        found.append(step)
    return found


# -- namespaces and warehouses ------------------------------------------------------------------
def kind_and_verb(type_name: str) -> tuple[str, str]:
    """`io.icelog.namespace.properties-updated.v1` → (`namespace`, `properties-updated`)."""
    name = event_type(type_name).removeprefix(TYPE_PREFIX)
    if name.rsplit(".", 1)[-1][:1] == "v" and name.rsplit(".", 1)[-1][1:].isdigit():
        name = name.rsplit(".", 1)[0]
    kind, _, verb = name.partition(".")
    return kind, verb


def _profile_text(profile: Any) -> str:
    if not isinstance(profile, dict):
        return str(profile)
    if profile.get("type") == "soft":
        return f"soft ({profile.get('expiration-seconds')} s)"
    return str(profile.get("type", "?"))


def _dict_diff(what: str, old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    changes = [
        Change("+", f"{what}{k} = {v}")
        if k not in old
        else Change("~", f"{what}{k}: {old[k]} → {v}")
        for k, v in sorted(new.items())
        if old.get(k) != v
    ]
    changes += [Change("-", f"{what}{k} (was {old[k]})") for k in sorted(old) if k not in new]
    return changes


# What a table's, view's or function's own event means to the namespace it is in.
_ARRIVALS = ("created", "registered", "undropped")
_DEPARTURES = ("dropped", "soft-dropped", "unregistered")


def describe_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each event of a namespace's or warehouse's history changed, from the event data
    alone (in log order, as the events API answers them): properties set, changed and
    removed (with the values before, folded from the earlier events), children created and
    dropped by name, warehouse renames, delete profiles, storage and protection. Each event
    comes back with `title` and `changes`; events it has nothing to add to keep their type."""
    names: dict[str, str] = {}  # aggregate id → its name, from any event that named it
    for e in events:
        subject = e.get("subject")
        if subject:
            names.setdefault(str(e.get("aggregate-id")), subject)
            if e.get("tabular-id"):
                names.setdefault(str(e["tabular-id"]), subject)
    props: dict[str, dict[str, Any]] = {}  # namespace aggregate → its properties so far
    state: dict[str, dict[str, Any]] = {}  # warehouse aggregate → name, profiles so far
    found = []
    for e in events:
        kind, verb = kind_and_verb(str(e.get("type", "")))
        data = e.get("data") or {}
        agg = str(e.get("aggregate-id"))
        subject = e.get("subject") or names.get(agg, "")
        title = f"{kind} {verb}"
        changes: list[Change] = []
        if kind == "namespace":
            title = f"namespace {subject} {verb.replace('-', ' ')}"
            if verb in ("created", "recreated"):
                new = dict(data.get("properties") or {})
                changes = [Change("+", f"namespace {subject}"), *_dict_diff("property ", {}, new)]
                props[agg] = new
            elif verb == "dropped":
                changes = [Change("-", f"namespace {subject}")]
            elif verb == "properties-updated":
                old = props.get(agg, {})
                new = {**old, **(data.get("updated") or {})}
                for key in data.get("removed") or []:
                    new.pop(key, None)
                changes = _dict_diff("property ", old, new)
                # Removed keys whose value is unknown (an older event off this page).
                changes += [
                    Change("-", f"property {k}") for k in data.get("removed") or [] if k not in old
                ]
                props[agg] = new
            elif verb in ("child-added", "child-removed"):
                # Written before ADR 0018, beside the child's own event, which says it.
                what = data.get("child-kind", "child")
                if what == "soft-deleted":
                    what = "soft-deleted table or view"
                title = (
                    f"namespace {subject}: {what} {'added' if verb == 'child-added' else 'removed'}"
                )
            elif verb == "protection-changed":
                on = bool(data.get("protected"))
                changes = [Change("~", "protected" if on else "no longer protected")]
        elif kind == "warehouse":
            held = state.setdefault(agg, {})
            title = f"warehouse {verb.replace('-', ' ')}"
            if verb == "created":
                held.update(
                    name=data.get("name"),
                    storage=data.get("storage-profile") or {},
                    delete=data.get("delete-profile"),
                )
                changes = [
                    Change("+", f"name {data.get('name')}"),
                    Change("+", f"delete profile {_profile_text(data.get('delete-profile'))}"),
                    *_dict_diff("storage ", {}, dict(data.get("storage-profile") or {})),
                ]
            elif verb == "renamed":
                before = held.get("name")
                changes = [Change("~", f"name: {before} → {data.get('name')}" if before
                                  else f"name → {data.get('name')}")]  # fmt: skip
                held["name"] = data.get("name")
            elif verb in ("namespace-added", "namespace-removed"):
                child = names.get(str(data.get("namespace-id")), str(data.get("namespace-id")))
                sign = "+" if verb == "namespace-added" else "-"
                changes = [Change(sign, f"namespace {child}")]
            elif verb == "delete-profile-changed":
                before = held.get("delete")
                after = data.get("delete-profile")
                text = f"delete profile: {_profile_text(before)} → {_profile_text(after)}"
                changes = [
                    Change("~", text if before else f"delete profile → {_profile_text(after)}")
                ]
                held["delete"] = after
            elif verb == "storage-profile-changed":
                new = dict(data.get("storage-profile") or {})
                changes = _dict_diff("storage ", held.get("storage") or {}, new)
                held["storage"] = new
            elif verb == "protection-changed":
                on = bool(data.get("protected"))
                changes = [Change("~", "protected" if on else "no longer protected")]
        elif kind in ("table", "view", "function"):
            title = f"{kind} {subject} {verb.replace('-', ' ')}"
            if verb in _ARRIVALS:
                changes = [Change("+", f"{kind} {subject}")]
            elif verb in _DEPARTURES:
                changes = [Change("-", f"{kind} {subject}")]
            elif verb == "renamed":
                before = ".".join([*(data.get("from-namespace") or []), str(data.get("from-name"))])
                after = ".".join([*(data.get("namespace") or []), str(data.get("name"))])
                changes = [Change("~", f"{kind} {before} → {after}")]
        found.append({**e, "title": title, "changes": changes})
    return found


def task_attempts(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A task's events (the management API's logged events of its aggregate), oldest first,
    as the rows of its attempt history: what happened, which attempt and worker, and the
    error, the time it is due (again), or the result."""
    rows: list[dict[str, Any]] = []
    for event in events:
        data = event.get("data", {})
        what = str(event.get("type", "")).removeprefix("io.icelog.task.").rsplit(".v", 1)[0]
        detail, due = "", None
        if what == "scheduled":
            detail, due = f"at most {data.get('max-attempts')} attempts", data.get("due-at-ms")
        elif what == "attempt-failed":
            detail = str(data.get("error", ""))
            if data.get("final"):
                detail += " (no attempts left)"
            else:
                due = data.get("retry-at-ms")
        elif what == "succeeded":
            result = sorted(data.get("result", {}).items())
            detail = ", ".join(f"{k}: {json.dumps(v)}" for k, v in result)
        elif what == "cancelled":
            detail = str(data.get("reason", ""))
        elif what == "attempt-abandoned":
            detail = "the worker stopped without an outcome: due again at once"
        rows.append(
            {
                "position": event.get("position"),
                "time": event.get("time", ""),
                "actor": event.get("actor"),
                "what": what,
                "attempt": data.get("attempt"),
                "worker": data.get("worker"),
                "detail": detail,
                "due": due,
            }
        )
    return rows

r"""Generate docs/events.md, the change-event reference, from three sources:

- scripts/events_doc.template.md: the envelope, the delivery guarantees, the sinks, the
  Iceberg events API, and one introduction per aggregate (`<!-- events: <aggregate> -->`
  marks where its event types go);
- the docstrings of the event classes in domain/*.py: when each event is appended, and a
  `Data fields:` paragraph saying what its data fields mean (the template's last comment
  says the meaning of fields many events share);
- one real example per event type, recorded in scripts/events_doc.examples.json from a
  scratch catalog driven through its APIs (scripts/events_scenario.py), mapped exactly as
  `icelog events tail --json` maps stored events.

    .venv/bin/python scripts/events_doc.py             # writes docs/events.md
    .venv/bin/python scripts/events_doc.py --check     # exit 1 when it is not up to date
    .venv/bin/python scripts/events_doc.py --record    # new examples first (real ids, times)

The script refuses to write the document when an event class has no example, no docstring
or an undescribed data field: record again after adding an event type, and describe it in
its class's docstring.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import re
import sys
import types
import typing
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from string import Template
from typing import Any

from eventsourcing.domain import DomainEvent

from icelog import domain
from icelog.api.settings import PREFIX, Settings
from icelog.api.settings_table import SETTINGS

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "events.md"
TEMPLATE = ROOT / "scripts" / "events_doc.template.md"
EXAMPLES = ROOT / "scripts" / "events_doc.examples.json"
ELLIPSIS = "…"
MARKER = re.compile(r"^<!-- events: ([a-z-]+) -->\n", re.MULTILINE)
COMMON = re.compile(r"^<!-- Data fields an event's docstring.*?:\n(.*?)^-->\n", re.M | re.S)

# Event types older releases wrote and this one only reads: no scenario produces them.
LEGACY_TOPICS = (
    "icelog.idempotency-key.recorded.v1",
    "icelog.idempotency-key.rerecorded.v1",
    "icelog.namespace.child-added.v1",
    "icelog.namespace.child-removed.v1",
)

# When one example is better than the first one of its type.
PREFER: dict[str, Callable[[dict[str, Any]], bool]] = {
    "io.icelog.name-claim.claimed.v1": lambda e: e["data"]["kind"] == "table",
    "io.icelog.table.expired.v1": lambda e: (
        e["data"]["reason"] == "expired" and e["data"]["purge-task-id"] is not None
    ),
    "io.icelog.task.scheduled.v1": lambda e: e["data"]["queue"] == "tabular-purge",
    "io.icelog.task.succeeded.v1": lambda e: "deleted-files" in e["data"]["result"],
    "io.icelog.project.created.v1": lambda e: e["name"] != "default",
    "io.icelog.warehouse.created.v1": lambda e: e["name"] != "default",
}

# The context attributes not every event has: which ones each aggregate's events carry.
OPTIONAL_ATTRIBUTES: tuple[str, ...] = ("subject", "warehouseid", "projectid", "tabularid")
OPTIONAL_ATTRIBUTES += ("namespace", "name", "actor", "traceid")
EXAMPLE = re.compile(r"\$\{ex_(\w+)\}")  # the envelope's attributes, from the example


def stored_event_classes() -> dict[str, type[Any]]:
    """topic → class for every concrete stored event class in domain/*.py, in the order
    they are defined (the `….event.v1` base classes are abstract: never stored)."""
    found: dict[str, type[Any]] = {}
    for info in pkgutil.iter_modules(domain.__path__, "icelog.domain."):
        module = importlib.import_module(info.name)
        for cls in _classes(module):
            topic = cls.__dict__.get("TOPIC")
            if (
                isinstance(topic, str)
                and issubclass(cls, DomainEvent)
                and not topic.endswith(".event.v1")
            ):
                found[topic] = cls
    return found


def _classes(owner: Any) -> Iterator[type[Any]]:
    for value in vars(owner).values():
        if inspect.isclass(value) and value.__module__ == getattr(owner, "__name__", None):
            yield value
            yield from _nested(value)


def _nested(cls: type[Any]) -> Iterator[type[Any]]:
    for value in vars(cls).values():
        if inspect.isclass(value) and value.__qualname__.startswith(cls.__qualname__ + "."):
            yield value
            yield from _nested(value)


def aggregate_of(topic: str) -> str:
    """`icelog.name-claim.claimed.v1` → `name-claim`."""
    return topic.split(".")[1]


def described(cls: type[Any]) -> tuple[str, dict[str, str]] | None:
    """What the class's docstring says: when the event is appended (one paragraph), and
    the meaning of data fields after `Data fields:`, one `key: text` a field — its own,
    else as a base class it shares its body with says (`domain/tabular.py`). None: the
    class has no docstring of its own (a dataclass makes one from the signature)."""
    own = _docstring(cls)
    if own is None:
        return None
    fields: dict[str, str] = {}
    for base in reversed(cls.__mro__):  # the class itself last: its own words win
        fields.update((_docstring(base) or ("", {}))[1])
    return own[0], fields


def _docstring(cls: type[Any]) -> tuple[str, dict[str, str]] | None:
    doc = cls.__dict__.get("__doc__") or ""
    if not doc or doc.startswith(cls.__name__ + "("):
        return None
    when, _, listed = inspect.cleandoc(doc).partition("\n\nData fields:\n")
    fields: dict[str, str] = {}
    for line in listed.splitlines():
        if line.startswith("    ") and not line.startswith("     "):
            key, _, text = line.strip().partition(": ")
            fields[key] = text
        else:
            fields[key] += " " + line.strip()
    return " ".join(when.split()), fields


# -------------------------------------------------------------------------------------------
# Recording examples
# -------------------------------------------------------------------------------------------


def choose_examples(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """type → the example: the first event of the type, or the first one PREFER likes."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_type.setdefault(event["type"], []).append(event)
    chosen = {}
    for type_, found in by_type.items():
        prefer = PREFER.get(type_)
        liked = [e for e in found if prefer(e)] if prefer else []
        chosen[type_] = abbreviated((liked or found)[0])
    return chosen


def abbreviated(event: dict[str, Any]) -> dict[str, Any]:
    """Long members of a metadata document become "…" (the only abbreviation allowed)."""
    document = event["data"].get("metadata")
    if not isinstance(document, dict):
        return event
    short = {
        key: ([ELLIPSIS] if isinstance(value, list) else {ELLIPSIS: ELLIPSIS})
        if isinstance(value, (list, dict)) and len(json.dumps(value)) > 240
        else value
        for key, value in document.items()
    }
    return {**event, "data": {**event["data"], "metadata": short}}


def presence(events: list[dict[str, Any]]) -> dict[str, list[str]]:
    """aggregate → for each optional attribute: always, sometimes or — (never)."""
    found: dict[str, list[str]] = {}
    for aggregate in dict.fromkeys(aggregate_of(e["type"].removeprefix("io.")) for e in events):
        mine = [e for e in events if aggregate_of(e["type"].removeprefix("io.")) == aggregate]
        found[aggregate] = []
        for attribute in OPTIONAL_ATTRIBUTES:
            have = sum(1 for e in mine if attribute in e)
            found[aggregate].append("always" if have == len(mine) else "sometimes" if have else "—")
    return found


def record() -> None:
    import events_scenario  # noqa: PLC0415 - it starts a catalog: only when recording

    events = events_scenario.collect_events(events_scenario.DEFAULT_WORKDIR)
    recorded = {"presence": presence(events), "examples": choose_examples(events)}
    text = json.dumps(recorded, ensure_ascii=False, indent=1)
    EXAMPLES.write_text(text + "\n", encoding="utf-8")


# -------------------------------------------------------------------------------------------
# Rendering
# -------------------------------------------------------------------------------------------


def json_type(hint: Any) -> str:
    if hint is type(None):
        return "null"
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(json_type(arg) for arg in typing.get_args(hint))
    if origin is list:
        (item,) = typing.get_args(hint)
        return f"array of {json_type(item)}s"
    if origin is dict or hint is dict:
        return "object"
    names = {str: "string", int: "integer", bool: "boolean", uuid.UUID: "UUID string"}
    return names.get(hint, "any")


def field_types(cls: type[Any]) -> dict[str, str]:
    hints = typing.get_type_hints(cls)
    found = {name.replace("_", "-"): json_type(hint) for name, hint in hints.items()}
    # Added to every event's data by publishers.cloud_events.event_data (not event fields).
    return {**found, "aggregate-id": "UUID string", "aggregate-version": "integer"}


def pretty(value: Any, indent: int = 0, width: int = 100) -> str:
    """JSON, indented by 2, with containers that fit on their line kept on one line."""
    flat = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, (dict, list)) or not value or indent + len(flat) <= width - 20:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [
            f"{pad}{json.dumps(k, ensure_ascii=False)}: {pretty(v, indent + 2, width)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + pretty(v, indent + 2, width) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def anchor(heading: str) -> str:
    return "".join(c for c in heading.lower() if c.isalnum() or c in "-_ ").replace(" ", "-")


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def render(classes: dict[str, type[Any]], recorded: dict[str, Any], template: str) -> str:
    examples: dict[str, dict[str, Any]] = recorded["examples"]
    common_match = COMMON.search(template)
    assert common_match is not None, "the template lacks its comment of shared data fields"
    common = dict(line.split(": ", 1) for line in common_match.group(1).splitlines())
    template = template[: common_match.start()]
    order = MARKER.findall(template)
    problems = []
    for topic, cls in classes.items():
        about = described(cls)
        if about is None:
            problems.append(f"{topic} ({cls.__qualname__}): no docstring")
        if aggregate_of(topic) not in order:
            problems.append(f"{topic}: no `<!-- events: {aggregate_of(topic)} -->` in template")
        if topic in LEGACY_TOPICS or about is None:
            continue
        if "io." + topic not in examples:
            problems.append(f"{topic}: no recorded example (run with --record)")
            continue
        for key in examples["io." + topic]["data"]:
            if key not in about[1] and key not in common:
                problems.append(f"{topic}: data field {key!r} is not described")
    if problems:
        raise SystemExit("cannot document every event:\n  " + "\n  ".join(problems))

    topics = sorted(classes, key=lambda t: order.index(aggregate_of(t)))
    titles = {
        m.group(1): re.findall(r"^## (.+)$", template[: m.start()], re.M)[-1]
        for m in MARKER.finditer(template)
    }
    sections = {
        aggregate: "\n".join(
            (legacy_section if t in LEGACY_TOPICS else section)(t, classes[t], examples, common)
            for t in topics
            if aggregate_of(t) == aggregate
        )
        for aggregate in order
    }
    document = MARKER.sub(lambda m: sections[m.group(1)], template)
    values = preamble(recorded, order, titles, topics)
    commit = examples["io.icelog.table.committed.v1"]
    for a in EXAMPLE.findall(document):
        values[f"ex_{a}"] = f"`{commit[a]}`" if a in commit else "—"
    return Template(document).substitute(values).rstrip() + "\n"


def legacy_section(
    topic: str, cls: type[Any], examples: dict[str, Any], common: dict[str, str]
) -> str:
    when, fields = described(cls) or ("", {})
    names = ", ".join(f"`{key}`" for key in fields)
    return (
        f"### io.{topic}\n\nclass `{cls.__module__}.{cls.__qualname__}` · no longer appended\n\n"
        f"{when}\n\n" + (f"Data fields: {names}.\n" if names else "No data fields.\n")
    )


def section(topic: str, cls: type[Any], examples: dict[str, Any], common: dict[str, str]) -> str:
    when, fields = described(cls) or ("", {})
    example = examples["io." + topic]
    types_ = field_types(cls)
    prefix = Settings.from_env({}).publish.nats_subject_prefix
    lines = [
        f"### io.{topic}",
        "",
        f"NATS subject `{prefix}.{topic.removeprefix('icelog.')}`"
        f" · class `{cls.__module__}.{cls.__qualname__}`",
        "",
        when,
        "",
    ]
    if example["data"]:
        lines += ["| data field | type | meaning |", "|---|---|---|"]
        for key in example["data"]:
            meaning = fields.get(key) or common[key]
            lines.append(f"| `{key}` | {types_.get(key, 'any')} | {cell(meaning)} |")
    else:
        lines.append("No data fields (`data` is `{}`).")
    lines += ["", "```json", pretty(example), "```", ""]
    return "\n".join(lines).replace("$", "$$")


def preamble(
    recorded: dict[str, Any], order: list[str], titles: dict[str, str], topics: list[str]
) -> dict[str, str]:
    """The template's placeholders."""
    publish = Settings.from_env({}).publish
    index = []
    for aggregate in order:
        links = [
            f"[`{t.removeprefix('icelog.' + aggregate + '.')}`](#{anchor('io.' + t)})"
            for t in topics
            if aggregate_of(t) == aggregate
        ]
        index.append(f"| {titles[aggregate]} | {' · '.join(links)} |")
    presence = [
        "| aggregate | " + " | ".join(f"`{a}`" for a in OPTIONAL_ATTRIBUTES) + " |",
        "|---|" + "---|" * len(OPTIONAL_ATTRIBUTES),
    ]
    presence += [
        f"| {a} | " + " | ".join(recorded["presence"][a]) + " |"
        for a in order
        if a in recorded["presence"]
    ]
    settings = [
        f"| `{PREFIX}{s.name}` | {s.kind.describe()} | {s.default_text()} | {cell(s.doc)} |"
        for s in SETTINGS
        if s.fields[0].startswith("publish.")
    ]
    return {
        "count": str(len(topics)),
        "index": "\n".join(index),
        "presence": "\n".join(presence),
        "settings": "\n".join(settings),
        "nats_stream": publish.nats_stream,
        "prefix": publish.nats_subject_prefix,
        "kafka_topic": publish.kafka_topic,
        "window": _num(publish.nats_duplicate_window_seconds),
    }


def generate() -> str:
    recorded = json.loads(EXAMPLES.read_text(encoding="utf-8"))
    return render(stored_event_classes(), recorded, TEMPLATE.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--output", default=str(OUTPUT), help="file, or - for stdout")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--record", action="store_true", help="record new examples first")
    args = parser.parse_args(argv)
    if args.record:
        record()
    document = generate()
    if args.check:
        if Path(args.output).read_text(encoding="utf-8") != document:
            print(f"{args.output} is out of date: run scripts/events_doc.py", file=sys.stderr)
            return 1
    elif args.output == "-":
        sys.stdout.write(document)
    else:
        Path(args.output).write_text(document, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

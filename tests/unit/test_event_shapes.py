"""The stored format of every event and aggregate class is pinned here.

A stored event is found again by its topic and rebuilt from its attributes; a snapshot by
its aggregate's topic. Moving an event class, renaming it, or adding, removing or
reordering one of its fields would leave logs written before unreadable or different
when written again, so any such change must fail this test first and come with an
upcaster (and a new `class_version`) instead. Regenerate the pinned file only for a
deliberate, upcast change: `python tests/unit/test_event_shapes.py > tests/unit/event_shapes.json`.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eventsourcing.domain import BaseAggregate, DomainEvent
from eventsourcing.utils import TopicError, resolve_topic

from icelog import domain

PINNED = Path(__file__).with_name("event_shapes.json")


def _classes_in(owner: Any, module: str) -> Iterator[type[Any]]:
    for value in vars(owner).values():
        if inspect.isclass(value) and value.__module__ == module and value is not owner:
            yield value
            yield from _classes_in(value, module)


def shapes() -> dict[str, dict[str, Any]]:
    """Every class with an explicit topic in domain/: where it lives, what the topic
    resolves to, its fields in order (events) and its class_version."""
    found: dict[str, dict[str, Any]] = {}
    for info in pkgutil.iter_modules(domain.__path__, "icelog.domain."):
        module = importlib.import_module(info.name)
        for cls in _classes_in(module, module.__name__):
            topic = cls.__dict__.get("TOPIC")
            if not isinstance(topic, str):
                continue
            if issubclass(cls, DomainEvent):
                fields = [f.name for f in dataclasses.fields(cls)]
            elif issubclass(cls, BaseAggregate):
                # None: a snapshot's state is the aggregate's __dict__, and a generated
                # __init__ (from annotations on the class or a base) would change it.
                fields = (
                    [f.name for f in dataclasses.fields(cls)]
                    if dataclasses.is_dataclass(cls)
                    else []
                )
            else:
                continue
            try:
                resolved: Any = resolve_topic(topic)
            except TopicError:  # an aggregate's `Event` base, when nothing stores under it
                resolved = None
            found[topic] = {
                "class": f"{cls.__module__}:{cls.__qualname__}",
                # What a stored record with this topic is read back as (an aggregate's
                # `Created` without a topic of its own takes its `Event`'s).
                "resolves": resolved and f"{resolved.__module__}:{resolved.__qualname__}",
                "fields": fields,
                "class_version": getattr(cls, "class_version", 1),
            }
    return dict(sorted(found.items()))


def test_every_topic_keeps_its_class_and_fields() -> None:
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))
    assert shapes() == pinned


if __name__ == "__main__":
    json.dump(shapes(), sys.stdout, indent=1)
    sys.stdout.write("\n")

"""docs/events.md documents every stored event type (regenerate it with
`.venv/bin/python scripts/events_doc.py --record` after adding one), and nothing that no longer
exists; it is what scripts/events_doc.py renders from the event classes' docstrings, its
template and the recorded examples."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import pkgutil
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eventsourcing.domain import DomainEvent

from icelog import domain
from icelog.domain.table import Table

DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"
HEADING = re.compile(r"^### (io\.icelog\.\S+)$", re.MULTILINE)


def _classes_in(owner: Any, module: str) -> Iterator[type[Any]]:
    for value in vars(owner).values():
        if inspect.isclass(value) and value.__module__ == module and value is not owner:
            yield value
            yield from _classes_in(value, module)


def stored_event_topics() -> dict[str, type[Any]]:
    """Every concrete event class in domain/*.py, nested ones included, by its TOPIC. The
    `….event.v1` classes are the abstract bases of each aggregate's events: never stored."""
    found: dict[str, type[Any]] = {}
    for info in pkgutil.iter_modules(domain.__path__, "icelog.domain."):
        module = importlib.import_module(info.name)
        for cls in _classes_in(module, module.__name__):
            topic = cls.__dict__.get("TOPIC")
            if (
                isinstance(topic, str)
                and issubclass(cls, DomainEvent)
                and not topic.endswith(".event.v1")
            ):
                found[topic] = cls
    return found


def documented() -> dict[str, str]:
    """CloudEvent type → its section of the doc."""
    text = DOC.read_text(encoding="utf-8")
    headings = list(HEADING.finditer(text))
    return {
        match.group(1): text[match.end() : nxt.start() if nxt else len(text)]
        for match, nxt in zip(headings, [*headings[1:], None], strict=True)
    }


def test_the_walk_finds_the_event_classes() -> None:
    topics = stored_event_topics()
    assert topics["icelog.table.committed.v1"] is Table.Committed
    assert "icelog.table.event.v1" not in topics
    assert {t.split(".")[1] for t in topics} >= {
        "table",
        "view",
        "namespace",
        "warehouse",
        "project",
        "name-claim",
        "idempotency-key",
        "server",
        "task",
    }
    assert all(re.fullmatch(r"icelog\.[a-z-]+\.[a-z-]+\.v\d+", t) for t in topics), topics


def test_every_stored_event_type_is_documented() -> None:
    sections = documented()
    missing = sorted(
        f"io.{topic} ({cls.__module__}.{cls.__qualname__})"
        for topic, cls in stored_event_topics().items()
        if f"io.{topic}" not in sections
    )
    assert not missing, (
        "docs/events.md lacks these event types; describe them in their classes' docstrings "
        "and run `.venv/bin/python scripts/events_doc.py --record`:\n  " + "\n  ".join(missing)
    )


def test_no_documented_type_is_stale() -> None:
    known = {f"io.{topic}" for topic in stored_event_topics()}
    assert sorted(set(documented()) - known) == []


def test_each_section_has_a_real_example_of_its_type() -> None:
    for type_, section in documented().items():
        if "no longer appended" in section:  # read from older logs, never written now
            continue
        block = re.search(r"```json\n(.*?)\n```", section, re.DOTALL)
        assert block is not None, f"{type_}: no example"
        example = json.loads(block.group(1))
        assert example["type"] == type_
        assert example["specversion"] == "1.0"
        assert re.fullmatch(r"\d{20}", example["sequence"]), example["sequence"]
        assert isinstance(example["data"], dict)


def test_the_committed_document_is_the_generated_one() -> None:
    path = DOC.parents[1] / "scripts" / "events_doc.py"
    spec = importlib.util.spec_from_file_location("events_doc", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["events_doc"] = module
    spec.loader.exec_module(module)
    generated = module.generate()
    assert DOC.read_text(encoding="utf-8") == generated, (
        "docs/events.md is not what scripts/events_doc.py renders: run "
        "`.venv/bin/python scripts/events_doc.py`"
    )

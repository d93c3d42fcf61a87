"""`icelog namespaces`, `icelog tables` and `icelog history`: the catalog at a terminal.

Read straight from the catalog's database (the same settings as `icelog serve`; no server
needed), as `icelog events tail` and `icelog catalog at` read it: the read model for what
is there now, the event index and the table's own events for its history — the facts the
console's table timeline shows (api/console/history.py says what each event changed).
Each command prints lines for a person, or one JSON document with `--json`.

Exit status: 0; 1 when the warehouse, namespace, table or view named does not exist;
2 for a name that cannot be one (an empty level, a malformed id).
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import closing
from typing import Any
from uuid import UUID

from icelog.api.console.history import steps
from icelog.api.event_log import Indexer
from icelog.api.services import DEFAULT_WAREHOUSE_NAME, Services
from icelog.api.settings import Settings
from icelog.domain.errors import BadRequestError
from icelog.domain.identifiers import NIL_UUID, NamespaceName
from icelog.domain.table import Table
from icelog.domain.view import View
from icelog.projections.event_index import EventFilter

_PAGE = 1000
_TYPE_PREFIX = "io.icelog."


class Refused(Exception):
    """The command cannot answer: said on stderr, ending with `status`."""

    status = 1


class NotFound(Refused):
    """What was named does not exist (exit 1)."""


class Malformed(Refused):
    """What was given cannot be a name or an id (exit 2)."""

    status = 2


def add_commands(sub: Any) -> None:
    """The three commands, on the `icelog` parser's subcommands."""
    namespaces = sub.add_parser("namespaces", help="list a warehouse's namespaces")
    namespaces.add_argument("parent", nargs="?", default=None, help="only inside this (a.b)")
    namespaces.add_argument(
        "-r", "--recursive", action="store_true", help="nested namespaces too, at any depth"
    )
    _common(namespaces)
    namespaces.set_defaults(run=_run(_namespaces))
    tables = sub.add_parser("tables", help="list the tables and views of a namespace")
    tables.add_argument("namespace", help="the namespace (a.b)")
    _common(tables)
    tables.set_defaults(run=_run(_tables))
    history = sub.add_parser("history", help="what happened to a table or view, event by event")
    history.add_argument("name", metavar="NAMESPACE.NAME", help="the table or view (a.b.t)")
    history.add_argument(
        "-n", "--last", type=int, default=None, metavar="N", help="only the last N events"
    )
    _common(history)
    history.set_defaults(run=_run(_history))


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-w",
        "--warehouse",
        default=DEFAULT_WAREHOUSE_NAME,
        help=f"warehouse name or id (default: {DEFAULT_WAREHOUSE_NAME})",
    )
    parser.add_argument(
        "--project",
        default=str(NIL_UUID),
        help="project id of a warehouse named (default: the default project)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document, for scripts")


def _run(command: Any) -> Any:
    """The command on built services, with its errors as exit statuses."""

    def run(args: argparse.Namespace, settings: Settings) -> int:
        try:
            with closing(Services.build(settings)) as services:
                document, lines = command(args, services)
        except Refused as exc:
            print(f"icelog: {shown(str(exc))}", file=sys.stderr)
            return exc.status
        if args.json:
            print(json.dumps(document, indent=2))  # escapes every control character
        else:
            for line in lines:
                print(shown(line))
        return 0

    return run


def shown(text: str) -> str:
    """`text` for a terminal: names, properties and actors are anyone's text, and an
    escape sequence in one (ESC, CSI, BEL, a bidi override) would act on the operator's
    terminal. Each character that is not printable is written as its Python escape."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# -- names -------------------------------------------------------------------------------------
def namespace_name(text: str) -> NamespaceName:
    """`a.b` as a namespace (a level cannot contain a dot here)."""
    levels = tuple(text.split("."))
    if not all(levels):
        raise Malformed(f"{text!r} is not a namespace (levels joined by dots, none empty)")
    try:
        return NamespaceName(levels)
    except BadRequestError as exc:
        raise Malformed(str(exc)) from None


def _warehouse(services: Services, args: argparse.Namespace) -> dict[str, Any]:
    """The warehouse named by `--warehouse` (a name in `--project`, or an id)."""
    given = args.warehouse
    try:
        by_id = UUID(given)
    except ValueError:
        by_id = None
    if by_id is not None:
        found = services.queries.warehouse(str(by_id))
        if found is None:
            raise NotFound(f"no warehouse with id {by_id}")
        return found
    try:
        project = str(UUID(args.project))
    except ValueError:
        raise Malformed(f"--project must be a project id (a UUID), got {args.project!r}") from None
    found = services.queries.warehouse_by_name(project, given)
    if found is None:
        where = "the default project" if project == str(NIL_UUID) else f"project {project}"
        raise NotFound(f"no warehouse named {given!r} in {where}")
    return found


def _existing_namespace(services: Services, warehouse: dict[str, Any], text: str) -> NamespaceName:
    ns = namespace_name(text)
    if not services.queries.namespace_exists(str(warehouse["id"]), ns):
        raise NotFound(f"no namespace {ns.dotted} in warehouse {warehouse['name']}")
    return ns


def _head(warehouse: dict[str, Any]) -> dict[str, Any]:
    return {"warehouse": warehouse["name"], "warehouse-id": str(warehouse["id"])}


# -- namespaces --------------------------------------------------------------------------------
def _namespaces(args: argparse.Namespace, services: Services) -> tuple[dict[str, Any], list[str]]:
    warehouse = _warehouse(services, args)
    wid = str(warehouse["id"])
    parent = None if args.parent is None else _existing_namespace(services, warehouse, args.parent)
    found: list[NamespaceName] = []

    def walk(under: NamespaceName | None) -> None:  # depth first, each level by name
        children, _ = services.queries.list_namespaces(wid, under, None, None)
        for levels in children:
            found.append(NamespaceName(tuple(levels)))
            if args.recursive:
                walk(found[-1])

    walk(parent)
    counts = [_counts(services.queries.namespace_contents(wid, ns.key)) for ns in found]
    document = {
        **_head(warehouse),
        "parent": None if parent is None else parent.as_list(),
        "namespaces": [
            {"namespace": ns.as_list(), **held} for ns, held in zip(found, counts, strict=True)
        ],
    }
    width = max((len(ns.dotted) for ns in found), default=0)
    lines = [
        f"{ns.dotted:<{width}}  {_contents_text(held)}"
        for ns, held in zip(found, counts, strict=True)
    ]
    if not found:
        lines = [f"(no namespaces in {_where(warehouse, parent)})"]
    return document, lines


_KINDS = (("table", "tables"), ("view", "views"), ("function", "functions"),
          ("namespace", "namespaces"))  # fmt: skip


def _counts(contents: dict[str, int]) -> dict[str, int]:
    return {plural: contents.get(kind, 0) for kind, plural in _KINDS}


def _contents_text(held: dict[str, int]) -> str:
    said = [
        f"{held[plural]} {kind if held[plural] == 1 else plural}"
        for kind, plural in _KINDS
        if held[plural]
    ]
    return ", ".join(said) or "empty"


def _where(warehouse: dict[str, Any], ns: NamespaceName | None) -> str:
    inside = f"namespace {ns.dotted} of " if ns is not None else ""
    return f"{inside}warehouse {warehouse['name']}"


# -- tables and views --------------------------------------------------------------------------
def _tables(args: argparse.Namespace, services: Services) -> tuple[dict[str, Any], list[str]]:
    warehouse = _warehouse(services, args)
    ns = _existing_namespace(services, warehouse, args.namespace)
    found = services.queries.tabulars_in(str(warehouse["id"]), ns)
    document = {
        **_head(warehouse),
        "namespace": ns.as_list(),
        "tables": [_without_kind(t) for t in found if t["kind"] == "table"],
        "views": [_without_kind(t) for t in found if t["kind"] == "view"],
    }
    width = max((len(t["name"]) for t in found), default=0)
    lines = [f"{t['kind']:<5}  {t['name']:<{width}}  updated {t['updated-at']}" for t in found]
    if not found:
        lines = [f"(no tables or views in {_where(warehouse, ns)})"]
    return document, lines


def _without_kind(row: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in row.items() if k != "kind"}


# -- history -----------------------------------------------------------------------------------
def _history(args: argparse.Namespace, services: Services) -> tuple[dict[str, Any], list[str]]:
    if args.last is not None and args.last < 1:
        raise Malformed("--last must be at least 1")
    namespace_text, dot, name = args.name.rpartition(".")
    if not dot or not name:
        raise Malformed(f"{args.name!r} is not NAMESPACE.NAME (e.g. sales.orders)")
    warehouse = _warehouse(services, args)
    ns = _existing_namespace(services, warehouse, namespace_text)
    found = services.queries.tabular_id(str(warehouse["id"]), ns, name)
    if found is None:
        raise NotFound(f"no table or view {ns.dotted}.{name} in warehouse {warehouse['name']}")
    tabular_id, kind = found
    events = _events(services, str(warehouse["id"]), tabular_id, kind)
    if args.last is not None:
        events = events[-args.last :]
    document = {
        **_head(warehouse),
        "namespace": ns.as_list(),
        "name": name,
        "kind": kind,
        "id": tabular_id,
        "events": events,
    }
    lines = []
    for e in events:
        lines.append(f"{e['position']:>8}  {e['time']}  {e['type']:<28} {e['actor'] or '-'}")
        lines += [f"{'':10}{c['sign']} {c['text']}" for c in e["changes"]]
    return document, lines


def _events(
    services: Services, warehouse_id: str, tabular_id: str, kind: str
) -> list[dict[str, Any]]:
    """Each event of the table or view: where it is in the log (the event index, caught up
    first) and what it changed (folded from the aggregate's own events)."""
    indexer = Indexer(services)
    indexer.ensure_schema()
    indexer.catch_up()
    rows: list[dict[str, Any]] = []
    after = 0
    while True:
        page = indexer.index.query(
            EventFilter(
                after=after,
                limit=_PAGE,
                aggregate_id=tabular_id,
                type_prefix=f"{_TYPE_PREFIX}{kind}.",
            )
        )
        rows += [r for r in page if r["warehouse-id"] == warehouse_id]
        if len(page) < _PAGE:
            break
        after = page[-1]["position"]
    stored = services.catalog.app.events.get(UUID(tabular_id))
    changed = {
        s.version: s for s in steps(e for e in stored if isinstance(e, Table.Event | View.Event))
    }
    found = []
    for row in rows:
        step = changed.get(row["version"])
        found.append(
            {
                "position": row["position"],
                "time": row["time"],
                "type": str(row["type"]).removeprefix(_TYPE_PREFIX),
                "actor": row["actor"],
                "version": row["version"],
                "changes": [
                    {"sign": c.sign, "text": c.text} for c in (step.changes if step else [])
                ],
            }
        )
    return found

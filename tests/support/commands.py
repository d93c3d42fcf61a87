"""Catalogs filled through the commands (no HTTP), for tests and benchmarks that want many
tables or many events quickly."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from icelog.api.services import Services
from icelog.commands.catalog import Catalog, CatalogApplication
from icelog.domain.context import RequestContext
from icelog.domain.identifiers import NamespaceName, TabularName
from icelog.domain.project import Project

ONE_COLUMN = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def create_plain_table(
    catalog: Catalog,
    ctx: RequestContext,
    warehouse_id: UUID,
    name: TabularName,
    schema: dict[str, Any],
) -> Any:
    """A table with `schema` and nothing else: no partition spec, sort order, location or
    property, created at once (not staged)."""
    return catalog.tables.create_table(
        ctx,
        warehouse_id,
        name,
        schema=schema,
        partition_spec=None,
        sort_order=None,
        location=None,
        properties={},
        stage=False,
    )


def bench_tables(services: Services, count: int) -> tuple[RequestContext, UUID, list[TabularName]]:
    """Namespace `bench` of the default warehouse with one-column tables `t0`..: the context
    that made them, the warehouse and the names, for a benchmark to commit to."""
    ctx = RequestContext("bench", "fill")
    wid = services.warehouse_for_prefix(None)
    namespace = NamespaceName(("bench",))
    services.catalog.namespaces.create_namespace(ctx, wid, namespace, {})
    names = [TabularName(namespace, f"t{i}") for i in range(count)]
    for name in names:
        create_plain_table(services.catalog, ctx, wid, name, ONE_COLUMN)
    return ctx, wid, names


def stale_project(app: CatalogApplication, fresh_name: str) -> tuple[UUID, Project]:
    """A project saved, then renamed to `fresh_name` through a copy of its own: its id and
    a copy loaded before that rename, one version behind."""
    pid = uuid4()
    app.save_all(Project.create(project_id=pid, name="p", actor="t", request_id="r"))
    stale: Project = app.repository.get(pid)
    fresh: Project = app.repository.get(pid)
    fresh.rename(fresh_name, actor="t", request_id="r")
    app.save_all(fresh)
    return pid, stale

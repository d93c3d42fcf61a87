"""The catalog is composed from command groups over one application: shallow classes,
and no catalog without the read-model queries its safety checks ask."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from eventsourcing.application import Application

from icelog.commands.catalog import Catalog, CatalogApplication, ReadPorts
from icelog.commands.storage import StoragePolicy


def _ports() -> ReadPorts:
    return ReadPorts(
        location_index=lambda _w, _l: None,
        locations_overlapping=lambda _w, _l: [],
        open_task_count=lambda _w: 0,
        project_role_count=lambda _p: 0,
        grants_now=lambda _o: set(),
        namespace_contents=lambda _w, _n: {},
        warehouse_profiles=dict,
    )


@pytest.fixture
def app() -> Iterator[CatalogApplication]:
    app = CatalogApplication()
    yield app
    app.close()


def test_the_application_keeps_its_stored_name() -> None:
    # The name is stored format: it names the PostgreSQL tables (icelog_events, ...).
    assert CatalogApplication.name == "icelog"


def test_no_catalog_without_its_read_ports(app: CatalogApplication) -> None:
    with pytest.raises(TypeError):
        Catalog(app)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Catalog(app, None, storage_policy=StoragePolicy())  # type: ignore[arg-type]


@pytest.mark.parametrize("missing", [f.name for f in dataclasses.fields(ReadPorts)])
def test_every_read_port_is_required(missing: str) -> None:
    given: dict[str, Any] = {
        f.name: getattr(_ports(), f.name) for f in dataclasses.fields(ReadPorts)
    }
    del given[missing]
    with pytest.raises(TypeError):
        ReadPorts(**given)


def test_groups_are_parts_not_links_of_a_chain(app: CatalogApplication) -> None:
    catalog = Catalog(app, _ports(), storage_policy=StoragePolicy())
    groups = [value for key, value in vars(catalog).items() if key not in ("app", "ports")]
    assert len(groups) >= 10
    for group in groups:
        # The group's class, then object: nothing inherited.
        assert type(group).__mro__[1:] == (object,), type(group)
    # The application: its own class over the library's.
    assert type(app).__mro__[1] is Application
    assert Catalog.__mro__[1:] == (object,)


def test_the_groups_share_one_application(app: CatalogApplication) -> None:
    catalog = Catalog(app, _ports(), storage_policy=StoragePolicy())
    assert catalog.tables.app is catalog.views.app is catalog.namespaces.app is app
    assert catalog.tables.core is catalog.views.core

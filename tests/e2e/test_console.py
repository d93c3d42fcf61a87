"""The web console (`/ui`) in real Chromium (Debian's package, driven by Playwright), against
`icelog serve`: browse to a table PyIceberg wrote, read its event timeline, step the as-of
control back before a commit, create a warehouse, soft-drop and undrop a table.

Screenshots at 1280x800 and 390x844 go to `$ICELOG_CONSOLE_SCREENSHOTS` when it is set
(`docs/console` refreshes the documentation's), else to the test's temporary directory.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect, sync_playwright
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DoubleType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
)

from tests.support.clients import rest_catalog, wait_until
from tests.support.fixtures import OPEN_BACKENDS, ServerFactory
from tests.support.idp import TestIdentityProvider
from tests.support.server import CatalogServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
WIDE: ViewportSize = {"width": 1280, "height": 800}
NARROW: ViewportSize = {"width": 390, "height": 844}

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "kind", StringType(), required=False),
    NestedField(
        3, "address",
        StructType(NestedField(4, "city", StringType()), NestedField(5, "zip", StringType())),
        required=False,
    ),
    NestedField(6, "tags", ListType(7, StringType(), element_required=False), required=False),
)  # fmt: skip


@pytest.fixture(scope="module", params=OPEN_BACKENDS)
def server(request: pytest.FixtureRequest, catalog_server_factory: ServerFactory) -> CatalogServer:
    """The console over each backend: every test that browses the catalog anonymously runs
    on SQLite and on PostgreSQL (the login tests run on SQLite)."""
    return catalog_server_factory(str(request.param))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/test does)")
    with sync_playwright() as playwright:
        found = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield found
        found.close()


@pytest.fixture
def page(browser: Browser, server: CatalogServer) -> Iterator[Page]:
    context = browser.new_context(viewport=WIDE, base_url=server.base)
    opened = context.new_page()
    opened.on("dialog", lambda dialog: dialog.accept())  # the console's confirm()s
    # Offline: every request the console makes goes to the catalog itself.
    hosts: set[str] = set()
    opened.on("request", lambda request: hosts.add(urlparse(request.url).netloc))
    yield opened
    context.close()
    assert hosts <= {urlparse(server.base).netloc}, hosts


@pytest.fixture(scope="module")
def shot_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wanted = os.environ.get("ICELOG_CONSOLE_SCREENSHOTS")
    folder = Path(wanted) if wanted else tmp_path_factory.mktemp("console-shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def shots(request: pytest.FixtureRequest, shot_folder: Path) -> Path | None:
    """Where screenshots go; None (none taken) on the PostgreSQL run: the same pages."""
    used = "server" in request.fixturenames
    if used and request.getfixturevalue("server").backend == "postgres":
        return None
    return shot_folder


def shoot(page: Page, shots: Path | None, name: str) -> None:
    """The page at 1280x800 and at 390x844 (full length), then back to wide."""
    if shots is None:
        return
    for size, suffix in ((WIDE, "desktop"), (NARROW, "mobile")):
        page.set_viewport_size(size)
        page.screenshot(path=str(shots / f"{name}-{suffix}.png"), full_page=True)
    page.set_viewport_size(WIDE)


@pytest.fixture(scope="module")
def sales(server: CatalogServer) -> dict[str, Any]:
    """A table written by PyIceberg: nested schema, one append, then a new column."""
    catalog = rest_catalog(server)
    catalog.create_namespace_if_not_exists("sales")
    table = catalog.create_table("sales.events", SCHEMA)
    table.append(
        pa.Table.from_pylist(
            [{"id": 1, "kind": "a", "address": {"city": "Oslo", "zip": "0150"}, "tags": ["x"]},
             {"id": 2, "kind": "b", "address": None, "tags": []}],
            schema=table.schema().as_arrow(),
        )
    )  # fmt: skip
    with table.update_schema() as update:
        update.add_column("amount", DoubleType())
    loaded = catalog.load_table("sales.events")
    return {"catalog": catalog, "metadata_location": loaded.metadata_location}


def test_browse_to_a_pyiceberg_table(page: Page, sales: dict[str, Any], shots: Path | None) -> None:
    page.goto("/ui/projects")
    expect(page.locator("h1")).to_have_text("Projects")
    shoot(page, shots, "projects")
    page.get_by_role("link", name="default", exact=True).click()
    expect(page.locator("h1")).to_have_text("Project default")
    page.get_by_role("link", name="default", exact=True).click()
    expect(page.locator("h1")).to_have_text("Warehouse default")
    expect(page.get_by_text("file", exact=True).first).to_be_visible()
    shoot(page, shots, "warehouse")
    page.locator("ul.tree").get_by_role("link", name="sales").click()
    expect(page.locator("h1")).to_have_text("Namespace sales")
    page.get_by_role("link", name="events", exact=True).click()
    expect(page.locator("h1")).to_have_text("Table sales.events")
    schema = page.locator("[data-schema]")
    for column in ("id", "kind", "address", "city", "zip", "tags", "element", "amount"):
        expect(schema.get_by_text(column, exact=True)).to_be_visible()
    expect(schema).to_contain_text("list<string>")
    # Every column has its header: the one saying required or optional too.
    expect(schema.locator("thead th")).to_have_text(["Id", "Name", "Type", "Required", "Doc"])
    expect(schema.locator("tbody tr", has_text="kind").locator("td").nth(3)).to_have_text(
        "optional"
    )
    expect(page.locator("[data-metadata-location]")).to_have_text(sales["metadata_location"])
    expect(page.locator("#snapshots")).to_contain_text("append, added-records 2")
    expect(page.locator("#snapshots")).to_contain_text("branch main")
    shoot(page, shots, "table")


@pytest.mark.spark
def test_browse_to_a_table_spark_wrote(page: Page, server: CatalogServer, spark: Any) -> None:
    """Spark 3.5 with the Iceberg runtime writes through the catalog; the console shows its
    nested schema, partition spec, sort order, snapshots, refs and the column it added."""
    from tests.support.spark import register_rest_catalog

    name = register_rest_catalog(spark, f"console_{server.backend}", server.uri)
    table = f"{name}.lake.trips"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}.lake")
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMP, rider STRUCT<name: STRING, tier: INT>,"
        " fare DOUBLE) USING iceberg PARTITIONED BY (days(ts))"
    )
    spark.sql(f"ALTER TABLE {table} WRITE ORDERED BY id")
    spark.sql(
        f"INSERT INTO {table} VALUES"
        " (1, TIMESTAMP '2024-01-02 10:00:00', named_struct('name', 'ann', 'tier', 1), 12.5),"
        " (2, TIMESTAMP '2024-01-03 11:00:00', named_struct('name', 'bo', 'tier', 2), 8.0)"
    )
    spark.sql(f"ALTER TABLE {table} CREATE TAG first_load")
    spark.sql(f"ALTER TABLE {table} ADD COLUMN tip DOUBLE")
    spark.sql(
        f"INSERT INTO {table} VALUES"
        " (3, TIMESTAMP '2024-01-03 12:00:00', named_struct('name', 'cy', 'tier', 1), 20.0, 2.5)"
    )

    _click_to_table(page, "lake", "trips")
    schema = page.locator("[data-schema]")
    for column in ("id", "ts", "rider", "name", "tier", "fare", "tip"):
        expect(schema.get_by_text(column, exact=True)).to_be_visible()
    expect(schema).to_contain_text("timestamptz")
    expect(page.locator("#partitioning")).to_contain_text("day(ts)")
    expect(page.locator("#partitioning")).to_contain_text("identity(id) asc")
    snapshots = page.locator("#snapshots ol > li")
    expect(snapshots).to_have_count(2)
    expect(snapshots.nth(0)).to_contain_text("append, added-records 1")
    expect(snapshots.nth(0)).to_contain_text("branch main")
    expect(snapshots.nth(1)).to_contain_text("append, added-records 2")
    expect(snapshots.nth(1)).to_contain_text("tag first_load")
    expect(page.locator("[data-timeline]")).to_contain_text("+ column tip double")
    expect(page.locator("[data-timeline]")).to_contain_text("tag first_load")


def test_a_tables_event_timeline(page: Page, sales: dict[str, Any], shots: Path | None) -> None:
    page.goto("/ui/projects")
    page.goto(_table_url(page, "sales", "events"))
    steps = page.locator("[data-timeline] > li")
    expect(steps).to_have_count(3)  # created, the append, the new column — newest first
    expect(steps.nth(0)).to_contain_text("committed")
    expect(steps.nth(0)).to_contain_text("+ column amount double")
    expect(steps.nth(1)).to_contain_text("append, added-records 2")
    expect(steps.nth(1)).to_contain_text("branch main")
    expect(steps.nth(2)).to_contain_text("created")
    expect(steps.nth(2)).to_contain_text("+ column address.city string")
    expect(steps.nth(0)).to_contain_text("anonymous")


def test_as_of_before_a_commit_shows_the_older_schema(
    page: Page, sales: dict[str, Any], shots: Path | None
) -> None:
    page.goto(_table_url(page, "sales", "events"))
    schema = page.locator("[data-schema]")
    expect(schema.get_by_text("amount", exact=True)).to_be_visible()
    newest = page.locator("[data-timeline] > li").nth(0)
    newest.locator("[data-before]").click()
    expect(page.locator(".asof-banner")).to_contain_text("as of log position")
    expect(page.locator("h1")).to_have_text("Table sales.events")
    expect(schema.get_by_text("id", exact=True)).to_be_visible()
    expect(schema.get_by_text("amount", exact=True)).to_have_count(0)
    expect(page.locator("[data-timeline] > li")).to_have_count(2)
    # What the older page names is the metadata file of that moment.
    older = page.locator("[data-metadata-location]").inner_text()
    assert older != sales["metadata_location"] and older.endswith(".metadata.json")
    shoot(page, shots, "as-of")
    # Step back once more with the control: before the append, no snapshot.
    page.locator("[data-step]").click()
    expect(page.locator("#snapshots")).to_contain_text("No snapshots")
    # "Now" returns to the live table.
    page.locator("[data-now]").click()
    expect(page.locator(".asof-banner")).to_have_count(0)
    expect(schema.get_by_text("amount", exact=True)).to_be_visible()
    # The control takes a position typed in, on any page.
    page.goto("/ui/projects")
    page.fill("#as-of", "1")
    page.locator("form.asof button").click()
    expect(page.locator(".asof-banner")).to_contain_text("as of log position 1")


def _head(server: CatalogServer) -> int:
    """The newest log position (the events API, newest first)."""
    answer = httpx.get(f"{server.base}/management/v1/events", params={"order": "desc", "limit": 1})
    return int(answer.json()["events"][0]["position"])


def _listed(page: Page) -> list[int]:
    return [int(p) for p in page.locator("[data-log] [data-position]").all_inner_texts()]


def test_the_log_as_of_a_position_lists_nothing_later(
    page: Page, server: CatalogServer, sales: dict[str, Any], shots: Path | None
) -> None:
    """The Log page as of position N: N first, newest first, and no later event — on the
    older pages too."""
    moment = _head(server)
    for n in range(3):  # events after the moment
        sales["catalog"].update_namespace_properties("sales", updates={"log-test": str(n)})
    assert _head(server) > moment
    page.goto("/ui/events")
    expect(page.locator("h1")).to_have_text("The event log")
    now = _listed(page)
    assert now[0] == _head(server) and now == sorted(now, reverse=True), "newest first"
    page.fill("#as-of", str(moment))
    page.locator("form.asof button").click()
    expect(page.locator(".asof-banner")).to_contain_text(f"as of log position {moment}")
    expect(page.locator("[data-log-scope]")).to_contain_text(f"as of log position {moment}")
    listed = _listed(page)
    assert listed[0] == moment and max(listed) == moment, listed
    assert listed == sorted(listed, reverse=True)
    shoot(page, shots, "log")
    # Paging keeps the moment: the oldest page starts at the log's first event.
    page.locator("[data-oldest]").click()
    expect(page.locator(".asof-banner")).to_contain_text(f"as of log position {moment}")
    oldest = _listed(page)
    assert oldest[-1] == 1 and max(oldest) <= moment and oldest == sorted(oldest, reverse=True)
    # A filter keeps the moment.
    page.fill("form.filters input[name=type]", "io.icelog.namespace.")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(".asof-banner")).to_contain_text(f"as of log position {moment}")
    assert all(p <= moment for p in _listed(page))


def test_the_log_type_filter_matches_the_types_it_shows(page: Page, sales: dict[str, Any]) -> None:
    page.goto("/ui/events")
    box = page.locator("form.filters input[name=type]")
    placeholder = box.get_attribute("placeholder")
    assert placeholder == "io.icelog.table."
    for typed in (placeholder, "table.committed", "icelog.table."):
        box.fill(typed)
        page.get_by_role("button", name="Filter").click()
        shown = page.locator("[data-log] [data-type]").all_inner_texts()
        assert shown, typed
        assert all(typed in t and t.startswith("io.icelog.table.") for t in shown), shown
        box = page.locator("form.filters input[name=type]")
        expect(box).to_have_value(typed)
    # The table's timeline spells its types the same way.
    page.goto(_table_url(page, "sales", "events"))
    expect(page.locator("[data-timeline] > li").first).to_contain_text(
        "io.icelog.table.committed.v1"
    )


def test_a_log_position_leads_to_the_table_it_changed(page: Page, sales: dict[str, Any]) -> None:
    page.goto("/ui/events?type=io.icelog.table.committed")
    row = page.locator("[data-log] tbody tr", has_text="sales.events").first
    position = row.locator("[data-position]").inner_text()
    row.locator("[data-position]").click()
    expect(page.locator("h1")).to_have_text("Table sales.events")
    expect(page.locator(".asof-banner")).to_contain_text(f"as of log position {position}")
    expect(page.locator("[data-timeline] > li").first).to_contain_text(f"#{position}")


def test_the_start_page_leads_to_the_only_warehouse(
    browser: Browser, catalog_server_factory: ServerFactory, tmp_path: Path
) -> None:
    """One project with one warehouse (a fresh server's default): the start page is that
    warehouse; one project with more: the project; more projects: the list of them."""
    fresh = catalog_server_factory("sqlite")
    context = browser.new_context(viewport=WIDE, base_url=fresh.base)
    try:
        page = context.new_page()
        page.goto("/ui")
        expect(page.locator("h1")).to_have_text("Warehouse default")
        page.locator("header nav").get_by_role("link", name="Projects", exact=True).click()
        expect(page.locator("h1")).to_have_text("Projects")  # the list is one click away
        page.locator("header a.brand").click()
        expect(page.locator("h1")).to_have_text("Warehouse default")
        storage = {"type": "file", "base-location": (tmp_path / "second").as_uri()}
        created = httpx.post(
            f"{fresh.base}/management/v1/warehouse",
            json={"warehouse-name": "second", "storage-profile": storage},
        )
        assert created.status_code == 200, created.text
        page.goto("/ui")
        expect(page.locator("h1")).to_have_text("Project default")
        made = httpx.post(f"{fresh.base}/management/v1/project", json={"project-name": "other"})
        assert made.status_code in (200, 201), made.text
        page.goto("/ui")
        expect(page.locator("h1")).to_have_text("Projects")
        expect(page.get_by_role("link", name="default", exact=True)).to_be_visible()
        expect(page.get_by_role("link", name="other", exact=True)).to_be_visible()
    finally:
        context.close()


def test_create_a_warehouse(
    page: Page, server: CatalogServer, tmp_path: Path, shots: Path | None
) -> None:
    page.goto("/ui/projects/00000000-0000-0000-0000-000000000000")
    page.get_by_role("link", name="New warehouse").click()
    expect(page.locator("h1")).to_have_text("New warehouse")
    page.fill("input[name=name]", "lake2")
    page.check("input[name=storage-type][value=s3]")
    # Several kinds have a bucket (s3, gcs): the chosen kind's inputs are the enabled ones.
    expect(page.locator("input[name=bucket]:enabled")).to_be_visible()
    expect(page.locator("input[name=base-location]")).to_be_hidden()
    page.check("input[name=storage-type][value=file]")
    # The catalog's answer shows on the form: a location that is not absolute.
    page.fill("input[name=base-location]", "relative/dir")
    page.get_by_role("button", name="Create warehouse").click()
    expect(page.locator(".error")).to_contain_text("BadRequestException")
    expect(page.locator("input[name=name]")).to_have_value("lake2")
    shoot(page, shots, "warehouse-new-error")
    page.fill("input[name=base-location]", (tmp_path / "lake2").as_uri())
    page.check("input[name=delete-type][value=soft]")
    page.get_by_role("button", name="Create warehouse").click()
    expect(page.locator("h1")).to_have_text("Warehouse lake2")
    expect(page.locator(".banner.ok")).to_have_text("Warehouse created")
    expect(page.get_by_text("dropped tables and views can be undropped")).to_be_visible()
    listed = httpx.get(f"{server.base}/management/v1/warehouse").json()["warehouses"]
    assert "lake2" in {w["name"] for w in listed}


def _new_warehouse(
    server: CatalogServer, name: str, location: Path, *, expiration_seconds: int | None = None
) -> str:
    """A file warehouse made through the management API (soft-deleting when an expiration is
    given); its id."""
    body: dict[str, Any] = {
        "warehouse-name": name,
        "storage-profile": {"type": "file", "base-location": location.as_uri()},
    }
    if expiration_seconds is not None:
        body["delete-profile"] = {"type": "soft", "expiration-seconds": expiration_seconds}
    created = httpx.post(f"{server.base}/management/v1/warehouse", json=body)
    assert created.status_code == 200, created.text
    return str(created.json()["warehouse-id"])


def test_soft_drop_and_undrop_a_table(
    page: Page, server: CatalogServer, tmp_path: Path, shots: Path | None
) -> None:
    wid = _new_warehouse(server, "soft", tmp_path / "soft", expiration_seconds=3600)
    catalog = rest_catalog(server, warehouse="soft")
    catalog.create_namespace("crm")
    catalog.create_table("crm.customers", Schema(NestedField(1, "id", LongType())))

    page.goto(f"/ui/warehouses/{wid}/table?ns=crm&name=customers")
    page.locator("summary", has_text="Manage this table").click()
    page.get_by_role("button", name="Drop table").click()
    expect(page.locator(".banner.ok")).to_have_text("Dropped crm.customers")
    expect(page.locator("h1")).to_have_text("Namespace crm")
    expect(page.get_by_role("link", name="customers")).to_have_count(0)

    page.goto(f"/ui/warehouses/{wid}")
    deleted = page.locator("#deleted + table")
    expect(deleted).to_contain_text("crm.customers")
    shoot(page, shots, "soft-deleted")
    deleted.get_by_role("button", name="Undrop").click()
    expect(page.locator(".banner.ok")).to_have_text("Restored crm.customers")
    expect(page.locator("#deleted + p")).to_have_text("None.")
    page.goto(f"/ui/warehouses/{wid}/table?ns=crm&name=customers")
    expect(page.locator("h1")).to_have_text("Table crm.customers")
    steps = page.locator("[data-timeline] > li")
    expect(steps.nth(0)).to_contain_text("undropped")
    expect(steps.nth(1)).to_contain_text("soft-dropped")


def test_a_purge_task_and_its_attempts(
    page: Page, server: CatalogServer, tmp_path: Path, shots: Path | None
) -> None:
    """A soft-dropped table expires at once: the server's task worker purges it, and the
    warehouse's task list links to the task's page, which lists every event of it."""
    wid = _new_warehouse(server, "expiring", tmp_path / "exp", expiration_seconds=0)
    catalog = rest_catalog(server, warehouse="expiring")
    catalog.create_namespace("tmp")
    catalog.create_table("tmp.scratch", Schema(NestedField(1, "id", LongType())))
    catalog.drop_table("tmp.scratch")

    def finished() -> bool:
        listed = httpx.post(f"{server.base}/management/v1/warehouse/{wid}/task/list", json={})
        return any(t["status"] == "succeeded" for t in listed.json()["tasks"])

    assert wait_until(finished, timeout=60)
    page.goto(f"/ui/warehouses/{wid}")
    page.locator("#tasks + table").get_by_role("link", name="tabular-expiration").first.click()
    expect(page.locator("h1")).to_have_text("Task: tabular-expiration")
    rows = page.locator("[data-attempts] tbody tr")
    expect(rows.first).to_contain_text("scheduled")
    expect(rows.first).to_contain_text("at most 5 attempts")
    expect(page.locator("[data-attempts] tr.attempt-started")).to_contain_text("1")
    expect(page.locator("[data-attempts] tr.succeeded")).to_contain_text("expired: true")
    shoot(page, shots, "task")


def test_manage_a_project_and_a_warehouse(
    page: Page, server: CatalogServer, tmp_path: Path
) -> None:
    page.goto("/ui/projects")
    page.locator("summary", has_text="New project").click()
    page.fill("form[action='/ui/projects'] input[name=name]", "scratch")
    page.get_by_role("button", name="Create project").click()
    expect(page.locator("h1")).to_have_text("Project scratch")
    pid = page.url.split("/ui/projects/")[1].split("?")[0]
    # Rename the project.
    page.locator("summary", has_text="Rename or delete this project").click()
    page.fill("form[action$='/rename'] input[name=name]", "scratch-2")
    page.get_by_role("button", name="Rename").click()
    expect(page.locator(".banner.ok")).to_have_text("Project renamed")
    expect(page.locator("h1")).to_have_text("Project scratch-2")
    # A warehouse in it, through the form.
    page.get_by_role("link", name="New warehouse").click()
    page.fill("input[name=name]", "attic")
    page.fill("input[name=base-location]", (tmp_path / "attic").as_uri())
    page.get_by_role("button", name="Create warehouse").click()
    expect(page.locator("h1")).to_have_text("Warehouse attic")
    expect(page.get_by_text("a drop is final")).to_be_visible()
    # The delete profile: soft, for ten minutes.
    page.locator("summary", has_text="Manage this warehouse").click()
    page.check("input[name=delete-type][value=soft]")
    page.fill("input[name=expiration-seconds]", "600")
    page.get_by_role("button", name="Change delete profile").click()
    expect(page.locator(".banner.ok")).to_have_text("Delete profile changed")
    expect(page.get_by_text("dropped tables and views can be undropped for 600 s")).to_be_visible()
    # Protect it: then it cannot be deleted (the API's refusal, on a page).
    page.locator("summary", has_text="Manage this warehouse").click()
    page.get_by_role("button", name="Protect", exact=True).click()
    expect(page.locator(".banner.ok")).to_have_text("Protection changed")
    expect(page.get_by_text("Protected: it cannot be deleted.")).to_be_visible()
    page.locator("summary", has_text="Manage this warehouse").click()
    page.get_by_role("button", name="Delete warehouse").click()
    expect(page.locator(".error")).to_contain_text("protected")
    page.go_back()
    page.reload()
    page.locator("summary", has_text="Manage this warehouse").click()
    page.get_by_role("button", name="Remove protection").click()
    expect(page.get_by_text("Not protected.")).to_be_visible()
    # Rename it, then delete it.
    page.locator("summary", has_text="Manage this warehouse").click()
    page.fill("form[action$='/rename'] input[name=name]", "loft")
    page.get_by_role("button", name="Rename").click()
    expect(page.locator(".banner.ok")).to_have_text("Warehouse renamed")
    expect(page.locator("h1")).to_have_text("Warehouse loft")
    history = page.locator("ol.timeline").last
    expect(history).to_contain_text("renamed")
    page.locator("summary", has_text="Manage this warehouse").click()
    page.get_by_role("button", name="Delete warehouse").click()
    expect(page.locator(".banner.ok")).to_have_text("Warehouse deleted")
    expect(page.locator("h1")).to_have_text("Project scratch-2")
    expect(page.locator("table.list")).to_contain_text("No warehouses.")
    # Delete the project.
    page.locator("summary", has_text="Rename or delete this project").click()
    page.get_by_role("button", name="Delete project").click()
    expect(page.locator(".banner.ok")).to_have_text("Project deleted")
    expect(page.locator("h1")).to_have_text("Projects")
    expect(page.get_by_role("link", name="scratch-2")).to_have_count(0)
    assert httpx.get(f"{server.base}/management/v1/project/{pid}").status_code == 404


def test_drop_a_view(page: Page, sales: dict[str, Any], shots: Path | None) -> None:
    from pyiceberg.view.metadata import ViewVersion

    version = ViewVersion.model_validate(
        {
            "version-id": 1, "schema-id": 0, "timestamp-ms": 1_700_000_000_000,
            "summary": {"engine-name": "pyiceberg"},
            "representations": [
                {"type": "sql", "sql": "SELECT id, kind FROM sales.events", "dialect": "spark"},
                {"type": "sql", "sql": "SELECT id, kind FROM sales.events", "dialect": "trino"},
            ],
            "default-namespace": ["sales"],
        }
    )  # fmt: skip
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "kind", StringType()))
    sales["catalog"].create_view("sales.recent", schema, version)
    page.goto(
        _table_url(page, "sales", "events").replace("/table?", "/view?").replace("events", "recent")
    )
    expect(page.locator("h1")).to_have_text("View sales.recent")
    expect(page.locator("pre.sql").first).to_contain_text("SELECT id, kind FROM sales.events")
    expect(page.get_by_text("trino", exact=True)).to_be_visible()
    expect(page.locator("[data-my-access]")).to_contain_text("drop")
    shoot(page, shots, "view")
    page.locator("summary", has_text="Manage this view").click()
    page.get_by_role("button", name="Drop view").click()
    expect(page.locator(".banner.ok")).to_have_text("Dropped sales.recent")
    expect(page.locator("h1")).to_have_text("Namespace sales")
    expect(page.get_by_role("link", name="recent")).to_have_count(0)
    assert not sales["catalog"].view_exists("sales.recent")


def test_namespace_and_warehouse_history_say_what_changed(
    page: Page, server: CatalogServer, tmp_path: Path, shots: Path | None
) -> None:
    wid = _new_warehouse(server, "hist", tmp_path / "hist")
    catalog = rest_catalog(server, warehouse="hist")
    catalog.create_namespace("ops", {"owner": "finance", "tier": "gold"})
    catalog.update_namespace_properties("ops", removals={"owner"}, updates={"tier": "silver"})
    catalog.create_table("ops.jobs", Schema(NestedField(1, "id", LongType())))
    catalog.drop_table("ops.jobs")
    catalog.create_namespace(("ops", "daily"))
    base = f"{server.base}/management/v1/warehouse/{wid}"
    assert httpx.post(f"{base}/rename", json={"new-name": "hist2"}).status_code < 300
    profile = {"delete-profile": {"type": "soft", "expiration-seconds": 600}}
    assert httpx.post(f"{base}/delete-profile", json=profile).status_code < 300

    page.goto(f"/ui/warehouses/{wid}/namespace?ns=ops")
    history = page.locator("[data-history]")
    for change in (
        "+ property owner = finance",
        "- property owner (was finance)",
        "~ property tier: gold → silver",
        "+ table ops.jobs",
        "- table ops.jobs",
        "+ namespace ops.daily",
    ):
        expect(history).to_contain_text(change)
    shoot(page, shots, "namespace")
    page.goto(f"/ui/warehouses/{wid}")
    history = page.locator("[data-history]")
    for change in (
        "~ name: hist → hist2",
        "~ delete profile: hard → soft (600 s)",
        "+ namespace ops",
        "+ storage base-location = file://",
    ):
        expect(history).to_contain_text(change)


def test_errors_read_as_the_api_says_them(page: Page, sales: dict[str, Any]) -> None:
    page.goto("/ui/projects")
    response = page.goto(_table_url(page, "sales", "nope"))
    assert response is not None and response.status == 404
    expect(page.locator(".error")).to_contain_text("NoSuchTableException")
    expect(page.locator(".error")).to_contain_text("sales.nope")
    response = page.goto("/ui/warehouses/not-a-uuid")
    assert response is not None and response.status == 400
    expect(page.locator(".error")).to_contain_text("warehouse id must be a UUID")


def test_status_shows_commits_and_verifies_the_audit_chain(
    page: Page, sales: dict[str, Any], shots: Path | None
) -> None:
    page.goto("/ui/status")
    expect(page.locator("[data-log]")).to_contain_text("Commits (this process)")
    commits = page.locator("[data-log] tr", has_text="Commits (this process)").inner_text()
    assert int(re.findall(r"\d+", commits)[0]) >= 2  # the append and the new column
    expect(page.locator("[data-publishers]")).to_be_visible()
    page.get_by_role("button", name="Verify the chain now").click()
    expect(page.locator("[data-verdict]")).to_contain_text("Intact.", timeout=15_000)
    shoot(page, shots, "status")


def test_unknown_console_pages_are_pages_too(page: Page) -> None:
    response = page.goto("/ui/nowhere/at/all")
    assert response is not None and response.status == 404
    expect(page.locator(".error")).to_contain_text("No console page /ui/nowhere/at/all")


@pytest.fixture(scope="module")
def idp() -> Iterator[TestIdentityProvider]:
    with TestIdentityProvider() as provider:
        yield provider


@pytest.fixture(scope="module")
def secured(catalog_server_factory: ServerFactory, idp: TestIdentityProvider) -> CatalogServer:
    """A server that takes the test provider's tokens; alice bootstraps it (server admin)."""
    server = catalog_server_factory(
        "sqlite",
        env={
            "ICELOG_OPENID_PROVIDER_URI": idp.uri,
            "ICELOG_OPENID_AUDIENCE": "icelog",
            "ICELOG_OPENID_LEEWAY_SECONDS": "0",
            # The browser reaches this server over plain http (cookies are Secure by
            # default: tests/integration/test_console_attacks.py).
            "ICELOG_CONSOLE_INSECURE_COOKIES": "true",
        },
    )
    answer = httpx.post(
        f"{server.base}/management/v1/bootstrap",
        json={"accept-terms-of-use": True},
        headers={"Authorization": f"Bearer {idp.issue('oidc-alice')}"},
    )
    assert answer.status_code == 204, answer.text
    return server


@contextmanager
def _login_page(
    browser: Browser, server: CatalogServer, idp: TestIdentityProvider, subject: str, expires: int
) -> Iterator[Page]:
    """A fresh browser page on `server`, whose identity provider logs in `subject` with
    tokens good for `expires` seconds; its context closes after."""
    idp.login_subject, idp.login_expires_in = subject, expires
    context = browser.new_context(viewport=WIDE, base_url=server.base)
    try:
        yield context.new_page()
    finally:
        context.close()


def test_log_in_with_the_identity_provider(
    browser: Browser, secured: CatalogServer, idp: TestIdentityProvider, shots: Path | None
) -> None:
    with _login_page(browser, secured, idp, "oidc-alice", 3600) as page:
        page.goto("/ui/projects")
        expect(page.locator("[data-reason]")).to_have_text("Log in to use the console.")
        shoot(page, shots, "login")
        page.locator("[data-login-button]").click()  # to the provider, PKCE, and back
        expect(page.locator("h1")).to_have_text("Projects")
        expect(page.locator("header .who")).to_contain_text("Alice Example")
        page.get_by_role("link", name="default", exact=True).click()
        expect(page.locator("h1")).to_have_text("Project default")
        # The API itself still wants a bearer token: the session is the console's only.
        assert httpx.get(f"{secured.base}/management/v1/project-list").status_code == 401
        page.locator("[data-logout] button").click()  # a same-site POST
        expect(page.locator("[data-reason]")).to_have_text("You logged out.")
        page.goto("/ui/projects")
        expect(page.locator("[data-reason]")).to_have_text("Log in to use the console.")


def test_an_expired_session_asks_to_log_in_again(
    browser: Browser, secured: CatalogServer, idp: TestIdentityProvider
) -> None:
    with _login_page(browser, secured, idp, "oidc-alice", 2) as page:
        page.goto("/ui/events")
        page.locator("[data-login-button]").click()
        expect(page.locator("h1")).to_have_text("The event log")
        page.wait_for_timeout(3500)  # the token runs out (no leeway on this server)
        idp.login_expires_in = 3600
        page.reload()
        expect(page.locator("[data-reason]")).to_have_text("Your session expired. Log in again.")
        expect(page.locator("h1")).to_have_text("Log in")  # never "no projects"
        page.locator("[data-login-button]").click()
        expect(page.locator("h1")).to_have_text("The event log")  # back where it was


def test_a_user_sees_only_what_the_api_shows_them(
    browser: Browser, secured: CatalogServer, idp: TestIdentityProvider
) -> None:
    with _login_page(browser, secured, idp, "oidc-bob", 3600) as page:
        page.goto("/ui/projects")
        page.locator("[data-login-button]").click()
        expect(page.locator("header .who")).to_contain_text("Alice Example")  # login claims
        expect(page.locator("table.list")).to_contain_text("No projects you may see.")
        # The log is the server admin's: refused, also as of a moment and by position.
        for crafted in ("/ui/events", "/ui/events?as-of=1", "/ui/events/1"):
            page.goto(crafted)
            expect(page.locator(".error")).to_contain_text("ForbiddenException")
            expect(page.locator("[data-position]")).to_have_count(0)
        listed = httpx.get(
            f"{secured.base}/management/v1/warehouse",
            headers={"Authorization": f"Bearer {idp.issue('oidc-alice')}"},
        ).json()["warehouses"]
        response = page.goto(f"/ui/warehouses/{listed[0]['id']}")
        assert response is not None and response.status == 404
        expect(page.locator(".error")).to_contain_text("NoSuchWarehouseException")


def test_a_namespace_grant_finds_its_way_from_the_start_page(
    browser: Browser, secured: CatalogServer, idp: TestIdentityProvider
) -> None:
    """Nina holds select on `nav_sales` and nothing else: she clicks from the projects to
    the warehouse to her namespace and its table; `nav_hr` is nowhere."""
    admin = idp.issue("oidc-alice")
    catalog = rest_catalog(secured, token=admin)
    for namespace in ("nav_sales", "nav_hr"):
        catalog.create_namespace_if_not_exists(namespace)
    schema = Schema(NestedField(1, "id", LongType()))
    catalog.create_table("nav_sales.orders", schema)
    catalog.create_table("nav_hr.salaries", schema)
    wid = _warehouse_id(secured, admin)
    headers = {"Authorization": f"Bearer {admin}"}
    management = f"{secured.base}/management/v1"
    nid = httpx.get(
        f"{management}/warehouse/{wid}/namespace-id",
        params={"namespace": "nav_sales"},
        headers=headers,
    ).json()["namespace-id"]
    httpx.post(
        f"{management}/permissions/namespace/{nid}/assignments",
        json={"writes": [{"type": "select", "user": "oidc~oidc-nina"}]},
        headers=headers,
    ).raise_for_status()
    with _log_in(browser, secured, idp, "nina") as page:
        page.get_by_role("link", name="default", exact=True).click()
        expect(page.locator("h1")).to_have_text("Project default")
        page.get_by_role("link", name="default", exact=True).click()
        expect(page.locator("h1")).to_have_text("Warehouse default")
        tree = page.locator("ul.tree")
        expect(tree.get_by_role("link", name="nav_sales", exact=True)).to_be_visible()
        expect(tree).not_to_contain_text("nav_hr")
        expect(page.locator("[data-my-access]")).to_contain_text("get_config")
        tree.get_by_role("link", name="nav_sales", exact=True).click()
        expect(page.locator("h1")).to_have_text("Namespace nav_sales")
        page.get_by_role("link", name="orders", exact=True).click()
        expect(page.locator("h1")).to_have_text("Table nav_sales.orders")
        response = page.goto(f"/ui/warehouses/{wid}/namespace?ns=nav_hr")
        assert response is not None and response.status == 404
        expect(page.locator(".error")).to_contain_text("NoSuchNamespaceException")


@contextmanager
def _log_in(
    browser: Browser, server: CatalogServer, idp: TestIdentityProvider, who: str
) -> Iterator[Page]:
    """A browser logged in to the console as `who` (`oidc-<who>` at the test provider)."""
    idp.login_claims = {"name": f"{who.capitalize()} Example", "email": f"{who}@example.com"}
    with _login_page(browser, server, idp, f"oidc-{who}", 3600) as page:
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto("/ui/projects")
        page.locator("[data-login-button]").click()
        expect(page.locator("header .who")).to_contain_text(f"{who.capitalize()} Example")
        yield page


def test_grant_a_user_select_on_a_table_and_see_their_access(
    browser: Browser, secured: CatalogServer, idp: TestIdentityProvider, shots: Path | None
) -> None:
    admin = idp.issue("oidc-alice")
    catalog = rest_catalog(secured, token=admin)
    catalog.create_namespace_if_not_exists("shop")
    catalog.create_table("shop.orders", Schema(NestedField(1, "id", LongType())))
    catalog.create_table("shop.secret", Schema(NestedField(1, "id", LongType())))
    with _log_in(browser, secured, idp, "alice") as page:
        # The admin records Carol before her first login, on the users page.
        page.get_by_role("link", name="Users", exact=True).click()
        expect(page.locator("h1")).to_have_text("Users")
        expect(page.locator("[data-my-access]")).to_contain_text("provision_users")
        page.locator("summary", has_text="Add a user").click()
        page.fill("form[action='/ui/users/add'] input[name=id]", "oidc~oidc-carol")
        page.fill("form[action='/ui/users/add'] input[name=name]", "Carol Example")
        page.get_by_role("button", name="Add user").click()
        expect(page.locator(".banner.ok")).to_have_text("Added user oidc~oidc-carol")
        page.fill("input[name=name]", "carol")
        page.get_by_role("button", name="Search").click()
        expect(page.locator("[data-users] tbody tr")).to_have_count(1)
        expect(page.locator("[data-users]")).to_contain_text("Carol Example")
        shoot(page, shots, "users")

        # The table's page: the admin's own access, then its assignments.
        _click_to_table(page, "shop", "orders")
        mine = page.locator("[data-my-access]")
        expect(mine).to_contain_text("read_data")
        expect(mine).to_contain_text("grant_select")
        mine.locator("[data-assignments-link]").click()
        expect(page.locator("h1")).to_have_text("Access to table shop.orders")
        _grant_with_the_form(page, "select", "user:oidc~oidc-carol")
        expect(page.locator(".banner.ok")).to_have_text("Granted select to oidc~oidc-carol")
        held = page.locator("[data-assignments] tbody tr", has_text="Carol Example")
        expect(held).to_contain_text("select")
        # What may Carol do here? (the admin may read assignments)
        their = page.locator("[data-their-access]")
        their.locator("select[name=principal]").select_option("user:oidc~oidc-carol")
        their.get_by_role("button", name="Show").click()
        expect(their).to_contain_text("read_data")
        expect(their).not_to_contain_text("drop")
        shoot(page, shots, "access")

    with _log_in(browser, secured, idp, "carol") as page:
        wid = _warehouse_id(secured, admin)
        page.goto(f"/ui/warehouses/{wid}/namespace?ns=shop")
        expect(page.locator("h1")).to_have_text("Namespace shop")
        expect(page.get_by_role("link", name="orders", exact=True)).to_be_visible()
        expect(page.get_by_role("link", name="secret", exact=True)).to_have_count(0)
        page.get_by_role("link", name="orders", exact=True).click()
        expect(page.locator("h1")).to_have_text("Table shop.orders")
        mine = page.locator("[data-my-access]")
        expect(mine).to_contain_text("read_data")
        expect(mine).to_contain_text("get_metadata")
        expect(mine).not_to_contain_text("drop")
        shoot(page, shots, "my-access")
        # The assignments are not hers to read: the API's refusal, in place.
        mine.locator("[data-assignments-link]").click()
        expect(page.locator("h1")).to_have_text("Access to table shop.orders")
        expect(page.locator("[data-assignments]")).to_have_count(0)
        expect(page.locator(".error").first).to_contain_text("ForbiddenException")
        expect(page.locator("[data-my-access]")).to_contain_text("read_data")
        # Dropping it is refused as the API refuses it.
        page.goto(f"/ui/warehouses/{wid}/table?ns=shop&name=orders")
        page.locator("summary", has_text="Manage this table").click()
        page.get_by_role("button", name="Drop table").click()
        expect(page.locator(".error")).to_contain_text("ForbiddenException")
        # A table she holds nothing on does not exist for her.
        response = page.goto(f"/ui/warehouses/{wid}/table?ns=shop&name=secret")
        assert response is not None and response.status == 404
        expect(page.locator(".error")).to_contain_text("NoSuchTableException")
        # The user directory (names, e-mails) is the server admin's: the API's refusal, in
        # place, and nobody's name on the page.
        page.goto("/ui/users")
        expect(page.locator(".error").first).to_contain_text("ForbiddenException")
        expect(page.locator("[data-users] tbody tr")).to_have_count(0)
        expect(page.locator("main")).not_to_contain_text("Alice Example")


def test_roles_and_their_members(
    browser: Browser, secured: CatalogServer, idp: TestIdentityProvider, shots: Path | None
) -> None:
    admin = idp.issue("oidc-alice")
    httpx.post(
        f"{secured.base}/management/v1/user",
        json={"id": "oidc~oidc-dave", "name": "Dave Example"},
        headers={"Authorization": f"Bearer {admin}"},
    ).raise_for_status()
    with _log_in(browser, secured, idp, "alice") as page:
        page.goto("/ui/projects/00000000-0000-0000-0000-000000000000")
        page.get_by_role("link", name="Roles", exact=True).click()
        expect(page.locator("h1")).to_have_text("Roles of default")
        page.fill("form[action$='/roles'] input[name=name]", "analysts")
        page.fill("form[action$='/roles'] input[name=description]", "read the sales data")
        page.get_by_role("button", name="Create role").click()
        expect(page.locator(".banner.ok")).to_have_text("Role analysts created")
        expect(page.locator("h1")).to_have_text("Role analysts")
        # The creator owns it; make Dave a member.
        expect(page.locator("[data-assignments]")).to_contain_text("ownership")
        _grant_with_the_form(page, "assignee", "user:oidc~oidc-dave")
        expect(page.locator(".banner.ok")).to_have_text("Granted assignee to oidc~oidc-dave")
        member = page.locator("[data-assignments] tbody tr", has_text="Dave Example")
        expect(member).to_contain_text("assignee")
        shoot(page, shots, "role")
        # Rename it; its members stay.
        page.locator("summary", has_text="Rename or delete this role").click()
        page.fill("form[action$='/rename'] input[name=name]", "sales-analysts")
        page.get_by_role("button", name="Rename").click()
        expect(page.locator("h1")).to_have_text("Role sales-analysts")
        expect(member).to_contain_text("assignee")
        # The role can be granted on a warehouse like a user.
        page.goto("/ui/projects/00000000-0000-0000-0000-000000000000")
        page.get_by_role("link", name="default", exact=True).click()
        page.locator("[data-assignments-link]").click()
        expect(page.locator("h1")).to_have_text("Access to warehouse default")
        _grant_with_the_form(page, "describe", label="sales-analysts")
        row = page.locator("[data-assignments] tbody tr", has_text="sales-analysts")
        expect(row).to_contain_text("describe")
        # Revoke it again, and remove Dave from the role.
        row.get_by_role("button", name="Revoke").click()
        expect(page.locator(".banner.ok")).to_have_text(re.compile("Revoked describe from"))
        expect(page.locator("[data-assignments]")).not_to_contain_text("sales-analysts")
        page.go_back()
        page.go_back()
        page.goto("/ui/projects/00000000-0000-0000-0000-000000000000/roles")
        page.get_by_role("link", name="sales-analysts").click()
        member = page.locator("[data-assignments] tbody tr", has_text="Dave Example")
        member.get_by_role("button", name="Revoke").click()
        expect(page.locator("[data-assignments]")).not_to_contain_text("Dave Example")
        # Delete it.
        page.locator("summary", has_text="Rename or delete this role").click()
        page.get_by_role("button", name="Delete role").click()
        expect(page.locator(".banner.ok")).to_have_text("Role sales-analysts deleted")
        expect(page.locator("h1")).to_have_text("Roles of default")
        expect(page.locator("[data-roles]")).not_to_contain_text("sales-analysts")


def _grant_with_the_form(
    page: Page, relation: str, option: str | None = None, *, label: str | None = None
) -> None:
    """Grant `relation` with the page's grant form to the principal whose option is
    `option` (a value or a label) or, given `label`, the option so labelled."""
    grant = page.locator("[data-grant-form]")
    grant.locator("select[name=relation]").select_option(relation)
    principal = grant.locator("select[name=principal]")
    if label is not None:
        principal.select_option(label=label)
    else:
        principal.select_option(option)
    grant.get_by_role("button", name="Grant").click()


def _warehouse_id(server: CatalogServer, token: str) -> str:
    listed = httpx.get(
        f"{server.base}/management/v1/warehouse",
        headers={"Authorization": f"Bearer {token}"},
    ).json()["warehouses"]
    return str(next(w["id"] for w in listed if w["name"] == "default"))


def test_assets_are_in_the_package() -> None:
    """Templates and static files ship inside the installed package (no CDN)."""
    from icelog.api import console

    folder = Path(console.__file__).parent
    assert (folder / "static" / "console.css").is_file()
    assert (folder / "templates" / "layout.html").is_file()
    layout = (folder / "templates" / "layout.html").read_text()
    assert not re.search(r"(src|href)=\"https?://", layout)
    assert shutil.which("chromium") or Path(CHROMIUM).exists()


def _click_to_table(page: Page, namespace: str, name: str) -> None:
    """From the projects to table `namespace.name` of the default warehouse, by links."""
    page.goto("/ui/projects")
    page.get_by_role("link", name="default", exact=True).click()
    page.get_by_role("link", name="default", exact=True).click()
    page.locator("ul.tree").get_by_role("link", name=namespace).click()
    page.get_by_role("link", name=name, exact=True).click()
    expect(page.locator("h1")).to_have_text(f"Table {namespace}.{name}")


def _table_url(page: Page, namespace: str, name: str) -> str:
    """The table's page in the default warehouse, found through the console's links."""
    page.goto("/ui/projects/00000000-0000-0000-0000-000000000000")
    href = page.get_by_role("link", name="default", exact=True).get_attribute("href")
    assert href is not None
    return f"{href}/table?ns={namespace}&name={name}"

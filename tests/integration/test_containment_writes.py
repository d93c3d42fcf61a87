"""A client cannot make the server write outside the warehouse.

Table and view locations (at create, stage-create, create transaction, set-location and view
replace), `write.metadata.path`, namespaces and names that look like paths, and very long
names: every hostile spelling is a clean 400 (409 where it overlaps another table), and
nothing is created outside the warehouse (nor, on S3, outside its prefix). Names that are
accepted land inside the warehouse. Metadata files get mode 0666 minus the umask.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from tests.integration.conftest import SCHEMA
from tests.integration.conftest import create_table as create
from tests.support import hostile
from tests.support.hostile import (
    Scene,
    assert_error,
    create_transaction_updates,
    inside_directory,
    local_path,
    namespace_path,
    view_body,
)

moto = hostile.module_moto
scene = hostile.scene_fixture("writes")


@dataclass
class Targets:
    """Where the hostile locations of one test point (file warehouse)."""

    warehouse: str  # file:///…/data/warehouse
    path: Path  # its directory
    outside: Path  # the sentinel directory
    victim: str  # another table's location
    table: str  # the location of the table the test commits to


@dataclass
class Fixture:
    scene: Scene
    ns: str
    targets: Targets


@pytest.fixture
def tables(scene: Scene) -> Fixture:
    """A namespace with a table `t`, a view `v` and another table `victim`."""
    api = scene.api
    ns = f"ns_{uuid4().hex[:8]}"
    assert api.post("/namespaces", {"namespace": [ns]}).status_code == 200
    victim = create(api, ns, "victim")
    table = create(api, ns, "t")
    assert api.post(f"/namespaces/{ns}/views", view_body("v", [ns])).status_code == 200
    warehouse = f"file://{api.warehouse_dir}"
    targets = Targets(
        warehouse,
        api.warehouse_dir,
        scene.world.outside,
        str(victim["metadata"]["location"]),
        str(table["metadata"]["location"]),
    )
    scene.arm()
    return Fixture(scene, ns, targets)


Build = Callable[[Targets], str]

# (id, location builder, expected status)
LOCATIONS: list[tuple[str, Build, int]] = [
    ("dotdot", lambda t: f"{t.warehouse}/../../x", 400),
    ("dotdot-3", lambda t: f"{t.warehouse}/../../../x", 400),
    ("dotdot-inner", lambda t: f"{t.warehouse}/a/../../../x", 400),
    ("encoded-dots", lambda t: f"{t.warehouse}/%2e%2e/%2e%2e/x", 400),
    ("encoded-dots-upper", lambda t: f"{t.warehouse}/%2E%2E/%2E%2E/x", 400),
    ("encoded-dot", lambda t: f"{t.warehouse}/%2e/x", 400),
    ("dots-encoded-slash", lambda t: f"{t.warehouse}/..%2f..%2fx", 400),
    ("encoded-slash", lambda t: f"{t.warehouse}/a%2Fb", 400),
    ("encoded-backslash", lambda t: f"{t.warehouse}/a%5Cb", 400),
    ("double-slash", lambda t: f"{t.warehouse}//x", 400),
    ("backslashes", lambda t: f"{t.warehouse}/x\\..\\..\\y", 400),
    ("query", lambda t: f"{t.warehouse}/x?y=1", 400),
    ("fragment", lambda t: f"{t.warehouse}/x#y", 400),
    ("nul", lambda t: f"{t.warehouse}/x\x00y", 400),
    ("newline", lambda t: f"{t.warehouse}/x\ny", 400),
    ("del", lambda t: f"{t.warehouse}/x\x7fy", 400),
    ("c1-control", lambda t: f"{t.warehouse}/x\x85y", 400),
    ("encoded-nul", lambda t: f"{t.warehouse}/x%00y", 400),
    ("other-host", lambda t: f"file://otherhost{t.path}/x", 400),
    ("http", lambda t: "http://127.0.0.1:9/x", 400),
    ("hdfs", lambda t: f"hdfs://namenode{t.path}/x", 400),
    ("gs", lambda t: "gs://bucket/x", 400),
    ("s3-in-a-file-warehouse", lambda t: "s3://bucket/x", 400),
    ("relative", lambda t: "x/y", 400),
    ("warehouse-root", lambda t: t.warehouse, 400),
    ("warehouse-root-slash", lambda t: t.warehouse + "/", 400),
    ("warehouse-root-bare", lambda t: str(t.path), 400),
    ("outside", lambda t: f"file://{t.outside}/x", 400),
    ("outside-bare", lambda t: f"{t.outside}/x", 400),
    ("outside-short", lambda t: f"file:{t.outside}/x", 400),
    ("outside-localhost", lambda t: f"file://localhost{t.outside}/x", 400),
    ("sibling-prefix", lambda t: f"{t.warehouse}2/x", 400),
    ("overlong-segment", lambda t: f"{t.warehouse}/{'a' * 300}", 400),
    ("overlong-location", lambda t: t.warehouse + "/a" * 2500, 400),
    ("another-table", lambda t: t.victim, 409),
    ("inside-another-table", lambda t: f"{t.victim}/sub", 409),
    ("around-other-tables", lambda t: t.victim.rsplit("/", 1)[0], 409),
]


@pytest.mark.parametrize(
    ("build", "status"), [p[1:] for p in LOCATIONS], ids=[p[0] for p in LOCATIONS]
)
def test_hostile_locations_are_refused_everywhere_a_client_sets_one(
    tables: Fixture, build: Build, status: int
) -> None:
    scene, ns, t = tables.scene, tables.ns, tables.targets
    api = scene.api
    location = build(t)
    before = api.get(f"/namespaces/{ns}/tables/t").json()["metadata-location"]
    base = f"/namespaces/{ns}"
    answers = {
        "create table": api.post(
            f"{base}/tables", {"name": "x1", "schema": SCHEMA, "location": location}
        ),
        "stage-create": api.post(
            f"{base}/tables",
            {"name": "x2", "schema": SCHEMA, "location": location, "stage-create": True},
        ),
        "create view": api.post(f"{base}/views", view_body("x3", [ns], location=location)),
        "set-location": api.post(
            f"{base}/tables/t", {"updates": [{"action": "set-location", "location": location}]}
        ),
        "view set-location": api.post(
            f"{base}/views/v", {"updates": [{"action": "set-location", "location": location}]}
        ),
    }
    staged = api.post(f"{base}/tables", {"name": "x4", "schema": SCHEMA, "stage-create": True})
    assert staged.status_code == 200, staged.text
    answers["create transaction"] = api.post(
        f"{base}/tables/x4",
        {
            "requirements": [{"type": "assert-create"}],
            "updates": create_transaction_updates(staged.json()["metadata"], location),
        },
    )
    for what, response in answers.items():
        assert response.status_code == status, f"{what}: {response.status_code} {response.text}"
        assert_error(response, status)
    for name in ("x1", "x3", "x4"):
        assert api.head(f"{base}/tables/{name}").status_code == 404
    assert api.get(f"{base}/tables/t").json()["metadata-location"] == before
    scene.finish()


METADATA_PATHS: list[tuple[str, Build]] = [
    ("absolute-outside", lambda t: f"{t.outside}/md"),
    ("file-outside", lambda t: f"file://{t.outside}/md"),
    ("file-short-outside", lambda t: f"file:{t.outside}/md"),
    ("relative", lambda t: "metadata2"),
    ("relative-dots", lambda t: "../../../md"),
    ("another-table", lambda t: f"{t.victim}/metadata"),
    ("warehouse-not-table", lambda t: f"{t.warehouse}/shared-md"),
    ("warehouse-root", lambda t: t.warehouse),
    ("dots-from-table", lambda t: f"{t.table}/../../md"),
    ("encoded-dots-from-table", lambda t: f"{t.table}/%2e%2e/%2e%2e/md"),
    ("encoded-slash", lambda t: f"{t.table}/a%2Fb"),
    ("query", lambda t: f"{t.table}/md?x=1"),
    ("other-scheme", lambda t: "s3://bucket/md"),
    ("other-host", lambda t: f"file://otherhost{t.table[len('file://') :]}/md"),
]


@pytest.mark.parametrize(
    "build", [p[1] for p in METADATA_PATHS], ids=[p[0] for p in METADATA_PATHS]
)
def test_write_metadata_path_must_lie_inside_the_table(tables: Fixture, build: Build) -> None:
    scene, ns, t = tables.scene, tables.ns, tables.targets
    api = scene.api
    path = build(t)
    prop = {"write.metadata.path": path}
    base = f"/namespaces/{ns}"
    before = api.get(f"{base}/tables/t").json()["metadata-location"]
    answers = {
        "create table": api.post(
            f"{base}/tables",
            {
                "name": "m1",
                "schema": SCHEMA,
                "location": f"{t.warehouse}/{ns}/m1",
                "properties": prop,
            },
        ),
        "set-properties": api.post(
            f"{base}/tables/t", {"updates": [{"action": "set-properties", "updates": prop}]}
        ),
        "create view": api.post(f"{base}/views", view_body("m2", [ns], properties=prop)),
        "view set-properties": api.post(
            f"{base}/views/v", {"updates": [{"action": "set-properties", "updates": prop}]}
        ),
        "transaction": api.post(
            "/transactions/commit",
            {
                "table-changes": [
                    {
                        "identifier": {"namespace": [ns], "name": "t"},
                        "requirements": [],
                        "updates": [{"action": "set-properties", "updates": prop}],
                    }
                ]
            },
        ),
    }
    staged = api.post(f"{base}/tables", {"name": "m3", "schema": SCHEMA, "stage-create": True})
    assert staged.status_code == 200, staged.text
    md = staged.json()["metadata"]
    answers["create transaction"] = api.post(
        f"{base}/tables/m3",
        {
            "requirements": [{"type": "assert-create"}],
            "updates": create_transaction_updates(md, md["location"], **prop),
        },
    )
    for what, response in answers.items():
        assert response.status_code == 400, f"{what}: {response.status_code} {response.text}"
        assert_error(response, 400)
    assert api.get(f"{base}/tables/t").json()["metadata-location"] == before
    scene.finish()


def test_write_metadata_path_inside_the_table_is_used(tables: Fixture) -> None:
    """The control of the cases above: a path inside the table's location works."""
    scene, ns, t = tables.scene, tables.ns, tables.targets
    api = scene.api
    custom = f"{t.table}/custom-metadata"
    response = api.post(
        f"/namespaces/{ns}/tables/t",
        {"updates": [{"action": "set-properties", "updates": {"write.metadata.path": custom}}]},
    )
    assert response.status_code == 200, response.text
    written = response.json()["metadata-location"]
    assert written.startswith(custom + "/") and local_path(written).is_file()
    scene.finish()


# Namespaces and names that look like paths: accepted or a clean 400, never outside.
NAMESPACES: list[tuple[str, list[str]]] = [
    ("dotdot", [".."]),
    ("dot", ["."]),
    ("dotdot-dotdot", ["..", ".."]),
    ("many-dotdots", [".."] * 40),
    ("slash", ["a/b"]),
    ("climb", ["../../../x"]),
    ("encoded-dots", ["%2e%2e"]),
    ("encoded-slash", ["..%2f..%2fx"]),
    ("root", ["/"]),
    ("backslash", ["..\\..\\x"]),
    ("tilde", ["~"]),
    ("space", [" "]),
    ("long-300", ["n" * 300]),
    ("long-5000", ["n" * 5000]),
]
NAMES: list[tuple[str, str]] = [
    ("dotdot", ".."),
    ("dot", "."),
    ("slash", "a/b"),
    ("climb", "../../../x"),
    ("encoded-dots", "%2e%2e"),
    ("backslash", "..\\..\\x"),
    ("long-300", "t" * 300),
    ("long-5000", "t" * 5000),
]


def _lands_inside(scene: Scene, response: Any) -> None:
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert_error(response, 400)
        return
    body = response.json()
    written = body["metadata-location"]
    assert inside_directory(written, scene.api.warehouse_dir), written
    assert local_path(written).is_file()
    assert inside_directory(body["metadata"]["location"], scene.api.warehouse_dir)


@pytest.mark.parametrize("levels", [p[1] for p in NAMESPACES], ids=[p[0] for p in NAMESPACES])
def test_namespaces_that_look_like_paths_stay_inside(scene: Scene, levels: list[str]) -> None:
    scene.arm()
    api = scene.api
    # Parents first (nested namespaces need them); an earlier case may have made some.
    for depth in range(1, len(levels)):
        parent = api.post("/namespaces", {"namespace": levels[:depth]})
        assert parent.status_code in (200, 400, 409), parent.text
    created = api.post("/namespaces", {"namespace": levels})
    assert created.status_code in (200, 400), created.text
    if created.status_code != 200:
        assert_error(created, 400)
    else:
        ns = namespace_path(levels)
        name = f"t{uuid4().hex[:6]}"
        _lands_inside(scene, api.post(f"/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA}))
        view = api.post(f"/namespaces/{ns}/views", view_body(f"v{uuid4().hex[:6]}", levels))
        _lands_inside(scene, view)
        commit = api.post(
            f"/namespaces/{ns}/tables/{name}",
            {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
        )
        _lands_inside(scene, commit)
    scene.finish()


@pytest.mark.parametrize("name", [p[1] for p in NAMES], ids=[p[0] for p in NAMES])
def test_names_that_look_like_paths_stay_inside(tables: Fixture, name: str) -> None:
    scene, ns = tables.scene, tables.ns
    api = scene.api
    created = api.post(f"/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA})
    _lands_inside(scene, created)
    if created.status_code == 200:
        path = f"/namespaces/{ns}/tables/{hostile.level(name)}"
        commit = api.post(path, {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]})
        _lands_inside(scene, commit)
        renamed = api.post(
            "/tables/rename",
            {
                "source": {"namespace": [ns], "name": name},
                "destination": {"namespace": [ns], "name": name + "2"},
            },
        )
        assert renamed.status_code in (204, 400), renamed.text
    view = api.post(f"/namespaces/{ns}/views", view_body(name + "v", [ns]))
    _lands_inside(scene, view)
    scene.finish()


# -- S3 ---------------------------------------------------------------------------------------
S3_LOCATIONS: list[tuple[str, Callable[[hostile.S3Side], str]]] = [
    ("sentinel-bucket", lambda s: s.world.location("x")),
    ("other-prefix", lambda s: f"s3://{s.bucket}/other/x"),
    ("sibling-prefix", lambda s: f"s3://{s.bucket}/wh2/x"),
    ("bucket-root", lambda s: f"s3://{s.bucket}"),
    ("warehouse-root", lambda s: f"s3://{s.bucket}/wh"),
    ("warehouse-root-slash", lambda s: f"s3://{s.bucket}/wh/"),
    ("dotdot", lambda s: f"s3://{s.bucket}/wh/../other/x"),
    ("encoded-dots", lambda s: f"s3://{s.bucket}/wh/%2e%2e/other/x"),
    ("encoded-slash", lambda s: f"s3://{s.bucket}/wh/..%2fother"),
    ("double-slash", lambda s: f"s3://{s.bucket}/wh//x"),
    ("query", lambda s: f"s3://{s.bucket}/wh/x?versionId=1"),
    ("fragment", lambda s: f"s3://{s.bucket}/wh/x#y"),
    ("alternative-protocol", lambda s: f"s3a://{s.bucket}/wh/x"),
    ("bucket-case", lambda s: f"s3://{s.bucket.upper()}/wh/x"),
    ("file-scheme", lambda s: "file:///tmp/x"),
    ("overlong-key", lambda s: f"s3://{s.bucket}/wh/" + "k" * 1100),
]


@pytest.mark.parametrize("build", [p[1] for p in S3_LOCATIONS], ids=[p[0] for p in S3_LOCATIONS])
def test_s3_locations_outside_the_warehouse_prefix_are_refused(
    scene: Scene, build: Callable[[hostile.S3Side], str]
) -> None:
    side = scene.s3()
    scene.arm()
    api = side.api
    ns = f"ns_{uuid4().hex[:8]}"
    assert api.post("/namespaces", {"namespace": [ns]}).status_code == 200
    table = create(api, ns, "t")
    location = build(side)
    base = f"/namespaces/{ns}"
    answers = {
        "create": api.post(f"{base}/tables", {"name": "x", "schema": SCHEMA, "location": location}),
        "view": api.post(f"{base}/views", view_body("w", [ns], location=location)),
        "set-location": api.post(
            f"{base}/tables/t", {"updates": [{"action": "set-location", "location": location}]}
        ),
        "write.metadata.path": api.post(
            f"{base}/tables/t",
            {
                "updates": [
                    {"action": "set-properties", "updates": {"write.metadata.path": location}}
                ]
            },
        ),
    }
    for what, response in answers.items():
        assert response.status_code == 400, f"{what}: {response.status_code} {response.text}"
        assert_error(response, 400)
    assert api.get(f"{base}/tables/t").json()["metadata-location"] == table["metadata-location"]
    scene.finish()


# -- file modes ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_metadata_files_get_mode_0666_minus_the_umask(scene: Scene, umask: int, mode: int) -> None:
    scene.arm()
    api = scene.api
    ns = f"ns_{uuid4().hex[:8]}"
    api.post("/namespaces", {"namespace": [ns]})
    old = os.umask(umask)
    try:
        created = create(api, ns, "t")
        committed = api.post(
            f"/namespaces/{ns}/tables/t",
            {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
        )
        view = api.post(f"/namespaces/{ns}/views", view_body("v", [ns]))
    finally:
        os.umask(old)
    assert committed.status_code == 200 and view.status_code == 200
    for location in (
        created["metadata-location"],
        committed.json()["metadata-location"],
        view.json()["metadata-location"],
    ):
        found = stat.S_IMODE(os.stat(local_path(location)).st_mode)
        assert found == mode, f"{location}: {oct(found)} under umask {oct(umask)}"
    scene.finish()

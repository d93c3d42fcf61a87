"""A warehouse's `storage-layout` decides where tables and views go when their create names
no location: `tabular-only` puts them all flat below the base, `full-hierarchy` one
directory per namespace level (by the namespace's id), Lakekeeper's `default` flat by id.
The layout is stored with the profile and shown back; a hostile one is refused before
anything is stored."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any
from uuid import UUID

from tests.integration.conftest import SCHEMA, Api
from tests.integration.test_views_api import VIEW_SCHEMA, version

ROOT = "/management/v1"


def warehouse(api: Api, directory: Path, layout: Any) -> tuple[str, str]:
    """A file warehouse with `layout`: its id and base location."""
    base = directory.as_uri()
    created = api.client.post(
        f"{ROOT}/warehouse",
        json={
            "warehouse-name": directory.name,
            "storage-profile": {
                "type": "file",
                "base-location": base,
                "storage-layout": layout,
            },
        },
    )
    assert created.status_code == 200, created.text
    return str(created.json()["warehouse-id"]), base


def post(api: Api, wid: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = api.client.post(f"/catalog/v1/{wid}{path}", json=body)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def table(api: Api, wid: str, ns: str, name: str) -> dict[str, Any]:
    return post(api, wid, f"/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA})


def on_disk(metadata_location: str) -> dict[str, Any]:
    path = Path(metadata_location.removeprefix("file://"))
    raw = path.read_bytes()
    found: dict[str, Any] = json.loads(gzip.decompress(raw) if path.suffix != ".json" else raw)
    return found


def test_tabular_only_puts_tables_and_views_flat_below_the_base(api: Api, tmp_path: Path) -> None:
    layout = {"type": "tabular-only", "tabular": "{name}-{uuid}"}
    wid, base = warehouse(api, tmp_path / "flat", layout)
    got = api.client.get(f"{ROOT}/warehouse/{wid}").json()
    assert got["storage-profile"]["storage-layout"] == layout
    post(api, wid, "/namespaces", {"namespace": ["sales"]})
    post(api, wid, "/namespaces", {"namespace": ["sales", "eu"]})

    orders = table(api, wid, "sales%1Feu", "orders")
    uuid = orders["metadata"]["table-uuid"]
    assert orders["metadata"]["location"] == f"{base}/orders-{uuid}"
    # The catalog wrote the first metadata file there.
    assert orders["metadata-location"].startswith(f"{base}/orders-{uuid}/metadata/")
    assert on_disk(orders["metadata-location"])["table-uuid"] == uuid

    # The same name in another namespace, and a hostile name: flat, one plain segment.
    other = table(api, wid, "sales", "orders")
    assert other["metadata"]["location"] == f"{base}/orders-{other['metadata']['table-uuid']}"
    odd = table(api, wid, "sales", "../x y")
    assert odd["metadata"]["location"] == f"{base}/.._x_y-{odd['metadata']['table-uuid']}"

    view = post(
        api,
        wid,
        "/namespaces/sales/views",
        {"name": "v", "schema": VIEW_SCHEMA, "view-version": version("SELECT 1")},
    )
    assert view["metadata"]["location"] == f"{base}/v-{view['metadata']['view-uuid']}"

    # A dropped and re-created name gets new files.
    dropped = api.client.delete(f"/catalog/v1/{wid}/namespaces/sales/tables/orders")
    assert dropped.status_code == 204, dropped.text
    again = table(api, wid, "sales", "orders")
    assert again["metadata"]["location"] != other["metadata"]["location"]
    # Nothing of it in namespace directories: the warehouse holds only table directories.
    names = sorted(p.name for p in (tmp_path / "flat").iterdir())
    assert all(name.startswith(("orders-", ".._x_y-", "v-")) for name in names), names


def test_full_hierarchy_names_namespace_directories_by_their_ids(api: Api, tmp_path: Path) -> None:
    layout = {"type": "full-hierarchy", "namespace": "{name}-{uuid}", "tabular": "{uuid}"}
    wid, base = warehouse(api, tmp_path / "deep", layout)
    post(api, wid, "/namespaces", {"namespace": ["sales"]})
    post(api, wid, "/namespaces", {"namespace": ["sales", "eu"]})
    ids = [
        api.client.get(f"{ROOT}/warehouse/{wid}/namespace-id", params={"namespace": ns}).json()[
            "namespace-id"
        ]
        for ns in ("sales", "sales\x1feu")
    ]
    orders = table(api, wid, "sales%1Feu", "orders")
    uuid = orders["metadata"]["table-uuid"]
    assert orders["metadata"]["location"] == f"{base}/sales-{ids[0]}/eu-{ids[1]}/{uuid}"


def test_lakekeepers_default_is_flat_by_id_and_none_keeps_icelogs(api: Api, tmp_path: Path) -> None:
    wid, base = warehouse(api, tmp_path / "lk", {"type": "default"})
    post(api, wid, "/namespaces", {"namespace": ["db"]})
    found = table(api, wid, "db", "t")
    assert found["metadata"]["location"] == f"{base}/{found['metadata']['table-uuid']}"

    own, own_base = warehouse(api, tmp_path / "own", None)
    got = api.client.get(f"{ROOT}/warehouse/{own}").json()["storage-profile"]
    assert "storage-layout" not in got
    post(api, own, "/namespaces", {"namespace": ["db"]})
    found = table(api, own, "db", "t")
    uuid = UUID(found["metadata"]["table-uuid"])
    assert found["metadata"]["location"] == f"{own_base}/db/t-{uuid.hex}"


def test_hostile_layouts_are_refused_and_nothing_is_stored(api: Api, tmp_path: Path) -> None:
    for n, layout in enumerate(
        [
            {"type": "tabular-only", "tabular": "../{uuid}"},
            {"type": "tabular-only", "tabular": "{name}"},
            {"type": "tabular-only", "tabular": "%2e%2e{uuid}"},
            {"type": "full-hierarchy", "namespace": "..", "tabular": "{uuid}"},
            {"type": "tabular-only", "tabular": "{uuid}" * 8},
            {"type": "flat"},
            "tabular-only",
        ]
    ):
        directory = tmp_path / f"bad{n}"
        response = api.client.post(
            f"{ROOT}/warehouse",
            json={
                "warehouse-name": f"bad{n}",
                "storage-profile": {
                    "type": "file",
                    "base-location": directory.as_uri(),
                    "storage-layout": layout,
                },
            },
        )
        assert response.status_code == 400, response.text
        assert "storage-layout" in response.json()["error"]["message"]
        assert not directory.exists()
    listed = {w["name"] for w in api.client.get(f"{ROOT}/warehouse").json()["warehouses"]}
    assert not {name for name in listed if name.startswith("bad")}

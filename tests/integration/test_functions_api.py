"""Functions (Iceberg UDFs, ADR 0017): listFunctions / loadFunction of main's REST spec,
written through the management API; served from the log like every other object. Every
answer is also checked against its document (main's spec for the catalog routes, the
generated management document for the writes: tests/support/api_contract.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from icelog.projections.rebuild import differences, rebuild
from tests.integration.conftest import Api, Authed, create_table
from tests.integration.test_concurrency import run_threads
from tests.integration.test_iceberg_events import all_events
from tests.integration.test_namespaces_api import error_of

MGMT = "/management/v1"


def definition(
    sql: str = "x + 1", *, params: Any = None, returns: Any = "int", **extra: Any
) -> dict[str, Any]:
    return {
        "parameters": params if params is not None else [{"name": "x", "type": "int"}],
        "return-type": returns,
        "representations": [{"type": "sql", "dialect": "spark", "sql": sql}],
        **extra,
    }


def namespace_id(api: Api, ns: str) -> str:
    found = api.client.get(f"{MGMT}/warehouse/{api.prefix}/namespace-id", params={"namespace": ns})
    assert found.status_code == 200, found.text
    return str(found.json()["namespace-id"])


def functions_url(api: Api, ns: str, name: str | None = None) -> str:
    base = f"{MGMT}/warehouse/{api.prefix}/namespace/{namespace_id(api, ns)}/function"
    return base if name is None else f"{base}/{name}"


def create_function(api: Api, ns: str, name: str, **body: Any) -> Any:
    if "definitions" not in body and "metadata" not in body:
        body["definitions"] = [definition()]
    return api.client.post(functions_url(api, ns), json={"name": name, **body})


def replace_function(api: Api, ns: str, name: str, **body: Any) -> Any:
    return api.client.put(functions_url(api, ns, name), json=body)


def drop_function(api: Api, ns: str, name: str) -> Any:
    return api.client.delete(functions_url(api, ns, name))


def test_function_lifecycle(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    created = create_function(api, "db", "add_one", doc="adds one", properties={"owner": "ana"})
    assert created.status_code == 200, created.text
    body = created.json()
    md = body["metadata"]
    assert md["format-version"] == 1 and md["doc"] == "adds one" and md["secure"] is False
    assert md["properties"] == {"owner": "ana"}
    [only] = md["definitions"]
    assert only["definition-id"] == "int" and only["function-type"] == "udf"
    assert only["current-version-id"] == 1 and [v["version-id"] for v in only["versions"]] == [1]
    assert md["definition-log"] == [
        {
            "timestamp-ms": only["versions"][0]["timestamp-ms"],
            "definition-versions": [{"definition-id": "int", "version-id": 1}],
        }
    ]
    location = body["metadata-location"]
    assert "/00000-" in location and location.endswith(".metadata.json")
    assert location.startswith(md["location"] + "/metadata/")
    on_disk = json.loads(Path(location.removeprefix("file://")).read_bytes())
    assert on_disk == md
    assert api.get("/namespaces/db/functions").json() == {"identifiers": [["db", "add_one"]]}
    loaded = api.get("/namespaces/db/functions/add_one")
    assert loaded.status_code == 200 and loaded.json() == body

    # A new body for the signature: version 2, current, logged; a new file.
    replaced = replace_function(api, "db", "add_one", definitions=[definition("x + 2")])
    assert replaced.status_code == 200, replaced.text
    md2 = replaced.json()["metadata"]
    assert md2["function-uuid"] == md["function-uuid"]
    assert [v["version-id"] for v in md2["definitions"][0]["versions"]] == [1, 2]
    assert md2["definitions"][0]["current-version-id"] == 2
    assert md2["definition-log"][-1]["definition-versions"] == [
        {"definition-id": "int", "version-id": 2}
    ]
    assert "/00001-" in replaced.json()["metadata-location"]
    assert api.get("/namespaces/db/functions/add_one").json() == replaced.json()

    # The same body again changes nothing: no new file, no event.
    before = api.position()
    same = replace_function(api, "db", "add_one", definitions=[definition("x + 2")])
    assert same.status_code == 200 and same.json() == replaced.json()
    assert api.position() == before

    # Roll back to version 1, and an overload next to it.
    rolled = replace_function(
        api,
        "db",
        "add_one",
        definitions=[
            definition("x + 1.0", params=[{"name": "x", "type": "float"}], returns="float")
        ],
        **{"set-current-versions": [{"definition-id": "int", "version-id": 1}]},
    )
    assert rolled.status_code == 200, rolled.text
    md3 = rolled.json()["metadata"]
    assert [d["definition-id"] for d in md3["definitions"]] == ["int", "float"]
    assert md3["definitions"][0]["current-version-id"] == 1
    assert md3["definition-log"][-1]["definition-versions"] == [
        {"definition-id": "int", "version-id": 1},
        {"definition-id": "float", "version-id": 1},
    ]

    # Remove the overload, drop the doc: still one definition.
    trimmed = replace_function(api, "db", "add_one", doc=None, **{"remove-definitions": ["float"]})
    assert trimmed.status_code == 200, trimmed.text
    assert "doc" not in trimmed.json()["metadata"]
    assert [d["definition-id"] for d in trimmed.json()["metadata"]["definitions"]] == ["int"]

    assert drop_function(api, "db", "add_one").status_code == 204
    gone = api.get("/namespaces/db/functions/add_one")
    assert gone.status_code == 404 and error_of(gone)["type"] == "NoSuchFunctionException"
    assert api.get("/namespaces/db/functions").json() == {"identifiers": []}
    assert Path(location.removeprefix("file://")).exists(), "a drop leaves the files"
    # The name is free again: a new function, a new uuid and location.
    again = create_function(api, "db", "add_one")
    assert again.status_code == 200, again.text
    assert again.json()["metadata"]["function-uuid"] != md["function-uuid"]
    assert again.json()["metadata"]["location"] != md["location"]


def test_signatures_nested_types_and_udtfs(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    struct = {
        "type": "struct",
        "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}],
    }
    params = [
        {"name": "a", "type": "int"},
        {"name": "b", "type": {"type": "list", "element": "decimal(9,2)"}},
        {"name": "c", "type": {"type": "map", "key": "string", "value": struct}},
    ]
    made = create_function(
        api,
        "db",
        "f",
        definitions=[
            definition("1", params=params, returns="int", **{"specific-name": "f_nested"}),
            definition(
                "SELECT 1 AS id, 'a' AS name",
                params=[],
                returns=struct,
                **{"function-type": "udtf", "on-null-input": "return-null", "deterministic": True},
            ),
        ],
        secure=True,
    )
    assert made.status_code == 200, made.text
    ids = [d["definition-id"] for d in made.json()["metadata"]["definitions"]]
    assert ids == ["int,list<decimal(9,2)>,map<string,struct<id:int,name:string>>", ""]
    assert made.json()["metadata"]["secure"] is True
    # A udtf must return a struct; a definition cannot change its return type in place.
    bad = create_function(api, "db", "g", definitions=[definition(**{"function-type": "udtf"})])
    assert bad.status_code == 400 and "struct" in str(error_of(bad)["message"])
    changed = replace_function(
        api, "db", "f", definitions=[definition("1", params=params, returns="long")]
    )
    assert changed.status_code == 400 and "return-type" in str(error_of(changed)["message"])


def test_pages_and_not_found(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    api.post("/namespaces", {"namespace": ["db", "inner"]})
    for name in ("e", "b", "d", "a", "c"):
        assert create_function(api, "db", name).status_code == 200
    assert create_function(api, "db%1Finner", "z").status_code == 200
    seen, token = [], None
    while True:
        params: dict[str, Any] = {"pageSize": 2}
        if token:
            params["pageToken"] = token
        page = api.get("/namespaces/db/functions", params=params).json()
        seen += page["identifiers"]
        token = page.get("next-page-token")
        if not token:
            break
    assert seen == [["db", n] for n in "abcde"]
    assert api.get("/namespaces/db%1Finner/functions").json()["identifiers"] == [
        ["db", "inner", "z"]
    ]
    for path in ("/namespaces/nope/functions", "/namespaces/nope/functions/a"):
        missing = api.get(path)
        assert missing.status_code == 404, path
        assert error_of(missing)["type"] == "NoSuchNamespaceException"
    bad_token = api.get("/namespaces/db/functions", params={"pageToken": "AA=="})
    assert bad_token.status_code == 400
    assert drop_function(api, "db", "nope").status_code == 404
    assert replace_function(api, "db", "nope", doc="x").status_code == 404
    unknown_ns = api.client.post(
        f"{MGMT}/warehouse/{api.prefix}/namespace/00000000-0000-4000-8000-000000000000/function",
        json={"name": "f", "definitions": [definition()]},
    )
    assert unknown_ns.status_code == 404
    duplicate = create_function(api, "db", "a")
    assert duplicate.status_code == 409 and error_of(duplicate)["type"] == "AlreadyExistsException"
    # Functions have their own identifier space: a table may have a function's name.
    create_table(api, "db", "a")
    assert api.get("/namespaces/db/functions/a").status_code == 200


HOSTILE_CREATES: list[Any] = [
    {},
    {"name": ""},
    {"name": "f"},
    {"name": "f", "definitions": []},
    {"name": "f", "definitions": [{}]},
    {"name": "f", "definitions": [definition(params=[{"name": "x", "type": "in t"}])]},
    {"name": "f", "definitions": [definition(params=[{"name": "x", "type": "list<int>"}])]},
    {"name": "f", "definitions": [definition(params=[{"name": "x", "type": {"type": "list"}}])]},
    {"name": "f", "definitions": [definition(params=[{"name": "x", "type": {"type": "tree"}}])]},
    {"name": "f", "definitions": [definition(params=[{"name": "x", "type": 7}])]},
    {"name": "f", "definitions": [definition(params=[{"name": "x", "type": None}])]},
    {"name": "f", "definitions": [definition(params=[{"name": "x", "type": "int"}] * 2)]},
    {"name": "f", "definitions": [definition(), definition("x")]},
    {"name": "f", "definitions": [definition(**{"definition-id": "long"})]},
    {"name": "f", "definitions": [{**definition(), "representations": []}]},
    {"name": "f", "definitions": [{**definition(), "representations": [{"type": "python"}]}]},
    {
        "name": "f",
        "definitions": [
            {**definition(), "representations": [definition()["representations"][0]] * 2}
        ],
    },
    {"name": "f", "definitions": [definition(**{"on-null-input": "skip"})]},
    {"name": "f", "definitions": [definition(**{"function-type": "udaf"})]},
    {"name": "f", "definitions": [definition(deterministic="yes")]},
    {"name": "f", "definitions": [definition(unknown=1)]},
    {
        "name": "f",
        "definitions": [
            definition(**{"specific-name": "s"}),
            definition(params=[], **{"specific-name": "s"}),
        ],
    },
    {"name": "f", "definitions": [definition()], "properties": {"s3.secret-access-key": "x"}},
    {"name": "f", "definitions": [definition()], "properties": {"a": 1}},
    {"name": "f\x00", "definitions": [definition()]},
    {"name": "f", "definitions": [definition()], "metadata": {}},
    {"name": "f", "metadata": {"function-uuid": "x"}},
    {"name": "f", "definitions": "all"},
    [1, 2],
    "null",
]


@pytest.mark.parametrize("body", HOSTILE_CREATES, ids=[str(i) for i in range(len(HOSTILE_CREATES))])
def test_bad_create_bodies_are_400(api: Api, body: Any) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    before = api.position()
    answer = api.client.post(functions_url(api, "db"), json=body)
    assert answer.status_code == 400, answer.text
    error_of(answer)
    assert api.position() == before


def test_bad_replaces_are_400_and_stale_ones_409(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    created = create_function(api, "db", "f").json()
    for body in (
        {"remove-definitions": ["int"]},  # none left
        {"remove-definitions": ["nope"]},
        {"set-current-versions": [{"definition-id": "int", "version-id": 9}]},
        {"set-current-versions": [{"definition-id": "nope", "version-id": 1}]},
        {"definitions": [definition()], "remove-definitions": ["int"]},
        {"definitions": [definition(params=[{"name": "x", "type": ""}])]},
        {"properties": {"db.password": "x"}},
        {"secure": "true"},
        {"expected-metadata-location": ""},
        {"unknown": True},
    ):
        answer = replace_function(api, "db", "f", **body)
        assert answer.status_code == 400, (body, answer.text)
        error_of(answer)
    stale = replace_function(
        api, "db", "f", doc="x", **{"expected-metadata-location": "file:///elsewhere.json"}
    )
    assert stale.status_code == 409 and error_of(stale)["type"] == "CommitFailedException"
    fresh = replace_function(
        api, "db", "f", doc="x", **{"expected-metadata-location": created["metadata-location"]}
    )
    assert fresh.status_code == 200, fresh.text


def test_adopting_a_complete_document(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    document: dict[str, Any] = {
        "function-uuid": "42fd3f91-bc10-41c1-8a52-92b57dd0a9b2",
        "format-version": 1,
        "definitions": [
            {
                "definition-id": "int",
                "parameters": [{"name": "x", "type": "int", "doc": "Input integer"}],
                "return-type": "int",
                "function-type": "udf",
                "versions": [
                    {
                        "version-id": 1,
                        "representations": [{"type": "sql", "dialect": "trino", "sql": "x + 2"}],
                        "timestamp-ms": 1734507000123,
                    },
                    {
                        "version-id": 2,
                        "deterministic": True,
                        "representations": [{"type": "sql", "dialect": "spark", "sql": "x + 1"}],
                        "timestamp-ms": 1735507000124,
                    },
                ],
                "current-version-id": 2,
            }
        ],
        "definition-log": [
            {
                "timestamp-ms": 1735507000124,
                "definition-versions": [{"definition-id": "int", "version-id": 2}],
            }
        ],
        "location": "s3://other-catalog/functions/add_one",
        "doc": "moved",
    }
    adopted = create_function(api, "db", "moved", metadata=document)
    assert adopted.status_code == 200, adopted.text
    md = adopted.json()["metadata"]
    assert md["function-uuid"] == document["function-uuid"]
    assert md["location"].startswith("file://") and md["definitions"] == document["definitions"]
    # A replace continues its versions.
    replaced = replace_function(api, "db", "moved", definitions=[definition("x + 3")])
    assert [v["version-id"] for v in replaced.json()["metadata"]["definitions"][0]["versions"]] == [
        1,
        2,
        3,
    ]
    broken: list[dict[str, Any]] = [
        {**document, "format-version": 2},
        {**document, "function-uuid": "not-a-uuid"},
        {**document, "definitions": []},
        {**document, "definitions": [{**document["definitions"][0], "definition-id": "long"}]},
        {**document, "definitions": [{**document["definitions"][0], "current-version-id": 7}]},
        {**document, "definitions": [document["definitions"][0]] * 2},
        {
            **document,
            "definitions": [
                {
                    **document["definitions"][0],
                    "versions": [document["definitions"][0]["versions"][0]] * 2,
                }
            ],
        },
        {k: v for k, v in document.items() if k != "definition-log"},
    ]
    for n, bad in enumerate(broken):
        answer = create_function(api, "db", f"bad{n}", metadata=bad)
        assert answer.status_code == 400, (n, answer.text)
        error_of(answer)


def test_namespaces_with_functions(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    api.post("/namespaces", {"namespace": ["db", "deep"]})
    assert create_function(api, "db%1Fdeep", "f").status_code == 200
    refused = api.delete("/namespaces/db%1Fdeep")
    assert refused.status_code == 409
    assert "1 function(s)" in str(error_of(refused)["message"])
    assert drop_function(api, "db%1Fdeep", "f").status_code == 204
    assert api.delete("/namespaces/db%1Fdeep").status_code == 204
    # A recursive drop drops the functions inside, each with its own events.
    api.post("/namespaces", {"namespace": ["db", "deep"]})
    assert create_function(api, "db%1Fdeep", "g").status_code == 200
    assert create_function(api, "db", "h").status_code == 200
    dropped = api.delete("/namespaces/db", params={"recursive": "true"})
    assert dropped.status_code == 204, dropped.text
    api.post("/namespaces", {"namespace": ["db"]})
    assert api.get("/namespaces/db/functions").json() == {"identifiers": []}
    assert create_function(api, "db", "h").status_code == 200


def test_concurrent_replaces_all_land(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    assert create_function(api, "db", "f").status_code == 200
    url = functions_url(api, "db", "f")
    signatures = ["int", "long", "string", "date"]

    def work(i: int) -> int:
        body = {"definitions": [definition(params=[{"name": "x", "type": signatures[i]}])]}
        return int(api.client.put(url, json=body).status_code)

    assert run_threads(4, work) == [200] * 4
    md = api.get("/namespaces/db/functions/f").json()["metadata"]
    assert sorted(d["definition-id"] for d in md["definitions"]) == sorted(signatures)
    assert len(md["definition-log"]) == 4  # create, then one entry per new overload


def test_the_log_rebuilds_functions_and_the_events_api_shows_them(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_function(api, "db", "f")
    create_function(api, "db", "gone")
    replace_function(api, "db", "f", definitions=[definition("x + 2")], properties={"a": "b"})
    replace_function(
        api, "db", "f", **{"set-current-versions": [{"definition-id": "int", "version-id": 1}]}
    )
    drop_function(api, "db", "gone")
    app = api.services.catalog.app
    assert rebuild(app.recorder, app.mapper, "rebuilt_") > 0
    assert differences(app.recorder, "rebuilt_") == []
    with app.recorder.datastore.transaction(commit=True) as cur:  # type: ignore[attr-defined]
        cur.execute("UPDATE icelog_functions SET metadata_location = 'x'")
    assert len(differences(app.recorder, "rebuilt_")) == 1

    found = [
        e["operation"]
        for e in all_events(api, size=50)
        if "function" in e["operation"]["operation-type"]
    ]
    assert [op["operation-type"] for op in found] == [
        "x-icelog.create-function",
        "x-icelog.create-function",
        "x-icelog.replace-function",
        "x-icelog.replace-function",
        "x-icelog.drop-function",
    ]
    assert found[0]["identifier"] == {"namespace": ["db"], "name": "f"}
    assert found[-1]["identifier"] == {"namespace": ["db"], "name": "gone"}
    assert all(op["metadata-location"] for op in found[:-1])
    created = all_events(api, {"operation-types": ["x-icelog.create-function"]}, size=50)
    assert [e["operation"]["identifier"]["name"] for e in created] == ["f", "gone"]
    by_name = all_events(api, {"catalog-objects-by-name": [["db", "f"]]}, size=50)
    assert [e["operation"]["operation-type"] for e in by_name] == [
        "x-icelog.create-function",
        "x-icelog.replace-function",
        "x-icelog.replace-function",
    ]


def test_the_routes_are_advertised(api: Api) -> None:
    endpoints = api.client.get("/catalog/v1/config").json()["endpoints"]
    assert "GET /v1/{prefix}/namespaces/{namespace}/functions" in endpoints
    assert "GET /v1/{prefix}/namespaces/{namespace}/functions/{function}" in endpoints


def test_rights_are_the_namespaces(authed: Authed) -> None:
    """With authentication on, functions take their namespace's rights: nothing exists for
    a caller who may not describe it; `describe` lists and loads; `create` creates;
    `modify` replaces and drops."""
    alice, bob = authed.idp.issue("alice"), authed.idp.issue("bob")
    ok = {"accept-terms-of-use": True}
    assert authed.call("POST", f"{MGMT}/bootstrap", alice, json=ok).status_code == 204
    config = authed.call("GET", "/catalog/v1/config", alice, params={"warehouse": "default"})
    prefix = config.json()["overrides"]["prefix"]
    base = f"/catalog/v1/{prefix}/namespaces"
    assert authed.call("POST", base, alice, json={"namespace": ["sales"]}).status_code == 200
    ns_id = authed.call(
        "GET", f"{MGMT}/warehouse/{prefix}/namespace-id", alice, params={"namespace": "sales"}
    ).json()["namespace-id"]
    functions = f"{MGMT}/warehouse/{prefix}/namespace/{ns_id}/function"
    made = authed.call("POST", functions, alice, json={"name": "f", "definitions": [definition()]})
    assert made.status_code == 200, made.text

    def bob_may() -> list[int]:
        return [
            authed.call("GET", f"{base}/sales/functions", bob).status_code,
            authed.call("GET", f"{base}/sales/functions/f", bob).status_code,
            authed.call(
                "POST", functions, bob, json={"name": "g", "definitions": [definition()]}
            ).status_code,
            authed.call("PUT", f"{functions}/f", bob, json={"doc": "bob's"}).status_code,
        ]

    assert bob_may() == [404, 404, 404, 404]
    grants = f"{MGMT}/permissions/namespace/{ns_id}/assignments"
    for relation, expected in (("describe", [200, 200, 403, 403]), ("create", [200, 200, 200, 403]),
                               ("modify", [200, 200, 409, 200])):  # fmt: skip
        granted = authed.call(
            "POST", grants, alice, json={"writes": [{"type": relation, "user": "oidc~bob"}]}
        )
        assert granted.status_code == 204, granted.text
        assert bob_may() == expected, relation
    assert authed.call("DELETE", f"{functions}/f", bob).status_code == 204

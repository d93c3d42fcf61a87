"""Namespaces over REST: the spec's status codes, error types and response shapes."""

from __future__ import annotations

from tests.integration.conftest import Api


def error_of(response: object) -> dict[str, object]:
    body = response.json()  # type: ignore[attr-defined]
    assert set(body) == {"error"}
    error: dict[str, object] = body["error"]
    assert {"message", "type", "code"} <= set(error)
    assert error["code"] == response.status_code  # type: ignore[attr-defined]
    return error


def test_config_advertises_prefix_separator_and_endpoints(api: Api) -> None:
    body = api.client.get("/catalog/v1/config", params={"warehouse": "default"}).json()
    assert body["defaults"] == {}
    assert body["overrides"] == {"prefix": api.prefix, "namespace-separator": "%1F"}
    assert "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}" in body["endpoints"]
    assert all(len(e.split(" ")) == 2 for e in body["endpoints"])
    missing = api.client.get("/catalog/v1/config", params={"warehouse": "nope"})
    assert missing.status_code == 404
    assert error_of(missing)["type"] == "NoSuchWarehouseException"


def test_create_load_head_and_duplicate(api: Api) -> None:
    created = api.post("/namespaces", {"namespace": ["sales"], "properties": {"owner": "ann"}})
    assert created.status_code == 200
    assert created.json() == {"namespace": ["sales"], "properties": {"owner": "ann"}}
    assert api.get("/namespaces/sales").json() == {
        "namespace": ["sales"],
        "properties": {"owner": "ann"},
    }
    assert api.head("/namespaces/sales").status_code == 204
    missing = api.head("/namespaces/other")
    assert missing.status_code == 404 and missing.content == b""
    again = api.post("/namespaces", {"namespace": ["sales"]})
    assert again.status_code == 409
    error = error_of(again)
    assert error["type"] == "AlreadyExistsException"
    assert error["message"] == "Namespace already exists: sales"
    load_missing = api.get("/namespaces/other")
    assert error_of(load_missing)["message"] == "Namespace does not exist: other"


def test_nested_namespaces_and_listing(api: Api) -> None:
    orphan = api.post("/namespaces", {"namespace": ["a", "b"]})
    assert orphan.status_code == 404
    assert error_of(orphan)["type"] == "NoSuchNamespaceException"
    for ns in (["a"], ["a", "b"], ["a", "c"], ["z"]):
        assert api.post("/namespaces", {"namespace": ns}).status_code == 200
    assert api.get("/namespaces").json() == {"namespaces": [["a"], ["z"]]}
    assert api.get("/namespaces", params={"parent": "a"}).json() == {
        "namespaces": [["a", "b"], ["a", "c"]]
    }
    # The separator is 0x1F, raw or percent-encoded, in the path.
    assert api.client.get(api.url("/namespaces/a%1Fb")).status_code == 200
    assert api.client.get(api.url("/namespaces/a%1fb")).status_code == 200
    no_parent = api.get("/namespaces", params={"parent": "nope"})
    assert error_of(no_parent)["message"] == "Namespace does not exist: nope"
    not_empty = api.delete("/namespaces/a")
    assert not_empty.status_code == 409
    assert error_of(not_empty)["type"] == "NamespaceNotEmptyException"
    assert api.delete("/namespaces/a%1Fb").status_code == 204
    assert api.get("/namespaces/a%1Fb").status_code == 404


def test_pagination_only_when_asked(api: Api) -> None:
    for i in range(5):
        api.post("/namespaces", {"namespace": [f"ns{i}"]})
    everything = api.get("/namespaces").json()
    assert len(everything["namespaces"]) == 5 and "next-page-token" not in everything
    # Java sends an empty pageToken on the first request: still everything.
    assert len(api.get("/namespaces", params={"pageToken": ""}).json()["namespaces"]) == 5
    seen: list[list[str]] = []
    params: dict[str, str] = {"pageSize": "2"}
    while True:
        page = api.get("/namespaces", params=params).json()
        seen.extend(page["namespaces"])
        if not page.get("next-page-token"):
            break
        params = {"pageSize": "2", "pageToken": page["next-page-token"]}
    assert seen == [[f"ns{i}"] for i in range(5)]
    assert api.get("/namespaces", params={"pageSize": "0"}).status_code == 400


def test_update_properties(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["p"], "properties": {"a": "1", "b": "2"}})
    response = api.post(
        "/namespaces/p/properties", {"updates": {"a": "9", "c": "3"}, "removals": ["b", "x"]}
    )
    assert response.status_code == 200
    assert response.json() == {"updated": ["a", "c"], "removed": ["b"], "missing": ["x"]}
    assert api.get("/namespaces/p").json()["properties"] == {"a": "9", "c": "3"}
    both = api.post("/namespaces/p/properties", {"updates": {"a": "1"}, "removals": ["a"]})
    assert both.status_code == 422
    secret = api.post(
        "/namespaces/p/properties", {"updates": {"s3.secret-access-key": "SUPERSECRET42"}}
    )
    assert secret.status_code == 400
    assert "SUPERSECRET42" not in secret.text
    assert "s3.secret-access-key" not in api.get("/namespaces/p").json()["properties"]


def test_bad_input_is_400_never_500(api: Api) -> None:
    assert api.client.post(api.url("/namespaces"), content=b"{not json").status_code == 400
    assert api.post("/namespaces", {"namespace": "flat"}).status_code == 400
    assert api.post("/namespaces", {"namespace": []}).status_code == 400
    assert api.post("/namespaces", {"namespace": ["x"], "properties": {"k": 1}}).status_code == 400
    unknown = api.client.get("/catalog/v1/nope/nope/nope")
    assert unknown.status_code == 404
    error_of(unknown)
    wrong_method = api.client.put(api.url("/namespaces"))
    assert wrong_method.status_code == 405
    error_of(wrong_method)

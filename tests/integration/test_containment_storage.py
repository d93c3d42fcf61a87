"""Warehouses never share storage, and a stored credential is only ever sent to the store it
was given for.

1. A warehouse on the same root as another (in any project), on its parent or a child, on
   another spelling of it (trailing slash, `file:` / bare path / `file://localhost`, S3
   endpoint spellings) or through a symbolic link is refused (409; 400 for spellings that do
   not parse, `..`, `%2e%2e`); a sibling (`wh` vs `wh2`) is not; a deleted warehouse's root
   is free again. A refused create leaves nothing behind.
2. `POST /warehouse/{id}/storage` changing the endpoint, region or STS endpoint (or dropping
   the endpoint) without the credential is 400 and changes nothing (no request reaches the
   new endpoint); with the credential it is checked. The access check's error reads the
   same for a closed port, a web server that is not S3, a TLS mismatch and a name that does
   not resolve (no network map).
"""

from __future__ import annotations

import http.server
import os
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from tests.support import hostile
from tests.support.hostile import (
    ROOT,
    Scene,
    assert_error,
    s3_credential,
    s3_profile,
)
from tests.support.server import free_port


def _second_project(scene: Scene) -> None:
    project = scene.api.client.post(f"{ROOT}/project", json={"project-name": "second"})
    assert project.status_code in (200, 201), project.text
    scene.extra["project"] = project.json()["project-id"]
    scene.world.allow(scene.base / "whs")


moto = hostile.module_moto
scene = hostile.scene_fixture("storage", prepare=_second_project)


def create_warehouse(
    scene: Scene, profile: dict[str, Any], project: str | None, **body: Any
) -> Any:
    payload: dict[str, Any] = {
        "warehouse-name": f"wh-{uuid4().hex[:10]}",
        "storage-profile": profile,
        **body,
    }
    if project is not None:
        payload["project-id"] = project
    return scene.api.client.post(f"{ROOT}/warehouse", json=payload)


def delete_warehouse(scene: Scene, warehouse_id: str) -> None:
    response = scene.api.client.delete(f"{ROOT}/warehouse/{warehouse_id}")
    assert response.status_code == 204, response.text


def file_profile(location: str) -> dict[str, Any]:
    return {"type": "file", "base-location": location}


# -- 1. file warehouses -----------------------------------------------------------------------
@dataclass
class Roots:
    a: Path  # the existing warehouse's directory (base/whs/a-…)
    links: Path  # a directory of symbolic links (base/whs/links-…)
    default: Path  # the default warehouse's directory
    token: str  # unique per test: new directories named by a case


FILE_CASES: list[tuple[str, Any, int]] = [
    ("same", lambda r: f"file://{r.a}", 409),
    ("trailing-slash", lambda r: f"file://{r.a}/", 409),
    ("trailing-slashes", lambda r: f"file://{r.a}///", 409),
    ("file-colon", lambda r: f"file:{r.a}", 409),
    ("bare-path", lambda r: str(r.a), 409),
    ("localhost", lambda r: f"file://localhost{r.a}", 409),
    ("parent", lambda r: f"file://{r.a.parent}", 409),
    ("grandparent", lambda r: f"file://{r.a.parent.parent}", 409),
    ("child", lambda r: f"file://{r.a}/child", 409),
    ("existing-child", lambda r: f"file://{r.a}/sub", 409),
    ("deep-child", lambda r: f"file://{r.a}/x/y/z", 409),
    ("default-warehouse-child", lambda r: f"file://{r.default}/mine-{r.token}", 409),
    ("dotdot", lambda r: f"file://{r.a}/../{r.a.name}", 400),
    ("dotdot-child", lambda r: f"file://{r.a}/x/..", 400),
    ("encoded-dots", lambda r: f"file://{r.a.parent}/x/%2e%2e/{r.a.name}", 400),
    ("encoded-slash", lambda r: f"file://{r.a.parent}%2F{r.a.name}", 400),
    ("double-slash", lambda r: f"file://{r.a.parent}//{r.a.name}", 400),
    ("other-host", lambda r: f"file://otherhost{r.a}", 400),
    ("filesystem-root", lambda r: "file:///", 400),
    ("link-to-it", lambda r: f"file://{r.links}/to-a", 409),
    ("link-to-its-parent", lambda r: f"file://{r.links}/to-parent/{r.a.name}", 409),
    ("link-to-its-child", lambda r: f"file://{r.links}/to-child", 409),
    ("link-to-default", lambda r: f"file://{r.links}/to-default", 409),
]


@pytest.fixture
def roots(scene: Scene) -> Iterator[Roots]:
    """A file warehouse `a` of the default project, and links to it."""
    whs = scene.base / "whs"
    a = whs / f"a-{uuid4().hex[:6]}"
    response = create_warehouse(scene, file_profile(f"file://{a}"), None)
    assert response.status_code in (200, 201), response.text
    (a / "sub").mkdir()
    links = whs / f"links-{uuid4().hex[:6]}"
    links.mkdir(parents=True)
    os.symlink(a, links / "to-a")
    os.symlink(a.parent, links / "to-parent")
    os.symlink(a / "sub", links / "to-child")
    os.symlink(scene.api.warehouse_dir, links / "to-default")
    scene.arm()
    yield Roots(a, links, scene.api.warehouse_dir, uuid4().hex[:6])
    delete_warehouse(scene, response.json()["warehouse-id"])


@pytest.mark.parametrize("project", ["default-project", "second-project"])
@pytest.mark.parametrize(
    ("build", "status"), [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES]
)
def test_overlapping_file_warehouses_are_refused(
    scene: Scene, roots: Roots, project: str, build: Any, status: int
) -> None:
    location = build(roots)
    target = scene.extra["project"] if project == "second-project" else None
    existed = _existing(location)
    response = create_warehouse(scene, file_profile(location), target)
    assert_error(response, status)
    for path in existed:
        assert path[1] or not path[0].exists(), f"a refused create made {path[0]}"
    scene.finish()


def _existing(location: str) -> list[tuple[Path, bool]]:
    """The directories a location names (as written, and resolved), and whether they exist."""
    text = re.sub(r"^file:(//(localhost)?)?", "", location)
    if not text.startswith("/") or "%" in text or "\\" in text:
        return []
    paths = {Path(text), Path(os.path.realpath(text))}
    return [(p, p.exists()) for p in paths]


def test_a_sibling_is_not_an_overlap_and_a_deleted_root_is_free(scene: Scene, roots: Roots) -> None:
    for location in (f"file://{roots.a}2", f"file://{roots.a.parent}/b-{uuid4().hex[:6]}"):
        response = create_warehouse(scene, file_profile(location), scene.extra["project"])
        assert response.status_code in (200, 201), response.text
        delete_warehouse(scene, response.json()["warehouse-id"])
    # Free again after its deletion (in the other project, even).
    again = scene.base / "whs" / f"c-{uuid4().hex[:6]}"
    first = create_warehouse(scene, file_profile(f"file://{again}"), None)
    assert first.status_code in (200, 201), first.text
    assert_error(create_warehouse(scene, file_profile(f"file://{again}"), None), 409)
    delete_warehouse(scene, first.json()["warehouse-id"])
    second = create_warehouse(scene, file_profile(f"file://{again}/"), scene.extra["project"])
    assert second.status_code in (200, 201), second.text
    delete_warehouse(scene, second.json()["warehouse-id"])
    scene.finish(verify_log=True)


def test_a_percent_encoded_spelling_of_a_root_overlaps_it(scene: Scene, roots: Roots) -> None:
    """`/whs/%61` names `/whs/a` to every reader that decodes (ADR 0011: a location must be
    safe under both readings), so it must not become a second warehouse on the same files."""
    encoded = "".join(f"%{ord(c):02X}" for c in roots.a.name)
    response = create_warehouse(scene, file_profile(f"file://{roots.a.parent}/{encoded}"), None)
    if response.status_code in (200, 201):
        delete_warehouse(scene, response.json()["warehouse-id"])
    assert_error(response, {400, 409})
    scene.finish()


# -- 1. S3 warehouses -------------------------------------------------------------------------
def test_overlapping_s3_warehouses_are_refused(scene: Scene) -> None:
    scene.arm()
    assert scene.moto is not None
    moto = scene.moto
    s3 = moto.client()
    bucket = f"lake-{uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    credential = s3_credential(moto.key, moto.secret)
    port = moto.endpoint.rsplit(":", 1)[1]

    def create(project: str | None, prefix: str, endpoint: str = moto.endpoint) -> Any:
        profile = s3_profile(endpoint, bucket, prefix)
        return create_warehouse(scene, profile, project, **{"storage-credential": credential})

    first = create(None, "wh")
    assert first.status_code in (200, 201), first.text
    cases: list[tuple[str, str, str, int]] = [
        ("same", "wh", moto.endpoint, 409),
        ("trailing-slash", "wh/", moto.endpoint, 409),
        ("leading-slash", "/wh", moto.endpoint, 409),
        ("whole-bucket", "", moto.endpoint, 409),
        ("child", "wh/sub", moto.endpoint, 409),
        ("deep-child", "wh/a/b/c", moto.endpoint, 409),
        ("endpoint-localhost", "wh", f"http://localhost:{port}", 409),
        ("endpoint-trailing-slash", "wh", moto.endpoint + "/", 409),
        ("endpoint-upper-case", "wh", moto.endpoint.upper().replace("HTTP", "http"), 409),
        ("dotdot", "wh/../wh", moto.endpoint, 400),
        ("encoded-dots", "x/%2e%2e/wh", moto.endpoint, 400),
        ("dot", "./wh", moto.endpoint, 400),
    ]
    failures = []
    for project in (None, scene.extra["project"]):
        for case, prefix, endpoint, status in cases:
            response = create(project, prefix, endpoint)
            if response.status_code != status:
                failures.append(f"{case} ({project}): {response.status_code} {response.text}")
                if response.status_code in (200, 201):
                    delete_warehouse(scene, response.json()["warehouse-id"])
                continue
            assert_error(response, status)
    assert failures == [], "\n".join(failures)
    sibling = create(scene.extra["project"], "wh2")
    assert sibling.status_code in (200, 201), sibling.text
    delete_warehouse(scene, sibling.json()["warehouse-id"])
    delete_warehouse(scene, first.json()["warehouse-id"])
    again = create(scene.extra["project"], "wh")
    assert again.status_code in (200, 201), again.text
    delete_warehouse(scene, again.json()["warehouse-id"])
    scene.finish(verify_log=True)


# -- 2. storage changes and the access check --------------------------------------------------
@dataclass
class Decoy:
    """A plain HTTP server that is not S3, recording every request it receives."""

    url: str
    requests: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def decoy() -> Iterator[Decoy]:
    found = Decoy("")

    class Handler(http.server.BaseHTTPRequestHandler):
        def _any(self) -> None:
            found.requests.append(f"{self.command} {self.path}")
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            body = b"<html><body>hello, not S3</body></html>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    found.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield found
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def plain_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Python's own file server (501 for PUT): a web server that is not S3."""
    directory = tmp_path_factory.mktemp("plain-http")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(directory), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def s3_warehouse(scene: Scene) -> Iterator[tuple[str, dict[str, Any]]]:
    """An S3 warehouse of its own: (id, the profile as sent)."""
    assert scene.moto is not None
    moto = scene.moto
    bucket = f"lake-{uuid4().hex[:12]}"
    moto.client().create_bucket(Bucket=bucket)
    profile = s3_profile(moto.endpoint, bucket, "wh")
    response = create_warehouse(
        scene, profile, None, **{"storage-credential": s3_credential(moto.key, moto.secret)}
    )
    assert response.status_code in (200, 201), response.text
    warehouse_id = str(response.json()["warehouse-id"])
    scene.arm()
    yield warehouse_id, profile
    delete_warehouse(scene, warehouse_id)


def stored_profile(scene: Scene, warehouse_id: str) -> dict[str, Any]:
    response = scene.api.client.get(f"{ROOT}/warehouse/{warehouse_id}")
    assert response.status_code == 200, response.text
    profile: dict[str, Any] = response.json()["storage-profile"]
    return profile


def test_changing_where_the_credential_goes_needs_the_credential(
    scene: Scene, s3_warehouse: tuple[str, dict[str, Any]], decoy: Decoy
) -> None:
    assert scene.moto is not None
    warehouse_id, profile = s3_warehouse
    port = scene.moto.endpoint.rsplit(":", 1)[1]
    before = stored_profile(scene, warehouse_id)
    decoy.requests.clear()
    without_endpoint = {k: v for k, v in profile.items() if k != "endpoint"}
    changes: dict[str, dict[str, Any]] = {
        "endpoint-decoy": {**profile, "endpoint": decoy.url},
        "endpoint-other-spelling": {**profile, "endpoint": f"http://localhost:{port}"},
        "endpoint-omitted": without_endpoint,
        "endpoint-null": {**profile, "endpoint": None},
        "endpoint-empty": {**profile, "endpoint": ""},
        "region": {**profile, "region": "eu-west-1"},
        "sts-endpoint": {**profile, "sts-endpoint": decoy.url},
        "sts-endpoint-with-sts": {**profile, "sts-endpoint": decoy.url, "sts-enabled": True},
        "bucket": {**profile, "bucket": f"lake-{uuid4().hex[:12]}"},
        "key-prefix": {**profile, "key-prefix": "elsewhere"},
        "type": {"type": "file", "base-location": f"file://{scene.world.outside}"},
    }
    url = f"{ROOT}/warehouse/{warehouse_id}/storage"
    failures = []
    for case, changed in changes.items():
        response = scene.api.client.post(url, json={"storage-profile": changed})
        if response.status_code != 400:
            failures.append(f"{case}: {response.status_code} {response.text}")
            continue
        assert_error(response, 400)
        if stored_profile(scene, warehouse_id) != before:
            failures.append(f"{case}: the stored profile changed")
    assert failures == [], "\n".join(failures)
    assert decoy.requests == [], "a request reached the new endpoint without its credential"
    # An unchanged profile (what a client sends back after GET) needs no credential.
    same = scene.api.client.post(url, json={"storage-profile": before})
    assert same.status_code in (200, 204), same.text
    # With the credential, a change is checked: a store that answers is taken...
    moto = scene.moto
    credential = s3_credential(moto.key, moto.secret)
    moved = scene.api.client.post(
        url,
        json={
            "storage-profile": {**profile, "endpoint": f"http://localhost:{port}"},
            "storage-credential": credential,
        },
    )
    assert moved.status_code in (200, 204), moved.text
    assert stored_profile(scene, warehouse_id)["endpoint"] == f"http://localhost:{port}"
    # ... one that does not is refused, and nothing changes.
    now = stored_profile(scene, warehouse_id)
    refused = scene.api.client.post(
        url,
        json={
            "storage-profile": {**profile, "endpoint": decoy.url},
            "storage-credential": credential,
        },
    )
    assert_error(refused, 400)  # its message: test_access_check_errors_do_not_map_the_network
    assert stored_profile(scene, warehouse_id) == now
    scene.finish(verify_log=True)


class _Closer(threading.Thread):
    """A TCP server that accepts connections and closes them at once."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.close()


@pytest.mark.parametrize("scene", ["sqlite"], indirect=True)
def test_access_check_errors_do_not_map_the_network(
    scene: Scene, decoy: Decoy, plain_http: str
) -> None:
    """The check runs before anything is stored (the database plays no part): on SQLite
    only, as every endpoint costs seconds of boto3's connect retries."""
    scene.arm()
    closer = _Closer()
    closer.start()
    endpoints = {
        "closed-port": f"http://127.0.0.1:{free_port()}",
        "python-http-server": plain_http,
        "web-server-answering-200": decoy.url,
        "tls-to-plain-http": decoy.url.replace("http://", "https://"),
        "closes-at-once": f"http://127.0.0.1:{closer.port}",
        "unresolvable": "http://no-such-host.invalid:9000",
    }
    assert scene.moto is not None
    credential = s3_credential("AKIAEXAMPLE000000000", "not-a-real-secret")
    messages: dict[str, str] = {}
    try:
        for case, endpoint in endpoints.items():
            profile = s3_profile(endpoint, "lake-network-map", "wh")
            response = create_warehouse(scene, profile, None, **{"storage-credential": credential})
            message = assert_error(response, 400)
            message = message.replace(endpoint, "<endpoint>")
            messages[case] = re.sub(r"\.icelog-probe-[0-9a-f]+", ".icelog-probe-<id>", message)
    finally:
        closer.sock.close()
    assert len(set(messages.values())) == 1, "\n".join(f"{c}: {m}" for c, m in messages.items())
    [message] = set(messages.values())
    assert "no S3 service answered at the endpoint" in message
    scene.finish()

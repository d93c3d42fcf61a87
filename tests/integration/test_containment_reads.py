"""Register / register-view read only regular files inside the warehouse.

Outside the warehouse (dot segments, /dev, /proc, other schemes, other buckets): 400, and
nothing is read (the sentinels' atimes stay in 1970). Inside the warehouse, every file that
cannot be used — missing, a FIFO (must not hang), a device, a socket, a directory, the
warehouse itself, a link (to a sentinel or to a valid file), a path through a linked
directory, larger than ICELOG_MAX_METADATA_FILE_MB (1 here), a gzip bomb, not JSON, JSON
nested too deep, not metadata, the other kind of metadata — gets the same answer: one
(status, type, message-without-the-location) for all of them, so registering cannot probe
the storage. A valid file inside the warehouse registers (the control).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import socket
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

import orjson
import pytest

from tests.integration.conftest import SCHEMA, Api
from tests.support import hostile
from tests.support.hostile import (
    MIB,
    Scene,
    assert_error,
    view_body,
)

LIMIT = MIB  # ICELOG_MAX_METADATA_FILE_MB=1 for this module
DEADLINE_S = 10.0  # a register that takes longer hangs (a FIFO opened for reading)


moto = hostile.module_moto
scene = hostile.scene_fixture("reads", max_metadata_file_bytes=LIMIT)


@dataclass
class Documents:
    """Valid metadata documents (as bytes) for a new table and a new view at `location`."""

    table: Callable[[str], bytes]
    view: Callable[[str], bytes]


def documents(api: Api, ns: str) -> Documents:
    staged = api.post(
        f"/namespaces/{ns}/tables", {"name": "staged", "schema": SCHEMA, "stage-create": True}
    )
    assert staged.status_code == 200, staged.text
    table_doc = staged.json()["metadata"]
    name = f"template{uuid4().hex[:6]}"
    created = api.post(f"/namespaces/{ns}/views", view_body(name, [ns]))
    assert created.status_code == 200, created.text
    view_doc = created.json()["metadata"]
    assert api.delete(f"/namespaces/{ns}/views/{name}").status_code == 204

    def table(location: str) -> bytes:
        return orjson.dumps({**table_doc, "table-uuid": str(uuid4()), "location": location})

    def view(location: str) -> bytes:
        return orjson.dumps({**view_doc, "view-uuid": str(uuid4()), "location": location})

    return Documents(table, view)


def register(api: Api, ns: str, kind: str, location: str) -> Any:
    """register (table) or register-view, in a thread with a deadline: a FIFO must not hang."""
    route = "register" if kind == "table" else "register-view"
    body = {"name": f"r{uuid4().hex[:8]}", "metadata-location": location}
    answer: list[Any] = []
    thread = threading.Thread(
        target=lambda: answer.append(api.post(f"/namespaces/{ns}/{route}", body)), daemon=True
    )
    thread.start()
    thread.join(DEADLINE_S)
    if thread.is_alive():
        _unblock_fifos(location)
        thread.join(5)
        pytest.fail(f"{route} of {location!r} did not answer within {DEADLINE_S:.0f} s (hangs)")
    return answer[0]


def _unblock_fifos(location: str) -> None:
    """Open the FIFO a hanging read waits on, so the test process can go on."""
    with contextlib.suppress(OSError, AssertionError):
        path = hostile.local_path(location)
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)


def normalized(response: Any, location: str) -> tuple[int, str, str]:
    """(status, type, message without the location) of an answer in the Iceberg error shape."""
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert error["code"] == response.status_code and error["message"] and error["type"], error
    return response.status_code, error["type"], error["message"].replace(location, "<location>")


def _gzip_bomb(size: int) -> bytes:
    return gzip.compress(b'{"format-version": 2, "pad": "' + b" " * size + b'"}', mtime=0)


def plant_unusable(scene: Scene, ns: str, docs: Documents) -> dict[str, str]:
    """Files inside the warehouse that cannot be registered, by case: their locations."""
    world = scene.world
    directory = scene.api.warehouse_dir / ns / "planted"
    directory.mkdir(parents=True)
    inside_dir = scene.api.warehouse_dir / ns / "elsewhere"
    inside_dir.mkdir()

    def path(name: str) -> Path:
        return directory / name

    # A valid document outside, whose location is inside the warehouse: a link to it must not
    # make it registrable.
    outside_valid = world.write_sentinel(
        f"metadata/{ns}.metadata.json", docs.table(f"file://{directory}/linked-table")
    )
    inside_valid = inside_dir / "00000-valid.metadata.json"
    inside_valid.write_bytes(docs.table(f"file://{inside_dir}/t"))
    cases: dict[str, Path | str] = {}
    cases["missing"] = path("00000-missing.metadata.json")
    os.mkfifo(path("00000-fifo.metadata.json"))
    cases["fifo"] = path("00000-fifo.metadata.json")
    path("00000-dir.metadata.json").mkdir()
    cases["directory"] = path("00000-dir.metadata.json")
    cases["warehouse-directory"] = f"file://{scene.api.warehouse_dir}"
    os.symlink(outside_valid, path("00000-link-out.metadata.json"))
    cases["link-to-outside"] = path("00000-link-out.metadata.json")
    os.symlink(world.sentinel("etc/passwd"), path("00000-link-passwd.metadata.json"))
    cases["link-to-passwd"] = path("00000-link-passwd.metadata.json")
    os.symlink(inside_valid, path("00000-link-in.metadata.json"))
    cases["link-to-inside"] = path("00000-link-in.metadata.json")
    os.symlink(outside_valid.parent, path("linked-dir"))
    cases["through-linked-directory"] = path("linked-dir") / outside_valid.name
    os.symlink("/dev/zero", path("00000-dev-zero.metadata.json"))
    cases["link-to-dev-zero"] = path("00000-dev-zero.metadata.json")
    os.symlink("/proc/self/environ", path("00000-environ.metadata.json"))
    cases["link-to-proc-environ"] = path("00000-environ.metadata.json")
    with contextlib.suppress(PermissionError):  # needs CAP_MKNOD (root in CI containers)
        os.mknod(path("00000-chardev.metadata.json"), stat.S_IFCHR | 0o600, os.makedev(1, 5))
        cases["character-device"] = path("00000-chardev.metadata.json")
    listener = socket.socket(socket.AF_UNIX)
    # Bound by a relative name: a socket's path may not exceed 107 bytes (tmp paths do).
    here = os.getcwd()
    os.chdir(path("00000-socket.metadata.json").parent)
    try:
        listener.bind("00000-socket.metadata.json")
    finally:
        os.chdir(here)
        listener.close()
    cases["unix-socket"] = path("00000-socket.metadata.json")
    big = docs.table(f"file://{directory}/big")[:-1] + b', "pad": "' + b" " * LIMIT + b'"}'
    path("00000-big.metadata.json").write_bytes(big)
    cases["larger-than-the-limit"] = path("00000-big.metadata.json")
    path("00000-bomb.gz.metadata.json").write_bytes(_gzip_bomb(2 * LIMIT))
    cases["gzip-bomb"] = path("00000-bomb.gz.metadata.json")
    path("00000-bomb-plain.metadata.json").write_bytes(_gzip_bomb(40 * LIMIT))
    cases["gzip-bomb-plain-name"] = path("00000-bomb-plain.metadata.json")
    path("00000-truncated.gz.metadata.json").write_bytes(gzip.compress(docs.table("x"))[:40])
    cases["truncated-gzip"] = path("00000-truncated.gz.metadata.json")
    path("00000-garbage.metadata.json").write_bytes(b"\x00\xffnot json at all")
    cases["not-json"] = path("00000-garbage.metadata.json")
    path("00000-empty.metadata.json").write_bytes(b"")
    cases["empty"] = path("00000-empty.metadata.json")
    path("00000-list.metadata.json").write_bytes(b"[1, 2, 3]")
    cases["json-array"] = path("00000-list.metadata.json")
    path("00000-nested.metadata.json").write_bytes(b'{"a": ' * 5000 + b"1" + b"}" * 5000)
    cases["nested-json"] = path("00000-nested.metadata.json")
    path("00000-nested-200.metadata.json").write_bytes(
        docs.table(f"file://{directory}/n")[:-1] + b', "x": ' + b"[" * 300 + b"]" * 300 + b"}"
    )
    cases["json-deeper-than-200"] = path("00000-nested-200.metadata.json")
    path("00000-other.metadata.json").write_bytes(b'{"hello": "world"}')
    cases["not-metadata"] = path("00000-other.metadata.json")
    path("00000-no-location.metadata.json").write_bytes(b'{"format-version": 2}')
    cases["no-location"] = path("00000-no-location.metadata.json")
    return {k: v if isinstance(v, str) else f"file://{v}" for k, v in cases.items()}


def test_unusable_files_inside_the_warehouse_get_one_answer(scene: Scene) -> None:
    api = scene.api
    ns = f"ns_{uuid4().hex[:8]}"
    assert api.post("/namespaces", {"namespace": [ns]}).status_code == 200
    docs = documents(api, ns)
    cases = plant_unusable(scene, ns, docs)
    # A view's metadata is not a table's, and the other way round.
    view_file = api.warehouse_dir / ns / "planted" / "00000-view.metadata.json"
    view_file.write_bytes(docs.view(f"file://{view_file.parent}/v"))
    table_file = api.warehouse_dir / ns / "planted" / "00001-table.metadata.json"
    table_file.write_bytes(docs.table(f"file://{table_file.parent}/t2"))
    scene.arm()

    answers: dict[str, tuple[int, str, str]] = {}
    for kind in ("table", "view"):
        wrong_kind = f"file://{view_file if kind == 'table' else table_file}"
        for case, location in {**cases, "other-kind": wrong_kind}.items():
            response = register(api, ns, kind, location)
            answers[f"{kind}:{case}"] = normalized(response, location)
    scene.world.assert_untouched()  # first: nothing outside was read
    wrong = {case: a for case, a in answers.items() if a[0] != 404}
    assert wrong == {}, "not 404:\n" + "\n".join(f"{c}: {a}" for c, a in sorted(wrong.items()))
    distinct = set(answers.values())
    assert len(distinct) == 1, "an oracle: " + "\n".join(
        f"{case}: {answer}" for case, answer in sorted(answers.items())
    )
    [(status, error_type, _message)] = distinct
    assert (status, error_type) == (404, "NotFoundException")
    listed = api.get(f"/namespaces/{ns}/tables").json()["identifiers"]
    assert listed == [], "nothing was registered"
    scene.finish()


def test_a_valid_file_inside_the_warehouse_registers(scene: Scene) -> None:
    """The control of the test above: a regular, valid file inside the warehouse."""
    api = scene.api
    ns = f"ns_{uuid4().hex[:8]}"
    api.post("/namespaces", {"namespace": [ns]})
    docs = documents(api, ns)
    scene.arm()
    directory = api.warehouse_dir / ns / "valid"
    directory.mkdir(parents=True)
    table_file = directory / "00000-t.metadata.json"
    table_file.write_bytes(docs.table(f"file://{directory}/t"))
    view_file = directory / "00000-v.gz.metadata.json"
    view_file.write_bytes(gzip.compress(docs.view(f"file://{directory}/v")))
    for kind, path in (("table", table_file), ("view", view_file)):
        response = register(api, ns, kind, f"file://{path}")
        assert response.status_code == 200, f"{kind}: {response.text}"
    scene.finish()


OUTSIDE: list[tuple[str, Callable[[Scene], str]]] = [
    ("dotdot-passwd", lambda s: f"file://{s.api.warehouse_dir}/../../outside/etc/passwd"),
    ("dotdot-etc-passwd", lambda s: f"file://{s.api.warehouse_dir}/" + "../" * 30 + "etc/passwd"),
    ("encoded-dots", lambda s: f"file://{s.api.warehouse_dir}/%2e%2e/%2e%2e/outside/secret.txt"),
    ("encoded-slash", lambda s: f"file://{s.api.warehouse_dir}/..%2f..%2foutside%2fsecret.txt"),
    ("dev-zero", lambda s: "/dev/zero"),
    ("dev-zero-uri", lambda s: "file:///dev/zero"),
    ("proc-environ", lambda s: "/proc/self/environ"),
    ("proc-stdin", lambda s: "/proc/self/fd/0"),
    ("etc-passwd", lambda s: "file:///etc/passwd"),
    ("sentinel", lambda s: f"file://{s.world.sentinel('metadata/00001-outside.metadata.json')}"),
    ("sentinel-bare", lambda s: str(s.world.sentinel("secret.txt"))),
    ("sentinel-short", lambda s: f"file:{s.world.sentinel('secret.txt')}"),
    ("sentinel-localhost", lambda s: f"file://localhost{s.world.sentinel('secret.txt')}"),
    ("other-host", lambda s: f"file://otherhost{s.world.sentinel('secret.txt')}"),
    ("sibling-prefix", lambda s: f"file://{s.api.warehouse_dir}2/x.metadata.json"),
    ("http", lambda s: "http://127.0.0.1:1/x.metadata.json"),
    ("s3", lambda s: "s3://bucket/x.metadata.json"),
    ("nul", lambda s: f"file://{s.api.warehouse_dir}/x\x00.metadata.json"),
    ("query", lambda s: f"file://{s.api.warehouse_dir}/x.metadata.json?y"),
]


@pytest.mark.parametrize("build", [p[1] for p in OUTSIDE], ids=[p[0] for p in OUTSIDE])
def test_locations_outside_the_warehouse_are_refused_unread(
    scene: Scene, build: Callable[[Scene], str]
) -> None:
    scene.arm()
    api = scene.api
    ns = f"ns_{uuid4().hex[:8]}"
    api.post("/namespaces", {"namespace": [ns]})
    location = build(scene)
    for kind in ("table", "view"):
        assert_error(register(api, ns, kind, location), 400)
    scene.finish()


# -- S3 ---------------------------------------------------------------------------------------
def test_s3_register_reads_only_inside_the_warehouse_prefix(scene: Scene) -> None:
    side = scene.s3()
    api, s3, bucket = side.api, side.s3, side.bucket
    ns = f"ns_{uuid4().hex[:8]}"
    assert api.post("/namespaces", {"namespace": [ns]}).status_code == 200
    docs = documents(api, ns)
    prefix = f"wh/{ns}/planted"

    def put(name: str, data: bytes) -> str:
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=data)
        return f"s3://{bucket}/{prefix}/{name}"

    valid_outside = side.world.location("wh/db/t/metadata/00001-x.metadata.json")
    side.world.client.put_object(
        Bucket=side.world.sentinel_bucket,
        Key="wh/db/t/metadata/00001-x.metadata.json",
        Body=docs.table(f"s3://{bucket}/{prefix}/from-outside"),
    )
    put("dir/00000-below.metadata.json", b"{}")
    inside = {
        "missing": f"s3://{bucket}/{prefix}/00000-missing.metadata.json",
        "directory": f"s3://{bucket}/{prefix}/dir",
        "warehouse-root": side.root,
        "larger-than-the-limit": put(
            "00000-big.metadata.json",
            docs.table(f"s3://{bucket}/{prefix}/big")[:-1] + b', "p": "' + b" " * LIMIT + b'"}',
        ),
        "gzip-bomb": put("00000-bomb.gz.metadata.json", _gzip_bomb(2 * LIMIT)),
        "not-json": put("00000-garbage.metadata.json", b"\x00\xffgarbage"),
        "empty": put("00000-empty.metadata.json", b""),
        "not-metadata": put("00000-other.metadata.json", b'{"hello": "world"}'),
        "other-kind": put("00000-view.metadata.json", docs.view(f"s3://{bucket}/{prefix}/v")),
    }
    outside = {
        "sentinel-bucket": valid_outside,
        "other-prefix": f"s3://{bucket}/other/secret.txt",
        "sibling-prefix": f"s3://{bucket}/wh2/db/t/metadata/snap.avro",
        "dotdot": f"s3://{bucket}/wh/../other/secret.txt",
        "encoded-dots": f"s3://{bucket}/wh/%2e%2e/other/secret.txt",
        "alternative-protocol": f"s3a://{bucket}/{prefix}/00000-garbage.metadata.json",
        "file": f"file://{scene.world.sentinel('secret.txt')}",
    }
    scene.arm()
    answers: dict[str, tuple[int, str, str]] = {}
    for case, location in inside.items():
        response = register(api, ns, "table", location)
        answers[case] = normalized(response, location)
    wrong = {case: a for case, a in answers.items() if a[0] != 404}
    assert wrong == {}, "not 404:\n" + "\n".join(f"{c}: {a}" for c, a in sorted(wrong.items()))
    assert len(set(answers.values())) == 1, "an oracle: " + "\n".join(
        f"{case}: {answer}" for case, answer in sorted(answers.items())
    )
    for case, location in outside.items():
        response = register(api, ns, "table", location)
        assert response.status_code == 400, f"{case}: {response.text}"
        assert_error(response, 400)
    control = put("00000-valid.metadata.json", docs.table(f"s3://{bucket}/{prefix}/valid"))
    registered = register(api, ns, "table", control)
    assert registered.status_code == 200, registered.text
    scene.finish()

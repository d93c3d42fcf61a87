"""A client cannot make the server delete files outside the table.

A table's metadata is written by its clients, so it may name any file: statistics and
partition statistics, manifest lists, manifests and data files, metadata-log entries (through
a registered document). Purge (hard drop with purgeRequested, or the expiry of a soft drop)
and `write.metadata.delete-after-commit.enabled` must delete only inside the table's own
location: the sentinel files outside the warehouse, another table's files in the same
warehouse and other buckets / prefixes on S3 survive (unread, on local storage), the purge's
outcome lists them as skipped, and the table's own files are deleted. Each test ends with
the checks of `icelog audit verify`, `projections verify` and `metadata verify`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple
from uuid import uuid4

import orjson
import pytest

from tests.integration.conftest import Api
from tests.integration.conftest import create_table as hostile_create
from tests.support import hostile
from tests.support.hostile import (
    ROOT,
    Scene,
    World,
    assert_error,
    local_path,
    main_ref,
    manifest_bytes,
    manifest_list_bytes,
    partition_statistics_update,
    snapshot_update,
    statistics_update,
)


def _soft_warehouse(scene: Scene) -> None:
    soft_dir = scene.base / "whs" / "soft"
    soft = hostile.file_warehouse(
        scene.api, soft_dir, delete_profile={"type": "soft", "expiration-seconds": 0}
    )
    scene.world.allow(soft_dir)
    scene.extra["soft"] = soft  # {"type": "soft", "expiration-seconds": 0}


moto = hostile.module_moto
scene = hostile.scene_fixture("deletes", prepare=_soft_warehouse)


@pytest.fixture
def fresh(scene: Scene) -> Scene:
    scene.arm()
    return scene


def finish(scene: Scene) -> None:
    scene.finish(verify_log=True)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid4().hex[:8]}"


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def commit(api: Api, ns: str, table: str, updates: list[dict[str, Any]]) -> Any:
    return api.post(f"/namespaces/{ns}/tables/{table}", {"updates": updates})


def tasks(api: Api, entity_id: str | None = None) -> list[dict[str, Any]]:
    filters = {} if entity_id is None else {"entity-id": entity_id}
    response = api.client.post(f"{ROOT}/warehouse/{api.prefix}/task/list", json=filters)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["tasks"]
    return found


def purge_task(api: Api, location: str) -> dict[str, Any]:
    """The purge task of the table at `location` (a registered table's id is not the
    document's table-uuid, so it is found by its location)."""
    [purge] = [
        t
        for t in tasks(api)
        if t["queue-name"] == "tabular-purge" and t["payload"].get("location") == location
    ]
    return purge


def purge_outcome(api: Api, location: str) -> dict[str, Any]:
    """The result of the table's succeeded purge task, from its `task.succeeded` event."""
    purge = purge_task(api, location)
    assert purge["status"] == "succeeded", purge
    events = api.client.get(
        f"{ROOT}/events",
        params={"aggregate-id": purge["task-id"], "type": "io.icelog.task.succeeded"},
    )
    assert events.status_code == 200, events.text
    [event] = events.json()["events"]
    result: dict[str, Any] = event["data"]["result"]
    return result


def assert_skipped(outcome: dict[str, Any], locations: list[str]) -> None:
    listed = {entry["location"]: entry["reason"] for entry in outcome["skipped"]}
    missing = [loc for loc in locations if loc not in listed]
    assert missing == [], f"not listed as skipped: {missing}; listed: {listed}"
    assert outcome["skipped-files"] >= len(locations)
    assert all(isinstance(reason, str) and reason for reason in listed.values())


@dataclass
class Victim:
    """Another table in the same warehouse, with files of its own."""

    name: str
    location: str
    files: list[Path]


def victim_table(api: Api, world: World, ns: str) -> Victim:
    name = unique("victim")
    created = hostile_create(api, ns, name)
    location = str(created["metadata"]["location"])
    root = local_path(location)
    files = [
        local_path(created["metadata-location"]),
        write(root / "data" / "v-00000.parquet", b"PAR1victimPAR1"),
        write(root / "metadata" / "snap-v.avro", manifest_list_bytes([f"{location}/m.avro"])),
        write(root / "metadata" / "v.puffin", b"victim statistics"),
    ]
    world.protect(*files)
    return Victim(name, location, files)


@dataclass
class Planted:
    location: str
    own: list[Path]  # the table's own files: purge deletes them
    outside: list[str]  # locations named by the metadata that purge must skip


def plant(api: Api, world: World, ns: str, name: str, victim: Victim) -> Planted:
    """Table `name` whose metadata names its own files and files everywhere else."""
    created = hostile_create(api, ns, name)
    location = str(created["metadata"]["location"])
    root = local_path(location)
    names = ("secret.txt", "stats/other.puffin", "lists/snap-1-outside.avro",
             "data/part-00000.parquet", "deep/a/b/c/file.bin")  # fmt: skip
    sentinel = {n: f"file://{world.sentinel(n)}" for n in names}
    v_data, v_list, v_stats = (f"file://{p}" for p in victim.files[1:])
    # A directory link planted inside the table's own location (a client of a file warehouse
    # writes there directly) that leads outside: the walk must not follow it.
    os.symlink(world.outside / "deep", root / "escape")
    through_link = f"{location}/escape/a/b/c/file.bin"
    own_data = write(root / "data" / "own-00000.parquet", b"PAR1ownPAR1")
    own_manifest = write(
        root / "metadata" / "own-m0.avro",
        manifest_bytes(
            [f"file://{own_data}", sentinel["data/part-00000.parquet"], v_data, through_link]
        ),
    )
    own_list = write(
        root / "metadata" / "snap-1-own.avro",
        manifest_list_bytes([f"file://{own_manifest}", sentinel["deep/a/b/c/file.bin"], v_list]),
    )
    own_stats = write(root / "metadata" / "own.puffin", b"own statistics")
    own_part_stats = write(root / "metadata" / "own-partition.stats", b"own partition statistics")
    # Spellings of outside files that are not even valid locations: skipped as invalid.
    dotted = f"{location}/../../../../outside/secret.txt"
    encoded = f"{location}/%2e%2e/%2e%2e/%2e%2e/%2e%2e/outside/etc/passwd"
    bare = str(world.sentinel("etc/passwd"))  # an absolute path: file:// without the scheme
    short = f"file:{world.sentinel('secret.txt')}"
    lists = [f"file://{own_list}", sentinel["lists/snap-1-outside.avro"], v_list, dotted, bare]
    updates: list[dict[str, Any]] = []
    for n, manifest_list in enumerate(lists, start=1):
        updates.append(snapshot_update(n, manifest_list, n, parent=n - 1 if n > 1 else None))
    updates.append(main_ref(len(lists)))
    updates += [
        statistics_update(1, f"file://{own_stats}"),
        statistics_update(2, sentinel["stats/other.puffin"]),
        statistics_update(3, v_stats),
        statistics_update(4, short),
        statistics_update(5, encoded),
        partition_statistics_update(1, f"file://{own_part_stats}"),
        partition_statistics_update(2, sentinel["secret.txt"]),
        partition_statistics_update(3, v_data),
        partition_statistics_update(4, through_link.replace("file.bin", "nothing")),
    ]
    response = commit(api, ns, name, updates)
    assert response.status_code == 200, response.text
    metadata_files = sorted((root / "metadata").glob("*.metadata.json"))
    assert len(metadata_files) == 2
    outside = [
        sentinel["lists/snap-1-outside.avro"],
        sentinel["stats/other.puffin"],
        sentinel["secret.txt"],
        sentinel["data/part-00000.parquet"],
        sentinel["deep/a/b/c/file.bin"],
        v_data,
        v_list,
        v_stats,
        dotted,
        bare,
        short,
        encoded,
    ]
    own = [own_data, own_manifest, own_list, own_stats, own_part_stats, *metadata_files]
    return Planted(location, own, outside)


@pytest.mark.parametrize("profile", ["hard", "soft-expiry"])
def test_purge_deletes_only_inside_the_table(fresh: Scene, profile: str) -> None:
    soft = fresh.extra["soft"]
    api = fresh.api if profile == "hard" else hostile.on_warehouse(fresh.api, soft)
    ns = unique("ns")
    assert api.post("/namespaces", {"namespace": [ns]}).status_code == 200
    victim = victim_table(api, fresh.world, ns)
    planted = plant(api, fresh.world, ns, "t", victim)
    fresh.world.assert_untouched()  # the commit itself read and wrote nothing outside

    dropped = api.delete(f"/namespaces/{ns}/tables/t", params={"purgeRequested": "true"})
    assert dropped.status_code == 204, dropped.text
    ran = api.run_tasks()
    assert ran == (1 if profile == "hard" else 2), "purge (after the expiration when soft)"

    fresh.world.assert_untouched()  # sentinels and the other table's files: unread, intact
    still_there = [p for p in planted.own if p.exists()]
    assert still_there == [], "the table's own files are deleted"
    outcome = purge_outcome(api, planted.location)
    assert_skipped(outcome, planted.outside)
    assert outcome["deleted-files"] == len(planted.own)
    finish(fresh)


class Staged(NamedTuple):
    """A namespace with a victim table and a staged table's metadata, to be registered at
    `location` (folder `root`), where an old metadata file of its own already lies."""

    ns: str
    victim: Victim
    staged: dict[str, Any]
    location: str
    root: Path
    own_old: Path


def _staged_beside_a_victim(api: Api, world: World, folder: str) -> Staged:
    ns = unique("ns")
    api.post("/namespaces", {"namespace": [ns]})
    victim = victim_table(api, world, ns)
    staged = hostile_create(api, ns, unique("staged"), **{"stage-create": True})["metadata"]
    location = f"file://{api.warehouse_dir}/{ns}/{folder}"
    root = local_path(location)
    own_old = write(root / "metadata" / "00000-old.metadata.json", b"{}")
    return Staged(ns, victim, staged, location, root, own_old)


def test_registered_metadata_log_and_snapshots_outside_are_skipped(fresh: Scene) -> None:
    """metadata-log entries (and the rest) of a document the client wrote and registered."""
    api, world = fresh.api, fresh.world
    ns, victim, staged, location, root, own_old = _staged_beside_a_victim(api, world, "registered")
    outside_md = f"file://{world.sentinel('metadata/00001-outside.metadata.json')}"
    victim_md = f"file://{victim.files[0]}"
    document = {
        **staged,
        "location": location,
        "metadata-log": [
            {"timestamp-ms": 1, "metadata-file": outside_md},
            {"timestamp-ms": 2, "metadata-file": victim_md},
            {"timestamp-ms": 3, "metadata-file": f"file://{own_old}"},
            {"timestamp-ms": 4, "metadata-file": f"file://{world.sentinel('secret.txt')}"},
        ],
    }
    current = write(root / "metadata" / "00001-current.metadata.json", _json(document))
    # A document claiming another table's files (so that its purge would delete them) or
    # the whole warehouse does not register.
    for claimed, status in (
        (victim.location, 409),
        (victim.location + "/data", 409),
        (victim.location.rsplit("/", 1)[0], 409),
        (f"file://{api.warehouse_dir}", 400),
        (f"file://{world.outside}", 400),
    ):
        planted = write(
            root / "metadata" / f"00009-{uuid4().hex}.metadata.json",
            _json({**document, "location": claimed}),
        )
        answer = api.post(
            f"/namespaces/{ns}/register", {"name": "x", "metadata-location": f"file://{planted}"}
        )
        assert_error(answer, status)
        planted.unlink()
    registered = api.post(
        f"/namespaces/{ns}/register", {"name": "r", "metadata-location": f"file://{current}"}
    )
    assert registered.status_code == 200, registered.text
    assert (
        api.delete(f"/namespaces/{ns}/tables/r", params={"purgeRequested": "true"}).status_code
        == 204
    )
    assert api.run_tasks() == 1
    assert not own_old.exists() and not current.exists()
    assert all(p.exists() for p in victim.files)
    outcome = purge_outcome(api, location)
    assert_skipped(outcome, [outside_md, victim_md, f"file://{world.sentinel('secret.txt')}"])
    finish(fresh)


def test_delete_after_commit_deletes_only_inside_the_table(fresh: Scene) -> None:
    """`write.metadata.delete-after-commit.enabled` with previous-versions-max=1 on a table
    whose (registered) metadata-log names sentinels and another table's metadata file."""
    api, world = fresh.api, fresh.world
    ns, victim, staged, location, root, own_old = _staged_beside_a_victim(api, world, "cleaned")
    log = [
        f"file://{world.sentinel('metadata/00001-outside.metadata.json')}",
        f"file://{victim.files[0]}",
        f"file://{world.sentinel('secret.txt')}",
        str(world.sentinel("etc/passwd")),
        f"{location}/../../../../outside/deep/a/b/c/file.bin",
        f"file://{own_old}",
    ]
    document = {
        **staged,
        "location": location,
        "properties": {
            "write.metadata.delete-after-commit.enabled": "true",
            "write.metadata.previous-versions-max": "1",
        },
        "metadata-log": [{"timestamp-ms": n, "metadata-file": f} for n, f in enumerate(log)],
    }
    current = write(root / "metadata" / "00001-current.metadata.json", _json(document))
    registered = api.post(
        f"/namespaces/{ns}/register", {"name": "c", "metadata-location": f"file://{current}"}
    )
    assert registered.status_code == 200, registered.text
    for n in range(3):
        response = commit(api, ns, "c", [{"action": "set-properties", "updates": {"n": str(n)}}])
        assert response.status_code == 200, response.text
    assert len(response.json()["metadata"]["metadata-log"]) == 1
    assert not own_old.exists(), "the table's own file that left the metadata-log is deleted"
    assert not current.exists()
    assert all(p.exists() for p in victim.files)
    finish(fresh)


def test_the_task_list_shows_what_a_purge_skipped(fresh: Scene) -> None:
    """docs/security.md: the purge task's outcome, `GET .../task/list`, carries
    `skipped-files` and `skipped`."""
    api, world = fresh.api, fresh.world
    ns = unique("ns")
    api.post("/namespaces", {"namespace": [ns]})
    created = hostile_create(api, ns, "t")
    outside = f"file://{world.sentinel('stats/other.puffin')}"
    updates = [
        snapshot_update(1, f"{created['metadata']['location']}/metadata/none.avro", 1),
        statistics_update(1, outside),
    ]
    assert commit(api, ns, "t", updates).status_code == 200
    api.delete(f"/namespaces/{ns}/tables/t", params={"purgeRequested": "true"})
    api.run_tasks()
    world.assert_untouched()
    purge = purge_task(api, str(created["metadata"]["location"]))
    shown = _find_key(purge, "skipped")
    assert shown is not None, f"no 'skipped' in the task as listed: {purge}"
    assert outside in str(shown)


def _find_key(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        if key in value:
            return value[key]
        for item in value.values():
            found = _find_key(item, key)
            if found is not None:
                return found
    if isinstance(value, list):
        for item in value:
            found = _find_key(item, key)
            if found is not None:
                return found
    return None


def _json(document: dict[str, Any]) -> bytes:
    return orjson.dumps(document)


# -- S3 ---------------------------------------------------------------------------------------
def test_s3_purge_deletes_only_inside_the_table(fresh: Scene) -> None:
    side = fresh.s3()
    fresh.arm()
    api, s3, bucket, world = side.api, side.s3, side.bucket, side.world
    ns = unique("ns")
    assert api.post("/namespaces", {"namespace": [ns]}).status_code == 200
    victim = hostile_create(api, ns, "victim")
    v_location = str(victim["metadata"]["location"])
    v_key = v_location.split(f"s3://{bucket}/", 1)[1]
    v_stats = f"{v_location}/metadata/v.puffin"
    s3.put_object(Bucket=bucket, Key=f"{v_key}/metadata/v.puffin", Body=b"victim")
    created = hostile_create(api, ns, "t")
    location = str(created["metadata"]["location"])
    key = location.split(f"s3://{bucket}/", 1)[1]
    own_data = f"{location}/data/own.parquet"
    own_manifest = f"{location}/metadata/own-m0.avro"
    own_list = f"{location}/metadata/snap-1-own.avro"
    own_stats = f"{location}/metadata/own.puffin"
    outside_data = world.location("data/part-00000.parquet")
    s3.put_object(Bucket=bucket, Key=f"{key}/data/own.parquet", Body=b"own")
    s3.put_object(
        Bucket=bucket,
        Key=f"{key}/metadata/own-m0.avro",
        Body=manifest_bytes([own_data, outside_data, f"s3://{bucket}/other/secret.txt"]),
    )
    s3.put_object(
        Bucket=bucket,
        Key=f"{key}/metadata/snap-1-own.avro",
        Body=manifest_list_bytes([own_manifest, f"s3://{bucket}/wh2/db/t/metadata/snap.avro"]),
    )
    s3.put_object(Bucket=bucket, Key=f"{key}/metadata/own.puffin", Body=b"stats")
    lists = [
        own_list,
        world.location("lists/snap-1-outside.avro"),
        f"s3://{bucket}/wh2/db/t/metadata/snap.avro",
        f"s3a://{world.sentinel_bucket}/secret.txt",
        f"{location}/../../../../other/secret.txt",
    ]
    updates: list[dict[str, Any]] = [
        snapshot_update(n, ml, n, parent=n - 1 if n > 1 else None)
        for n, ml in enumerate(lists, start=1)
    ]
    updates += [
        statistics_update(1, own_stats),
        statistics_update(2, world.location("stats/other.puffin")),
        statistics_update(3, v_stats),
        statistics_update(4, f"s3://{bucket}/other/secret.txt"),
        partition_statistics_update(1, world.location("wh/db/t/metadata/00001-x.metadata.json")),
        partition_statistics_update(2, f"file://{fresh.world.sentinel('secret.txt')}"),
    ]
    response = commit(api, ns, "t", updates)
    assert response.status_code == 200, response.text
    dropped = api.delete(f"/namespaces/{ns}/tables/t", params={"purgeRequested": "true"})
    assert dropped.status_code == 204
    assert api.run_tasks() == 1
    assert side.keys(key + "/") == [], "the table's own objects are deleted"
    assert f"{v_key}/metadata/v.puffin" in side.keys(v_key + "/")
    outcome = purge_outcome(api, location)
    assert_skipped(
        outcome,
        [
            world.location("lists/snap-1-outside.avro"),
            world.location("stats/other.puffin"),
            world.location("wh/db/t/metadata/00001-x.metadata.json"),
            f"s3://{bucket}/wh2/db/t/metadata/snap.avro",
            f"s3://{bucket}/other/secret.txt",
            outside_data,
            v_stats,
            f"file://{fresh.world.sentinel('secret.txt')}",
        ],
    )
    finish(fresh)

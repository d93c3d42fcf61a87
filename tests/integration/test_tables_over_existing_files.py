# ruff: noqa: F811 - the fixtures are imported from test_storage_rights
"""Second-reader attacks: storage access to files the caller holds no right on, by creating
or registering a table of one's own on top of where another table's files still lie.

A chosen table location is accepted when it overlaps no live or soft-dropped table. The
files of an unregistered table, of a table dropped without purge, and of one whose purge
has not run yet are in no table's location any more: a user with `create` in ANY
namespace of the warehouse makes a table there, owns it, and is vended read-write
credentials (or the signer) for the old table's data. The staged-create path refuses
exactly this (`new_table_rights`: "it may lie on ... a dropped table's files"), the plain
create, the assert-create commit and a set-location commit do not.

Fixed: a location that already holds files takes `modify` on the warehouse (409 for anyone
else), and registerTable always needs it (403); the overlap lookup also runs on the
percent-decoded location. The tests below the attacks pin what the fix still allows.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.integration.conftest import SCHEMA, Authed
from tests.integration.test_storage_rights import (  # noqa: F401 - fixtures
    BUCKET,
    VENDED,
    Scene,
    credentials_of,
    key_of,
    moto,
    no_ambient_aws_credentials,
    s3_client,
    scene,
)
from tests.support.callers import Caller
from tests.support.moto_server import client
from tests.support.staging import staged_create_updates

pytestmark = pytest.mark.attack

MGMT = "/management/v1"


def _victim_files(scene: Scene) -> tuple[str, str]:
    """The victim table's location and its metadata file's key (alice's table ns.t)."""
    loaded = scene.load(scene.alice, VENDED)
    return loaded["metadata"]["location"], key_of(loaded["metadata-location"])


def _sandbox(scene: Scene, who: Any) -> None:
    """`who` gets a namespace of their own to create tables in; no right on ns or ns.t."""
    scene.alice.ok("POST", scene.url("/namespaces"), {"namespace": ["sandbox"]})
    nid = scene.alice.ok(
        "GET", f"{MGMT}/warehouse/{scene.prefix}/namespace-id", params={"namespace": "sandbox"}
    )["namespace-id"]
    scene.grant(f"namespace/{nid}", "create", who)


def _assert_cannot_read(scene: Scene, who: Any, key: str, answer: Any) -> None:
    """Whatever `answer` handed out must not reach the victim's file `key`. moto does not
    enforce the session policy AssumeRole is given (test_storage_rights.py), so the scope
    is judged from the credential's prefix, which is the policy's resource (vending.py),
    as real S3 would judge it; the read through moto only shows the keys work."""
    creds = credentials_of(answer)
    if not creds:
        return
    scope = str(creds[0]["prefix"]).rstrip("/")
    victim = f"s3://{BUCKET}/{key}"
    if not victim.startswith(scope + "/"):
        return  # scoped elsewhere: real S3 refuses
    s3 = s3_client(creds[0]["config"])
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    pytest.fail(
        f"{who.id} was vended credentials scoped to {scope}, over another table's file "
        f"{key} (read {len(body)} bytes with them)"
    )


def _assert_files_held(answer: Any) -> None:
    """The fix: a location that already holds files takes `modify` on the warehouse; anyone
    else is refused 409, naming no table."""
    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert error["type"] == "LocationAlreadyTakenException", error
    assert "already holds files" in error["message"], error
    assert ".t" not in error["message"].split("already holds files")[1], error


def test_unregistered_tables_files_are_not_handed_to_a_creator_elsewhere(scene: Scene) -> None:
    """alice unregisters ns.t (its files stay, as the spec says); erin, who may create
    only in `sandbox` and never had a right on ns.t, makes sandbox.x AT ns.t's old
    location and is vended read-write credentials over alice's files."""
    erin = scene.user("erin")
    _sandbox(scene, erin)
    location, metadata_key = _victim_files(scene)
    gone = scene.alice("POST", scene.url("/namespaces/ns/tables/t/unregister"))
    assert gone.status_code == 200, gone.text
    made = scene.create(erin, "sandbox", "x", headers=VENDED, location=location)
    _assert_files_held(made)
    if made.status_code != 200:
        return  # refused: held
    _assert_cannot_read(scene, erin, metadata_key, made.json())
    loaded = erin("GET", scene.url("/namespaces/sandbox/tables/x"), headers=VENDED)
    _assert_cannot_read(scene, erin, metadata_key, loaded.json())


def test_a_namespace_wide_location_needs_no_table_id(scene: Scene) -> None:
    """Not even the old table's id is needed: once ns holds no live table, a location at
    ns's directory covers every file its dropped tables left."""
    erin = scene.user("erin")
    _sandbox(scene, erin)
    location, metadata_key = _victim_files(scene)
    # A plain drop (no purge) of the only table in ns: Spark's DROP TABLE.
    assert scene.alice("DELETE", scene.url("/namespaces/ns/tables/t")).status_code == 204
    ns_dir = location.rsplit("/", 1)[0]
    made = scene.create(erin, "sandbox", "wide", headers=VENDED, location=ns_dir)
    _assert_files_held(made)
    if made.status_code != 200:
        return
    _assert_cannot_read(scene, erin, metadata_key, made.json())


def test_a_pending_purge_is_defeated_by_a_table_at_its_location(scene: Scene) -> None:
    """alice drops ns.t WITH purge; before the purge task runs, erin makes a table at
    its location: she reads the files alice asked to delete, and the purge then skips
    them (they lie inside another table's location now) - they are never deleted."""
    erin = scene.user("erin")
    _sandbox(scene, erin)
    location, metadata_key = _victim_files(scene)
    dropped = scene.alice(
        "DELETE", scene.url("/namespaces/ns/tables/t"), params={"purgeRequested": "true"}
    )
    assert dropped.status_code == 204, dropped.text
    made = scene.create(erin, "sandbox", "squat", headers=VENDED, location=location)
    # Refused (a pending purge keeps its location, and the files are there): no squat,
    # and the purge must delete everything.
    assert made.status_code == 409, made.text
    assert made.json()["error"]["type"] == "LocationAlreadyTakenException", made.text
    scene.authed.services.tasks.run_until_idle()
    admin = client(scene.moto.endpoint, "s3", scene.moto.key, scene.moto.secret)
    left = admin.list_objects_v2(Bucket=BUCKET, Prefix=key_of(location) + "/metadata/")
    left_keys = [o["Key"] for o in left.get("Contents", [])]
    assert metadata_key not in left_keys, "the purge alice asked for deleted nothing"
    if made.status_code == 200:
        _assert_cannot_read(scene, erin, metadata_key, made.json())


def _own_table_beside_unregistered_files(scene: Scene, name: str) -> tuple[Caller, str, str]:
    """erin with her own table `sandbox.name`, once alice unregistered ns.t and left its
    files: erin, their location and the metadata file's key."""
    erin = scene.user("erin")
    _sandbox(scene, erin)
    location, metadata_key = _victim_files(scene)
    made = scene.create(erin, "sandbox", name)
    assert made.status_code == 200, made.text
    assert scene.alice("POST", scene.url("/namespaces/ns/tables/t/unregister")).status_code == 200
    return erin, location, metadata_key


def test_set_location_onto_an_unregistered_tables_files(scene: Scene) -> None:
    """The same through a commit: erin moves her own table onto the old location."""
    erin, location, metadata_key = _own_table_beside_unregistered_files(scene, "mine")
    moved = erin(
        "POST",
        scene.url("/namespaces/sandbox/tables/mine"),
        json={"requirements": [], "updates": [{"action": "set-location", "location": location}]},
    )
    _assert_files_held(moved)
    if moved.status_code != 200:
        return
    loaded = erin("GET", scene.url("/namespaces/sandbox/tables/mine"), headers=VENDED)
    assert loaded.status_code == 200, loaded.text
    _assert_cannot_read(scene, erin, metadata_key, loaded.json())


def test_register_the_unregistered_tables_own_metadata(scene: Scene) -> None:
    """registerTable of the unregistered table's own metadata file into erin's sandbox."""
    erin = scene.user("erin")
    _sandbox(scene, erin)
    _, metadata_key = _victim_files(scene)
    assert scene.alice("POST", scene.url("/namespaces/ns/tables/t/unregister")).status_code == 200
    registered = erin(
        "POST",
        scene.url("/namespaces/sandbox/register"),
        json={
            "name": f"r{uuid.uuid4().hex[:6]}",
            "metadata-location": f"s3://{BUCKET}/{metadata_key}",
        },
        headers=VENDED,
    )
    assert registered.status_code == 403, registered.text  # register needs warehouse modify
    if registered.status_code != 200:
        return
    _assert_cannot_read(scene, erin, metadata_key, registered.json())


def test_a_percent_encoded_alias_of_a_live_tables_location_is_taken(scene: Scene) -> None:
    """Low: the overlap check compares location text, while containment is checked both as
    written and percent-decoded "because readers differ on decoding" (docs/security.md).
    `.../ns/t%2D<id>` is `.../ns/t-<id>` to a decoding reader (Hadoop S3A, some S3-compatible
    stores): a second table over a LIVE table's files. The scope vended for it is the
    literal key prefix (AWS matches it literally; the signer refuses the real key), so on
    AWS this gives no access - but two tables now share files for decoding readers and for
    any store that decodes."""
    erin = scene.user("erin")
    _sandbox(scene, erin)
    location, _ = _victim_files(scene)
    head, tail = location.rsplit("/t-", 1)
    for alias in (f"{head}/t%2D{tail}", f"{head}/%74-{tail}", location.replace("/ns/", "/%6Es/")):
        made = scene.create(erin, "sandbox", f"a{uuid.uuid4().hex[:6]}", location=alias)
        assert made.status_code in (400, 409), (alias, made.status_code)


# -- what the fix still allows -------------------------------------------------------------------
def _grant_warehouse(scene: Scene, relation: str, who: Any) -> None:
    scene.grant(f"warehouse/{scene.warehouse_id}", relation, who)


def test_who_may_modify_the_warehouse_places_a_table_over_files(scene: Scene) -> None:
    """`modify` on the warehouse: the location that holds files is accepted (create,
    set-location, register), and the table is the placer's own, with read-write access."""
    erin = scene.user("erin")
    _sandbox(scene, erin)
    _grant_warehouse(scene, "modify", erin)
    location, metadata_key = _victim_files(scene)
    assert scene.alice("POST", scene.url("/namespaces/ns/tables/t/unregister")).status_code == 200
    made = scene.create(erin, "sandbox", "adopted", headers=VENDED, location=location)
    assert made.status_code == 200, made.text
    assert credentials_of(made.json())[0]["prefix"] == location
    dropped = erin("DELETE", scene.url("/namespaces/sandbox/tables/adopted"))
    assert dropped.status_code == 204, dropped.text
    registered = erin(
        "POST",
        scene.url("/namespaces/sandbox/register"),
        json={"name": "back", "metadata-location": f"s3://{BUCKET}/{metadata_key}"},
    )
    assert registered.status_code == 200, registered.text


def test_a_fresh_chosen_location_needs_no_more_than_create(scene: Scene) -> None:
    """A chosen location that holds nothing: `create` on the namespace is enough, as before,
    and a set-location onto an empty place too."""
    erin = scene.user("erin")
    _sandbox(scene, erin)
    location, _ = _victim_files(scene)
    fresh = f"{location.rsplit('/', 2)[0]}/elsewhere/fresh"
    made = scene.create(erin, "sandbox", "fresh", location=fresh)
    assert made.status_code == 200, made.text
    moved = erin(
        "POST",
        scene.url("/namespaces/sandbox/tables/fresh"),
        json={
            "requirements": [],
            "updates": [{"action": "set-location", "location": f"{fresh}-moved"}],
        },
    )
    assert moved.status_code == 200, moved.text


def test_a_transaction_cannot_move_a_table_onto_files(scene: Scene) -> None:
    """transactions/commit with a set-location onto an unregistered table's files."""
    erin, location, _ = _own_table_beside_unregistered_files(scene, "tx")
    change = {
        "identifier": {"namespace": ["sandbox"], "name": "tx"},
        "requirements": [],
        "updates": [{"action": "set-location", "location": location}],
    }
    moved = erin("POST", scene.url("/transactions/commit"), json={"table-changes": [change]})
    _assert_files_held(moved)


_create_updates = staged_create_updates


def test_a_staged_create_commits_over_its_own_data_files(scene: Scene) -> None:
    """CTAS: a staged create at its default location, data files written there with the
    credentials it was vended, then the assert-create commit: the files are the writer's
    own, the commit is not refused. The same commit moved onto another table's files is."""
    erin = scene.user("erin")
    _sandbox(scene, erin)
    staged = scene.create(erin, "sandbox", "ctas", headers=VENDED, stage=True)
    assert staged.status_code == 200, staged.text
    metadata = staged.json()["metadata"]
    admin = client(scene.moto.endpoint, "s3", scene.moto.key, scene.moto.secret)
    admin.put_object(Bucket=BUCKET, Key=f"{key_of(metadata['location'])}/data/0.parquet", Body=b"x")
    path = scene.url("/namespaces/sandbox/tables/ctas")
    location, _ = _victim_files(scene)
    assert scene.alice("POST", scene.url("/namespaces/ns/tables/t/unregister")).status_code == 200
    elsewhere = {
        "requirements": [{"type": "assert-create"}],
        "updates": _create_updates(metadata, location),
    }
    _assert_files_held(erin("POST", path, json=elsewhere))
    own = {
        "requirements": [{"type": "assert-create"}],
        "updates": _create_updates(metadata, metadata["location"]),
    }
    committed = erin("POST", path, json=own)
    assert committed.status_code == 200, committed.text


def test_a_file_warehouse_refuses_a_table_over_a_dropped_tables_files(authed: Authed) -> None:
    """The same on the default `file` warehouse (the bounded local walk): a drop without
    purge leaves the files, and a location over them needs `modify` on the warehouse."""
    alice = Caller(authed, "alice", "Alice")
    alice.ok("POST", f"{MGMT}/bootstrap", {"accept-terms-of-use": True})
    config = alice.ok("GET", "/catalog/v1/config", params={"warehouse": "default"})
    base = f"/catalog/v1/{config['overrides']['prefix']}"
    for ns in ("ns", "sandbox"):
        alice.ok("POST", f"{base}/namespaces", {"namespace": [ns]})
    made = alice.ok("POST", f"{base}/namespaces/ns/tables", {"name": "t", "schema": SCHEMA})
    location = made["metadata"]["location"]
    assert alice("DELETE", f"{base}/namespaces/ns/tables/t").status_code == 204
    nid = alice.ok(
        "GET",
        f"{MGMT}/warehouse/{config['overrides']['prefix']}/namespace-id",
        params={"namespace": "sandbox"},
    )["namespace-id"]
    erin = Caller(authed, "erin", "Erin")
    alice.ok(
        "POST",
        f"{MGMT}/permissions/namespace/{nid}/assignments",
        {"writes": [{"type": "create", "user": erin.id}]},
    )
    body = {"name": "x", "schema": SCHEMA, "location": location}
    _assert_files_held(erin("POST", f"{base}/namespaces/sandbox/tables", json=body))
    fresh = {"name": "y", "schema": SCHEMA, "location": f"{location}-fresh"}
    assert erin("POST", f"{base}/namespaces/sandbox/tables", json=fresh).status_code == 200
    assert alice("POST", f"{base}/namespaces/sandbox/tables", json=body).status_code == 200

"""Group commit: one shared append, but each command's outcome is its own."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest

from icelog.commands.group_commit import ConcurrentChange, GroupCommitter, _Save
from icelog.domain.context import RequestContext
from icelog.domain.identifiers import NamespaceName, TabularName
from icelog.domain.project import Project
from icelog.projections import maintenance
from tests.integration.conftest import Api, create_table
from tests.support.commands import stale_project


def test_a_conflicting_save_in_a_batch_fails_alone(api: Api) -> None:
    app = api.services.catalog.app
    pid, stale = stale_project(app, "fresh")  # `stale` is one version behind
    stale.rename("stale", actor="t", request_id="r")
    other = Project.create(project_id=uuid4(), name="other", actor="t", request_id="r")
    items = [
        _Save([stale], list(stale.collect_events()), {}),
        _Save([other], list(other.collect_events()), {}),
    ]
    before = api.position()
    app._committer._commit(items)
    assert isinstance(items[0].error, ConcurrentChange)
    assert items[1].error is None and items[1].position > before
    assert app.repository.get(pid).name == "fresh"
    assert app.repository.get(other.id).name == "other"
    names = {
        p["project-name"] for p in api.client.get("/management/v1/project-list").json()["projects"]
    }
    assert names == {"default", "fresh", "other"}


def test_a_batch_lands_in_one_transaction_with_positions_in_order(api: Api) -> None:
    app = api.services.catalog.app
    projects = [
        Project.create(project_id=uuid4(), name=f"p{i}", actor="t", request_id="r")
        for i in range(5)
    ]
    items = [_Save([p], list(p.collect_events()), {}) for p in projects]
    app._committer._commit(items)
    positions = [item.position for item in items]
    assert all(item.error is None for item in items)
    assert positions == sorted(positions) and len(set(positions)) == 5


def test_a_lone_conflicting_save_raises_concurrent_change(api: Api) -> None:
    project = Project.create(project_id=uuid4(), name="x", actor="t", request_id="r")
    assert api.services.catalog.app.save_all(project) > 0
    with pytest.raises(ConcurrentChange):
        again = Project.create(project_id=project.id, name="x", actor="t", request_id="r")
        api.services.catalog.app.save_all(again)


def test_saves_racing_on_one_version_in_a_batch_fail_without_sinking_the_batch(api: Api) -> None:
    app = api.services.catalog.app
    pid = uuid4()
    app.save_all(Project.create(project_id=pid, name="p", actor="t", request_id="r"))
    racers: list[Project] = [app.repository.get(pid) for _ in range(3)]
    for i, racer in enumerate(racers):
        racer.rename(f"r{i}", actor="t", request_id="r")
    bystander = Project.create(project_id=uuid4(), name="b", actor="t", request_id="r")
    items = [_Save([r], list(r.collect_events()), {}) for r in racers]
    items.append(_Save([bystander], list(bystander.collect_events()), {}))
    app._committer._commit(items)
    assert items[0].error is None and items[3].error is None
    assert all(isinstance(i.error, ConcurrentChange) for i in items[1:3])
    assert app.repository.get(pid).name == "r0"


def test_the_after_append_observer_sees_each_append_before_its_callers_return(api: Api) -> None:
    """The hook tests use to die between an append and its answer (tests/support/
    dying_server.py); a failing observer never fails a save that landed."""
    app = api.services.catalog.app
    seen: list[list[str]] = []

    def observe(events: Any) -> None:
        seen.append([type(e).__qualname__ for e in events])
        raise RuntimeError("an observer's failure is not the save's")

    committer = GroupCommitter(app, after_append=observe)
    try:
        project = Project.create(project_id=uuid4(), name="seen", actor="t", request_id="r")
        position = committer.save([project], {})
        assert seen == [["Project.Created"]] and position > 0
        assert app.repository.get(project.id).name == "seen"
    finally:
        committer.close()


# -- PostgreSQL: plain commits appended by one statement (projections/recorders.py) ------------


def _stage_commit(api: Api, name: str, key: str) -> tuple[Any, _Save]:
    """A set-properties commit of table db.<name>, staged as the command layer would:
    the aggregate with its pending event and the hinted document."""
    catalog = api.services.catalog
    app = catalog.app
    wid = api.services.warehouse_for_prefix(api.prefix)
    table = catalog.tables.get_table(wid, TabularName(NamespaceName(("db",)), name))
    staged = catalog.tables._stage_commit(
        RequestContext(actor="t", request_id="r"),
        wid,
        [],
        [{"action": "set-properties", "updates": {key: "v"}}],
        table,
        app.file_io(app.storage_profile(wid)),
        may_cover_files=True,
    )
    assert staged is not None
    return table, _Save([table], list(table.collect_events()), {staged.location: staged.data})


@pytest.mark.postgres
def test_plain_commits_land_by_one_statement_with_their_read_model_rows(
    pg_api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = pg_api
    recorder: Any = api.services.catalog.app.recorder
    calls: list[int] = []
    original = recorder._insert_rows

    def counted(stored: Any, planned: Any) -> Any:
        calls.append(len(planned.updates))
        return original(stored, planned)

    api.post("/namespaces", {"namespace": ["db"]})
    for name in ("a", "b", "c"):
        create_table(api, "db", name)
    monkeypatch.setattr(recorder, "_insert_rows", counted)
    items = [_stage_commit(api, name, f"k-{name}")[1] for name in ("a", "b", "c")]
    app = api.services.catalog.app
    app._committer._commit(items)
    assert calls == [3], "one statement for the whole batch"
    assert all(item.error is None for item in items)
    positions = [item.position for item in items]
    assert positions == sorted(positions) and len(set(positions)) == 3
    for name, item in zip(("a", "b", "c"), items, strict=True):
        loaded = api.get(f"/namespaces/db/tables/{name}").json()
        assert loaded["metadata"]["properties"][f"k-{name}"] == "v"
        assert loaded["metadata-location"] == next(iter(item.hints))
    # The read model equals what the log folds to (rebuild would change nothing).
    assert maintenance.verify(app.recorder, app.mapper).differences == []


@pytest.mark.postgres
def test_a_stale_plain_commit_changes_neither_log_nor_read_model(pg_api: Api) -> None:
    api = pg_api
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    create_table(api, "db", "bystander")
    stale_table, stale = _stage_commit(api, "t", "stale")
    winner = api.post(
        "/namespaces/db/tables/t",
        {"updates": [{"action": "set-properties", "updates": {"winner": "v"}}]},
    )
    assert winner.status_code == 200, winner.text
    before = api.position()
    _, bystander = _stage_commit(api, "bystander", "b")
    api.services.catalog.app._committer._commit([stale, bystander])
    assert isinstance(stale.error, ConcurrentChange)
    assert bystander.error is None and bystander.position > before
    loaded = api.get("/namespaces/db/tables/t").json()
    assert loaded["metadata-location"] == winner.json()["metadata-location"]
    assert "stale" not in loaded["metadata"]["properties"]
    history = api.services.catalog.app.recorder.select_events(stale_table.id)
    assert len(history) == stale_table.version, "the stale event was not stored"

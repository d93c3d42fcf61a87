"""Group commit: one shared append, but each command's outcome is its own."""

from __future__ import annotations

from uuid import uuid4

import pytest

from commands.group_commit import ConcurrentChange, _Save
from domain.project import Project
from tests.integration.conftest import Api


def test_a_conflicting_save_in_a_batch_fails_alone(api: Api) -> None:
    app = api.services.catalog
    pid = uuid4()
    app.save_all(Project.create(project_id=pid, name="p", actor="t", request_id="r"))
    stale: Project = app.repository.get(pid)
    fresh: Project = app.repository.get(pid)
    fresh.rename("fresh", actor="t", request_id="r")
    app.save_all(fresh)  # now `stale` is one version behind
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
    app = api.services.catalog
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
    assert api.services.catalog.save_all(project) > 0
    with pytest.raises(ConcurrentChange):
        again = Project.create(project_id=project.id, name="x", actor="t", request_id="r")
        api.services.catalog.save_all(again)


def test_saves_racing_on_one_version_in_a_batch_fail_without_sinking_the_batch(api: Api) -> None:
    app = api.services.catalog
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

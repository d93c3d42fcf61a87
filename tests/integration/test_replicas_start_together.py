"""Replicas started together on one database all come up: each makes the default project and
warehouse if missing, and the race's losers must take the winner's instead of crashing (the
warehouse's storage overlaps the winner's, so a loser could get a StorageOverlapError as
well as an AlreadyExistsError)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from icelog.api.services import Services
from icelog.domain.identifiers import NIL_UUID
from tests.integration.conftest import make_settings
from tests.support import postgres

pytestmark = [pytest.mark.postgres, pytest.mark.attack]


@pytest.mark.parametrize("round_", range(4))
def test_four_replicas_make_the_defaults_at_once(tmp_path: Path, round_: int) -> None:
    database_url = postgres.create_database()
    replicas: list[Services] = []
    try:
        settings = make_settings(tmp_path, database_url)
        replicas = [Services.build(settings) for _ in range(4)]
        start = threading.Barrier(len(replicas))
        errors: list[BaseException] = []

        def start_up(services: Services) -> None:
            start.wait(10)
            try:
                services.ensure_defaults()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=start_up, args=(r,)) for r in replicas]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == [], [repr(e) for e in errors]
        found = replicas[0].primary.warehouses(str(NIL_UUID))
        assert [w["name"] for w in found] == ["default"]
    finally:
        for services in replicas:
            services.close()
        postgres.drop_database(database_url)

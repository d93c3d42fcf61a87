"""How many PostgreSQL connections a process may open (api/connection_budget.py): sized
from what a process needs, or from one budget per replica shared by its workers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icelog.api.connection_budget import MIN_PER_PROCESS, PoolRequest, pool_sizes
from icelog.api.settings import Settings, SettingsError

PG = {
    "ICELOG_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/icelog",
    "ICELOG_SECRETS_KEY": "BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY=",
}


def per_process(settings: Settings) -> int:
    return settings.pg_pool_size + settings.pg_max_overflow + settings.pg_read_connections


def test_a_process_opens_what_it_needs_by_default() -> None:
    settings = Settings.from_env(PG)
    # 8 for the write side (2 kept open), 4 for loadTable: was 10 kept open + 30 + 4.
    assert (settings.pg_pool_size, settings.pg_max_overflow) == (2, 6)
    assert settings.pg_read_connections == 4
    assert per_process(settings) == 12


def test_task_workers_and_relays_in_serve_add_their_connections() -> None:
    settings = Settings.from_env(
        {**PG, "ICELOG_TASK_WORKERS": "4", "ICELOG_PUBLISH": "nats,kafka"}
        | {"ICELOG_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092"}
    )
    assert settings.pg_pool_size + settings.pg_max_overflow == 8 + 3 + 2


def test_one_budget_per_replica_is_divided_among_its_workers() -> None:
    settings = Settings.from_env({**PG, "ICELOG_PG_MAX_CONNECTIONS": "24"})
    assert per_process(settings) == 24
    for workers in (1, 2, 3, 4, 8):
        share = settings.for_workers(workers)
        assert share.workers == workers
        assert workers * per_process(share) <= 24
    # `serve --workers N` tells its workers through the environment (api/supervise.py).
    worker = Settings.from_env(
        {**PG, "ICELOG_PG_MAX_CONNECTIONS": "24", "ICELOG_SERVE_WORKERS": "4"}
    )
    assert per_process(worker) == 6


@given(
    workers=st.integers(min_value=1, max_value=16),
    extra=st.integers(min_value=0, max_value=200),
    task_workers=st.integers(min_value=0, max_value=8),
    relays=st.integers(min_value=0, max_value=2),
)
def test_the_pools_of_all_workers_stay_within_the_budget(
    workers: int, extra: int, task_workers: int, relays: int
) -> None:
    budget = MIN_PER_PROCESS * workers + extra
    sizes = pool_sizes(
        PoolRequest(max_connections=budget),
        workers=workers,
        task_workers=task_workers,
        relays=relays,
    )
    assert workers * sizes.per_process <= budget
    # Two on the write side (the committer may hold one while it asks for another), one
    # for loadTable, and the loadTable reader never above the 4 that serve it best.
    assert sizes.write_side >= 2
    assert 1 <= sizes.load_table <= 4
    assert 1 <= sizes.kept_open <= sizes.write_side


@pytest.mark.parametrize(
    ("env", "workers", "says"),
    [
        ({"ICELOG_PG_MAX_CONNECTIONS": "2"}, 1, "a process needs at least 3 (give at least 3)"),
        (
            {"ICELOG_PG_MAX_CONNECTIONS": "10"},
            4,
            "it leaves 2 to each of the 4 processes of --workers 4",
        ),
        (
            {
                "ICELOG_PG_MAX_CONNECTIONS": "20",
                "ICELOG_PG_POOL_SIZE": "10",
                "ICELOG_PG_MAX_OVERFLOW": "30",
            },
            1,
            "the pools take 40 (ICELOG_PG_POOL_SIZE + ICELOG_PG_MAX_OVERFLOW) + 1",
        ),
        (
            {"ICELOG_PG_MAX_CONNECTIONS": "16", "ICELOG_PG_READ_CONNECTIONS": "8"},
            2,
            "leaves 8 to each of the 2 processes",
        ),
    ],
)
def test_pools_that_cannot_fit_the_budget_are_a_configuration_error(
    env: dict[str, str], workers: int, says: str
) -> None:
    with pytest.raises(SettingsError, match="ICELOG_PG_MAX_CONNECTIONS") as refused:
        Settings.from_env({**PG, **env}).for_workers(workers)
    assert says in str(refused.value)


def test_the_settings_of_earlier_releases_still_size_the_pools() -> None:
    old = Settings.from_env(
        {
            **PG,
            "ICELOG_PG_POOL_SIZE": "10",
            "ICELOG_PG_MAX_OVERFLOW": "30",
            "ICELOG_PG_READ_CONNECTIONS": "4",
        }
    )
    assert (old.pg_pool_size, old.pg_max_overflow, old.pg_read_connections) == (10, 30, 4)
    # One of them alone: the rest sized around it.
    kept = Settings.from_env({**PG, "ICELOG_PG_POOL_SIZE": "5"})
    assert (kept.pg_pool_size, kept.pg_max_overflow, kept.pg_read_connections) == (5, 3, 4)
    grows = Settings.from_env({**PG, "ICELOG_PG_MAX_OVERFLOW": "0"})
    assert (grows.pg_pool_size, grows.pg_max_overflow) == (2, 0)
    # Within a budget, loadTable takes what the given write side leaves.
    fitted = Settings.from_env({**PG, "ICELOG_PG_MAX_CONNECTIONS": "8", "ICELOG_PG_POOL_SIZE": "6"})
    assert (fitted.pg_pool_size, fitted.pg_max_overflow, fitted.pg_read_connections) == (6, 0, 2)


@pytest.mark.parametrize(
    "name", ["ICELOG_PG_MAX_CONNECTIONS", "ICELOG_PG_POOL_SIZE", "ICELOG_PG_READ_CONNECTIONS"]
)
def test_a_malformed_or_zero_figure_is_refused(name: str) -> None:
    for value in ("many", "0", "-3"):
        with pytest.raises(SettingsError, match=name):
            Settings.from_env({**PG, name: value})


def test_the_embedded_store_has_no_pools_to_size() -> None:
    # SQLite: a budget that would not fit PostgreSQL's pools is no error there.
    settings = Settings.from_env({"ICELOG_PG_MAX_CONNECTIONS": "1"}).for_workers(4)
    assert settings.backend == "sqlite"

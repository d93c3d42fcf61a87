"""How many PostgreSQL connections an icelog process may open (docs/operations.md,
"Connection budget").

A process has two pools on the catalog database: the write side's (psycopg_pool through
the event store: appends, aggregate loads, every read-model query but loadTable) and the
async loadTable reader's. Measured on a mixed load (bench/connections.py: loadTable,
commits, creates, lists and the event endpoints at once, 120 client connections), never
more than 3 backends of one process ran a statement at the same moment; the defaults of
earlier releases let one process open 44 (10 kept open + 30 overflow + 4), and a test
run's dozen servers then exhausted a PostgreSQL that other work shared.

What the write side needs is counted from the threads that may hold one of its
connections at once:

- the group committer: 2 — it keeps one connection for plain appends and takes a second
  for the appends the library makes and for snapshots (the only code that asks for a
  connection while holding one; nothing holds a connection while waiting for it);
- each task worker thread (ICELOG_TASK_WORKERS) and each relay run inside `serve`
  (ICELOG_PUBLISH): 1;
- the audit thread (chain and event index): 1;
- request handlers: 4 — each holds a connection for one short statement at a time and
  queues on the pool, so more connections only add backends competing for the cores.

The loadTable reader keeps 4 (measured: 4 gave a lower p99 than 16 on 2 cores).

ICELOG_PG_MAX_CONNECTIONS is one figure per replica: `icelog serve --workers N` divides it
among its N processes, and each splits its share between the two pools. The settings of
earlier releases (ICELOG_PG_POOL_SIZE, ICELOG_PG_MAX_OVERFLOW, ICELOG_PG_READ_CONNECTIONS)
still size the pools when given; with a budget they must fit in it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Write-side connections a process needs besides those of its task workers and relays.
COMMITTER = 2
AUDIT = 1
REQUESTS = 4
LOAD_TABLE = 4
# Connections the write side's pool keeps open when idle (it grows under load, and
# closes what it opened beyond these after 10 idle minutes).
KEPT_OPEN = 2
# The least share of a budget a process can run on: two write-side connections (a
# command's reads while the committer appends; `projections rebuild` holds one) and one
# for loadTable.
MIN_PER_PROCESS = 3


class BudgetError(ValueError):
    """The pool settings do not fit together."""


@dataclass(frozen=True)
class PoolRequest:
    """The pool settings as given (None: not set)."""

    max_connections: int | None = None  # ICELOG_PG_MAX_CONNECTIONS, per replica
    pool_size: int | None = None  # ICELOG_PG_POOL_SIZE: write side, kept open
    max_overflow: int | None = None  # ICELOG_PG_MAX_OVERFLOW: write side, under load
    read_connections: int | None = None  # ICELOG_PG_READ_CONNECTIONS: loadTable


@dataclass(frozen=True)
class PoolSizes:
    """One process's pools."""

    kept_open: int
    overflow: int
    load_table: int

    @property
    def write_side(self) -> int:
        return self.kept_open + self.overflow

    @property
    def per_process(self) -> int:
        return self.write_side + self.load_table


def write_side_need(task_workers: int, relays: int) -> int:
    """The write side's connections a process without a budget gets (see the module doc)."""
    return COMMITTER + task_workers + relays + AUDIT + REQUESTS


def pool_sizes(
    request: PoolRequest, *, workers: int = 1, task_workers: int = 1, relays: int = 0
) -> PoolSizes:
    """The pools of one of a replica's `workers` processes. Raises BudgetError when the
    budget's share is too small or the pools given do not fit in it."""
    share = None
    if request.max_connections is not None:
        share = request.max_connections // max(1, workers)
        if share < MIN_PER_PROCESS:
            leaves = "" if workers == 1 else f" it leaves {share}{_to_each(workers)}, and"
            raise BudgetError(
                f"ICELOG_PG_MAX_CONNECTIONS={request.max_connections} is too few:{leaves} a "
                f"process needs at least {MIN_PER_PROCESS} (give at least "
                f"{MIN_PER_PROCESS * workers})"
            )
    load_table = request.read_connections
    given_write = request.pool_size is not None or request.max_overflow is not None
    if load_table is None:
        load_table = LOAD_TABLE if share is None else max(1, min(LOAD_TABLE, share // 3))
    wanted = write_side_need(task_workers, relays) if share is None else share - load_table
    if not given_write:
        write_side = max(1, wanted)
        kept = min(KEPT_OPEN, write_side)
    elif request.max_overflow is None:
        assert request.pool_size is not None
        kept = request.pool_size
        write_side = max(kept, wanted)
    else:
        kept = KEPT_OPEN if request.pool_size is None else request.pool_size
        write_side = kept + request.max_overflow
    if share is not None and request.read_connections is None:
        # The write side was given: loadTable takes what it leaves (at least one).
        load_table = max(1, min(load_table, share - write_side))
    sizes = PoolSizes(kept_open=kept, overflow=write_side - kept, load_table=load_table)
    if share is not None and sizes.per_process > share:
        raise BudgetError(
            f"the pools take {sizes.write_side} (ICELOG_PG_POOL_SIZE + "
            f"ICELOG_PG_MAX_OVERFLOW) + {sizes.load_table} (ICELOG_PG_READ_CONNECTIONS) = "
            f"{sizes.per_process} connections per process, but "
            f"ICELOG_PG_MAX_CONNECTIONS={request.max_connections} leaves {share}"
            f"{_to_each(workers)}: lower the pools or raise the budget"
        )
    return sizes


def _to_each(workers: int) -> str:
    return "" if workers == 1 else f" to each of the {workers} processes of --workers {workers}"

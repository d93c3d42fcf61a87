"""What icelog changes on eventsourcing's PostgreSQL datastore (written for 9.5.x).

The datastore is made by the library's factory from the environment, so icelog cannot
choose its class; it changes the instance instead, in the two ways below. They rely on:

- every statement the library runs takes its connection through the instance's
  `get_connection()` (`transaction()`, the recorders' inserts and selects), a context
  manager that yields a psycopg connection checked out of `pool` and returns it on exit;
- `close()` closes that pool.

The inline read model (projections/recorders.py) also overrides the recorders' append hooks
`_insert_events` (SQLite), `_insert_stored_events` and `_notify_channel` (PostgreSQL), which
run inside the append's transaction: the seam docs/adr/0004-inline-read-model.md chose. The
guard test checks that they are still called there with the same arguments.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from eventsourcing.postgres import PostgresDatastore

WRITTEN_FOR = ((9, 5), (9, 6))  # eventsourcing versions: from, up to (excluded)

Checkout = Callable[[], AbstractContextManager[Any]]
_wrapped: weakref.WeakSet[PostgresDatastore] = weakref.WeakSet()


def wrap_checkout(datastore: PostgresDatastore, wrap: Callable[[Checkout], Checkout]) -> bool:
    """Make every connection checkout of `datastore` go through `wrap(its checkout)`;
    once per datastore (False: it already was)."""
    if datastore in _wrapped:
        return False
    datastore.get_connection = wrap(datastore.get_connection)  # type: ignore[method-assign,assignment]
    _wrapped.add(datastore)
    return True


def before_close(datastore: PostgresDatastore, callback: Callable[[], None]) -> None:
    """Call `callback` when `datastore` is closed, before its pool closes."""
    close_pool = datastore.close

    def close() -> None:
        callback()
        close_pool()

    datastore.close = close  # type: ignore[method-assign]

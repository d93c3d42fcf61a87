"""The `Catalog` application: every command of the catalog, one ordered event log."""

from __future__ import annotations

from icelog.commands.lifecycle import UndropTarget
from icelog.commands.tables import TableState
from icelog.commands.verify import VerifyCommands

__all__ = ["Catalog", "TableState", "UndropTarget"]


class Catalog(VerifyCommands):
    """All catalog commands. Construct with an explicit `env` (see api.settings)."""

    # The library names an application after its class unless told otherwise, and
    # the name is stored format: it names the PostgreSQL tables (icelog_events, ...).
    name = "icelog"

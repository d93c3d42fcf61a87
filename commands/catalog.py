"""The catalog: every command group, composed over one application (one ordered log).

Each group is a plain class that receives what it needs; none inherits from another or
from the application. What the groups share lives in shared modules: the application
itself (saving, retries, metadata file I/O), `lookups`, `known_outcome` and the tabular
core of tables and views (`tabular`).
"""

from __future__ import annotations

from icelog.commands.access import AccessCommands
from icelog.commands.application import CatalogApplication
from icelog.commands.audit import AuditCommands
from icelog.commands.functions import FunctionCommands
from icelog.commands.idempotency import IdempotencyCommands
from icelog.commands.lifecycle import LifecycleCommands, UndropTarget
from icelog.commands.lookups import KnownNamespaces
from icelog.commands.management import ManagementCommands
from icelog.commands.namespaces import NamespaceCommands
from icelog.commands.ports import ReadPorts
from icelog.commands.storage import StoragePolicy
from icelog.commands.tables import TableCommands
from icelog.commands.tabular import TabularCore
from icelog.commands.tabular_values import TableState
from icelog.commands.tasks import TaskCommands
from icelog.commands.views import ViewCommands

__all__ = ["Catalog", "CatalogApplication", "ReadPorts", "TableState", "UndropTarget"]


class Catalog:
    """All catalog commands, by aggregate family: `catalog.tables.commit_table(...)`."""

    def __init__(
        self,
        app: CatalogApplication,
        ports: ReadPorts,
        *,
        storage_policy: StoragePolicy,
        task_max_attempts: int = 5,
        task_backoff_ms: int = 5_000,
        purge_delete_rate: float = 0.0,
    ) -> None:
        """`ports`: the read-model queries commands decide on (all required: see
        commands/ports.py). `storage_policy`: where warehouses may live. The task figures
        are settings (ICELOG_TASK_MAX_ATTEMPTS, ..._RETRY_BACKOFF_SECONDS, ...)."""
        if not isinstance(ports, ReadPorts):
            raise TypeError("Catalog needs its ReadPorts")
        self.app = app
        self.ports = ports
        known_namespaces = KnownNamespaces()
        core = TabularCore(app, ports, known_namespaces)
        # What tables and views share, for callers that serve both kinds alike (rename).
        self.tabulars = core
        self.management = ManagementCommands(app, ports, storage_policy)
        self.access = AccessCommands(app, ports)
        self.namespaces = NamespaceCommands(app, ports, known_namespaces)
        self.tables = TableCommands(core)
        self.views = ViewCommands(core)
        self.functions = FunctionCommands(app)
        self.lifecycle = LifecycleCommands(app, core, task_max_attempts=task_max_attempts)
        self.tasks = TaskCommands(
            app,
            self.lifecycle,
            ports,
            task_backoff_ms=task_backoff_ms,
            purge_delete_rate=purge_delete_rate,
        )
        self.idempotency = IdempotencyCommands(app)
        self.audit = AuditCommands(app)

    def close(self) -> None:
        self.app.close()

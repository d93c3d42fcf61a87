"""The composition root: builds the application, the read side and their wiring."""

from __future__ import annotations

import base64
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from uuid import UUID

from api.settings import Settings
from api.storage_access import StorageAccess
from commands.catalog import Catalog
from commands.task_worker import TaskWorkers
from domain.context import SYSTEM
from domain.errors import BadRequestError, NoSuchWarehouseError
from domain.identifiers import NIL_UUID
from projections.audit_chain import AuditChain
from projections.fast_reads import (
    PostgresTabularReader,
    SQLiteTabularReader,
    TabularReader,
)
from projections.publisher_positions import PositionStore
from projections.queries import CatalogQueries
from projections.secrets import SecretStore, parse_key
from projections.sql import Datastore
from projections.task_leases import TaskLeases

DEFAULT_WAREHOUSE_NAME = "default"
KEY_FILE = "secrets.key"


def embedded_key(data_dir: Path) -> str:
    """The embedded default's key: generated once into the data directory (mode 0600),
    so a single-process catalog needs no setting. PostgreSQL requires ICELOG_SECRETS_KEY."""
    path = data_dir / KEY_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(base64.b64encode(os.urandom(32)).decode() + "\n")
    return path.read_text().strip()


def secret_store(settings: Settings, datastore: Datastore) -> SecretStore:
    encoded = settings.secrets_key or embedded_key(settings.data_dir)
    store = SecretStore(
        datastore, parse_key(encoded), tuple(parse_key(k) for k in settings.secrets_old_keys)
    )
    store.ensure_schema()
    return store


@dataclass
class Services:
    settings: Settings
    catalog: Catalog
    queries: CatalogQueries
    reader: TabularReader
    tasks: TaskWorkers
    access: StorageAccess
    _default_warehouse: tuple[float, str | None] = (0.0, None)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, settings: Settings) -> Services:
        catalog = Catalog(env=settings.eventsourcing_env())
        queries = CatalogQueries.for_datastore(catalog.recorder.datastore)  # type: ignore[attr-defined]
        # The write side asks the read model whether a location is taken; commands/
        # cannot import projections/, so the query is handed in here.
        catalog.location_index = queries.overlapping_location
        catalog.open_task_count = queries.open_task_count
        catalog.task_max_attempts = settings.task_max_attempts
        catalog.task_backoff_ms = int(settings.task_retry_backoff_seconds * 1000)
        catalog.purge_delete_rate = settings.purge_delete_rate
        catalog.secrets = secret_store(settings, catalog.recorder.datastore)  # type: ignore[attr-defined]
        tasks = TaskWorkers(
            catalog,
            TaskLeases(catalog.recorder.datastore),  # type: ignore[attr-defined]
            threads=settings.task_workers,
            poll_interval_s=settings.task_poll_interval_seconds,
            lease_s=settings.task_lease_seconds,
        )
        catalog.on_task_scheduled = tasks.wake
        # The relays' positions live next to the log; created here so that `icelog migrate`,
        # metrics and relays all find the table.
        PositionStore(catalog.recorder.datastore).ensure_schema()  # type: ignore[attr-defined]
        AuditChain(catalog.recorder).ensure_schema()
        reader: TabularReader
        if settings.database_url is None:
            reader = SQLiteTabularReader(settings.sqlite_path, settings.metadata_cache_bytes)
        else:
            env = settings.eventsourcing_env()
            reader = PostgresTabularReader(
                {
                    "dbname": env["POSTGRES_DBNAME"],
                    "host": env["POSTGRES_HOST"],
                    "port": env["POSTGRES_PORT"],
                    "user": env["POSTGRES_USER"],
                    "password": env["POSTGRES_PASSWORD"],
                },
                max_size=settings.pg_read_connections,
                cache_bytes=settings.metadata_cache_bytes,
            )
        return cls(
            settings=settings,
            catalog=catalog,
            queries=queries,
            reader=reader,
            tasks=tasks,
            access=StorageAccess(catalog),
        )

    def ensure_defaults(self) -> None:
        """Embedded default: bootstrapped server, default project (nil UUID), and a
        `default` warehouse — all through commands, so all of it is in the log."""
        self.catalog.bootstrap(SYSTEM)
        if self.queries.project(str(NIL_UUID)) is None:
            self.catalog.create_project(SYSTEM, "default", NIL_UUID)
        if (
            self.settings.default_warehouse
            and self.queries.warehouse_by_name(str(NIL_UUID), DEFAULT_WAREHOUSE_NAME) is None
        ):
            self.catalog.create_warehouse(
                SYSTEM,
                project_id=NIL_UUID,
                name=DEFAULT_WAREHOUSE_NAME,
                storage_profile={
                    "type": "file",
                    "base-location": self.settings.default_warehouse_location,
                },
            )

    def default_warehouse_id(self) -> str:
        now = time.monotonic()
        with self._lock:
            stamp, cached = self._default_warehouse
            if cached is not None and now - stamp < 5.0:
                return cached
        found = self.queries.warehouse_by_name(str(NIL_UUID), DEFAULT_WAREHOUSE_NAME)
        if found is None:
            raise BadRequestError(
                "No warehouse given: request /v1/config?warehouse=<name> and use its prefix"
            )
        with self._lock:
            self._default_warehouse = (now, found["id"])
        return str(found["id"])

    def warehouse_for_prefix(self, prefix: str | None) -> UUID:
        """The REST `{prefix}` is the warehouse id; no prefix means the default warehouse."""
        value = self.default_warehouse_id() if prefix is None else prefix
        try:
            return UUID(value)
        except ValueError:
            raise NoSuchWarehouseError(f"Warehouse does not exist: {value}") from None

    def close(self) -> None:
        self.tasks.stop()
        self.catalog.close()

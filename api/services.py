"""The composition root: builds the application, the read side and their wiring."""

from __future__ import annotations

import base64
import hmac
import importlib.metadata
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from icelog.api.settings import Settings
from icelog.api.storage_access import StorageAccess
from icelog.commands.catalog import Catalog, CatalogApplication, ReadPorts
from icelog.commands.storage import StorageLimits, StoragePolicy
from icelog.commands.task_worker import TaskWorkers
from icelog.domain.context import SYSTEM
from icelog.domain.errors import (
    AlreadyExistsError,
    BadRequestError,
    NoSuchWarehouseError,
    ServiceUnavailableError,
)
from icelog.domain.identifiers import NIL_UUID
from icelog.domain.locations import Location
from icelog.domain.storage_roots import StorageOverlapError
from icelog.projections import migrations
from icelog.projections.fast_reads import (
    PostgresTabularReader,
    SQLiteTabularReader,
    TabularReader,
)
from icelog.projections.queries import CatalogQueries
from icelog.projections.secrets import SecretStore, parse_key
from icelog.projections.sql import Datastore, check_pooled_connection
from icelog.projections.task_leases import TaskLeases

DEFAULT_WAREHOUSE_NAME = "default"
KEY_FILE = "secrets.key"
# The name read connections carry (pg_stat_activity.application_name on the replica).
READ_APPLICATION_NAME = "icelog-read"


def icelog_version() -> str:
    try:
        return importlib.metadata.version("icelog")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


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


def derived_key(settings: Settings, purpose: str) -> bytes:
    """A key for `purpose` (e.g. signing the console's login cookie), derived from the
    secrets key: the same on every replica, and never the key itself."""
    encoded = settings.secrets_key or embedded_key(settings.data_dir)
    return hmac.new(parse_key(encoded), b"icelog-key:" + purpose.encode(), "sha256").digest()


def secret_store(settings: Settings, datastore: Datastore) -> SecretStore:
    encoded = settings.secrets_key or embedded_key(settings.data_dir)
    return SecretStore(
        datastore, parse_key(encoded), tuple(parse_key(k) for k in settings.secrets_old_keys)
    )


def open_application(
    settings: Settings, *, upgrade_schema: bool | None = None
) -> tuple[CatalogApplication, list[migrations.Step]]:
    """The catalog's application on a schema that fits this code, and the migration steps
    applied to get there.

    The schema is the migrations' job (projections/migrations.py), never the library's
    CREATE_TABLE. `upgrade_schema`: apply every pending step (`icelog migrate`; the
    default on the embedded SQLite store). Otherwise (the default on PostgreSQL) an
    empty database is initialised but an existing one is never altered: a database
    that needs steps raises SchemaOutdatedError ("run icelog migrate"). A database a
    newer icelog migrated raises SchemaTooNewError either way.
    """
    app = CatalogApplication(
        env={**settings.eventsourcing_env(), "CREATE_TABLE": "n"},
        storage_limits=StorageLimits(
            max_read_bytes=settings.max_metadata_file_bytes,
            read_timeout_s=settings.storage_read_timeout_seconds,
        ),
    )
    upgrade = settings.backend == "sqlite" if upgrade_schema is None else upgrade_schema
    try:
        applied = migrations.prepare(
            migrations.recorders_of(app),
            upgrade=upgrade,
            icelog_version=icelog_version(),
            lock_timeout_s=settings.pg_lock_timeout_seconds,
        )
    except BaseException:
        app.close()
        raise
    return app, applied


def read_ports(primary: CatalogQueries) -> ReadPorts:
    """What commands ask the read model. On the primary: a decision a command takes must
    see every acknowledged write."""
    return ReadPorts(
        location_index=primary.overlapping_location,
        locations_overlapping=primary.locations_overlapping,
        open_task_count=primary.open_task_count,
        project_role_count=primary.project_role_count,
        grants_now=primary.grants_now,
        namespace_contents=primary.namespace_contents,
        warehouse_profiles=primary.live_warehouse_profiles,
    )


def read_queries(url: str, max_size: int) -> tuple[CatalogQueries, ConnectionPool]:
    """CatalogQueries on the read replica: its own pool of autocommit connections."""
    pool: ConnectionPool = ConnectionPool(
        url,
        kwargs={"autocommit": True, "application_name": READ_APPLICATION_NAME},
        min_size=1,
        max_size=max(1, max_size),
        open=True,
        name=READ_APPLICATION_NAME,
        timeout=10,
        # A replica restart leaves dead connections in the pool: checked on checkout.
        check=check_pooled_connection,
    )

    @contextmanager
    def cursor() -> Iterator[Any]:
        try:
            with pool.connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
                yield cur
        except psycopg.OperationalError as exc:  # also the pool's timeout
            raise ServiceUnavailableError(
                "The catalog's read replica is unavailable; retry later"
            ) from exc

    return CatalogQueries("postgres", cursor), pool


@dataclass
class Services:
    settings: Settings
    catalog: Catalog
    # The read models REST reads use: on ICELOG_DATABASE_READ_URL when it is set.
    queries: CatalogQueries
    reader: TabularReader
    tasks: TaskWorkers
    access: StorageAccess
    # The read model on the primary: what commands decide on, and start-up lookups
    # (the same object as `queries` without a read URL).
    primary: CatalogQueries
    # Migration steps this process applied while building (empty: the schema fitted).
    schema_applied: list[migrations.Step] = field(default_factory=list)
    _closers: list[Callable[[], None]] = field(default_factory=list)
    _default_warehouse: tuple[float, str | None] = (0.0, None)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _prefixes: dict[str, tuple[UUID, str]] = field(default_factory=dict)

    @classmethod
    def build(cls, settings: Settings, *, upgrade_schema: bool | None = None) -> Services:
        """Everything a process needs. Refuses (migrations.SchemaError) a database whose
        schema does not fit this code; see `open_application` for `upgrade_schema`."""
        app, applied = open_application(settings, upgrade_schema=upgrade_schema)
        datastore: Datastore = app.recorder.datastore  # type: ignore[attr-defined]
        # The credential vault is a table of the application's own database.
        app.secrets = secret_store(settings, datastore)
        primary = CatalogQueries.for_datastore(datastore)
        closers: list[Callable[[], None]] = []
        queries = primary
        if settings.database_read_url is not None:
            queries, pool = read_queries(
                settings.database_read_url, settings.pg_pool_size + settings.pg_max_overflow
            )
            closers.append(pool.close)
        catalog = Catalog(
            app,
            read_ports(primary),
            storage_policy=StoragePolicy(
                file_roots=tuple(Location.parse(root) for root in settings.file_warehouse_roots),
                s3_endpoint_hosts=settings.s3_endpoint_hosts,
            ),
            task_max_attempts=settings.task_max_attempts,
            task_backoff_ms=int(settings.task_retry_backoff_seconds * 1000),
            purge_delete_rate=settings.purge_delete_rate,
        )
        tasks = TaskWorkers(
            catalog.tasks,
            TaskLeases(datastore),
            threads=settings.task_workers,
            poll_interval_s=settings.task_poll_interval_seconds,
            lease_s=settings.task_lease_seconds,
        )
        catalog.lifecycle.on_task_scheduled = tasks.wake
        reader: TabularReader
        if settings.database_url is None:
            reader = SQLiteTabularReader(settings.sqlite_path, settings.metadata_cache_bytes)
        else:
            conninfo: dict[str, Any]
            if settings.database_read_url is not None:
                conninfo = {
                    "conninfo": settings.database_read_url,
                    "application_name": READ_APPLICATION_NAME,
                }
            else:
                env = settings.eventsourcing_env()
                conninfo = {
                    "dbname": env["POSTGRES_DBNAME"],
                    "host": env["POSTGRES_HOST"],
                    "port": env["POSTGRES_PORT"],
                    "user": env["POSTGRES_USER"],
                    "password": env["POSTGRES_PASSWORD"],
                }
            reader = PostgresTabularReader(
                conninfo,
                max_size=settings.pg_read_connections,
                cache_bytes=settings.metadata_cache_bytes,
            )
        return cls(
            settings=settings,
            catalog=catalog,
            queries=queries,
            reader=reader,
            tasks=tasks,
            access=StorageAccess(app),
            primary=primary,
            schema_applied=applied,
            _closers=closers,
        )

    def ensure_defaults(self) -> None:
        """Embedded default: bootstrapped server, default project (nil UUID), and a
        `default` warehouse — all through commands, so all of it is in the log."""
        # Replicas starting together race to create these: the loser's AlreadyExists
        # means the winner's is there, which is all that is asked.
        self.catalog.management.bootstrap(SYSTEM)
        if self.primary.project(str(NIL_UUID)) is None:
            with suppress(AlreadyExistsError):
                self.catalog.management.create_project(SYSTEM, "default", NIL_UUID)
        if (
            self.settings.default_warehouse
            and self.primary.warehouse_by_name(str(NIL_UUID), DEFAULT_WAREHOUSE_NAME) is None
        ):
            try:
                self.catalog.management.create_warehouse(
                    SYSTEM,
                    project_id=NIL_UUID,
                    name=DEFAULT_WAREHOUSE_NAME,
                    storage_profile={
                        "type": "file",
                        "base-location": self.settings.default_warehouse_location,
                    },
                )
            except AlreadyExistsError:
                pass
            except StorageOverlapError:
                # The winner's warehouse holds that storage already (the storage check can
                # come before the name's): fine when it is the default warehouse; another
                # warehouse on that storage is a real conflict.
                if self.primary.warehouse_by_name(str(NIL_UUID), DEFAULT_WAREHOUSE_NAME) is None:
                    raise

    def default_warehouse_id(self) -> str:
        now = time.monotonic()
        with self._lock:
            stamp, cached = self._default_warehouse
            if cached is not None and now - stamp < 5.0:
                return cached
        # On the primary (cached for a moment): a replica that has not replayed the
        # default warehouse yet must not turn every prefix-less request into a 400.
        found = self.primary.warehouse_by_name(str(NIL_UUID), DEFAULT_WAREHOUSE_NAME)
        if found is None:
            raise BadRequestError(
                "No warehouse given: request /v1/config?warehouse=<name> and use its prefix"
            )
        with self._lock:
            self._default_warehouse = (now, found["id"])
        return str(found["id"])

    def warehouse_text_for_prefix(self, prefix: str | None) -> tuple[UUID, str]:
        """`warehouse_for_prefix`, with the id's text form (formatting a UUID each time
        showed on loadTable)."""
        value = self.default_warehouse_id() if prefix is None else prefix
        known = self._prefixes.get(value)
        if known is not None:
            return known
        try:
            parsed = UUID(value)
        except ValueError:
            raise NoSuchWarehouseError(f"Warehouse does not exist: {value}") from None
        # Parsing the id cost ~2 % of a loadTable; the few prefixes in use are kept (a flood
        # of made-up ones only empties the dict).
        if len(self._prefixes) >= 1024:
            self._prefixes.clear()
        found = self._prefixes[value] = (parsed, str(parsed))
        return found

    def warehouse_for_prefix(self, prefix: str | None) -> UUID:
        """The REST `{prefix}` is the warehouse id; no prefix means the default warehouse."""
        return self.warehouse_text_for_prefix(prefix)[0]

    def close(self) -> None:
        self.tasks.stop()
        for close in self._closers:
            close()
        self.catalog.close()

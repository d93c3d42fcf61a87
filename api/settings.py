"""Settings: the only place that reads the environment (prefix ICELOG_).

Which variables there are, their kinds, defaults and bounds are in one table,
api/settings_table.py; this module holds the values, parsed by that table, and what is
derived from them (the pools' sizes, the event store's settings).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from icelog.api.connection_budget import BudgetError, PoolRequest, PoolSizes, pool_sizes
from icelog.api.database_url import PREFIX, SettingsError, postgres_env, redact_url
from icelog.api.settings_table import MAX_PORT, SETTINGS

__all__ = [
    "MAX_PORT",
    "PREFIX",
    "AuthSettings",
    "PublishSettings",
    "Settings",
    "SettingsError",
    "redact_url",
]


@dataclass(frozen=True)
class PublishSettings:
    """Change-event relays (see docs/events.md)."""

    run_in_serve: tuple[str, ...]
    source: str
    batch_size: int
    lease_seconds: float
    nats_urls: tuple[str, ...]
    nats_stream: str
    nats_subject_prefix: str
    nats_duplicate_window_seconds: float
    kafka_bootstrap_servers: str | None
    kafka_topic: str
    kafka_config: dict[str, Any]


@dataclass(frozen=True)
class AuthSettings:
    """Authentication (docs/auth.md). No provider: every caller is anonymous and may do
    everything (`allow-all`), which the server refuses off loopback unless
    `ICELOG_ALLOW_UNAUTHENTICATED=true`."""

    provider_uris: tuple[str, ...]
    provider_keys: tuple[str | None, ...]  # one per provider_uris entry; None: default
    audiences: tuple[str, ...]
    additional_issuers: tuple[str, ...]
    subject_claims: tuple[str, ...]
    leeway_seconds: int
    allow_unauthenticated: bool
    metrics_require_token: bool
    console_client_id: str
    token_rate_per_minute: int
    console_insecure_cookies: bool

    @property
    def enabled(self) -> bool:
        return bool(self.provider_uris)


def _sizes(
    request: PoolRequest, workers: int, task_workers: int, publish: PublishSettings
) -> PoolSizes:
    try:
        return pool_sizes(
            request,
            workers=workers,
            task_workers=task_workers,
            relays=len(publish.run_in_serve),
        )
    except BudgetError as exc:
        raise SettingsError(str(exc)) from None


@dataclass(frozen=True)
class Settings:
    """What each field means: api/settings_table.py (rendered as docs/settings.md)."""

    data_dir: Path
    database_url: str | None
    host: str
    port: int
    default_warehouse: bool
    default_warehouse_location: str
    # One process's pools (api/connection_budget.py), sized from `pool_request`: the write
    # side's pool keeps `pg_pool_size` connections open and grows by up to
    # `pg_max_overflow`; the loadTable reader has `pg_read_connections`.
    pg_pool_size: int
    pg_max_overflow: int
    pg_read_connections: int
    pg_lock_timeout_seconds: int
    aggregate_cache_size: int
    metadata_cache_bytes: int
    idempotency_lifetime_seconds: int
    log_level: str
    log_format: str
    max_request_body_bytes: int
    request_timeout_seconds: float
    task_workers: int
    task_poll_interval_seconds: float
    task_lease_seconds: float
    task_max_attempts: int
    task_retry_backoff_seconds: float
    purge_delete_rate: float
    publish: PublishSettings
    audit_chain_interval_seconds: float
    audit_anchor_interval_seconds: float
    secrets_key: str | None
    secrets_old_keys: tuple[str, ...]
    skip_storage_validation: bool
    database_read_url: str | None
    max_metadata_file_bytes: int
    storage_read_timeout_seconds: float
    file_warehouse_roots: tuple[str, ...]
    s3_endpoint_hosts: tuple[str, ...]
    events_retention_days: float
    forwarded_allow_ips: tuple[str, ...]
    auth: AuthSettings
    # The pool settings as given, and the worker processes of this `icelog serve` that
    # share their budget.
    pool_request: PoolRequest
    workers: int

    def for_workers(self, workers: int) -> Settings:
        """These settings in one of `workers` processes of a replica: the pools sized to
        its share of the budget (SettingsError when they do not fit)."""
        request = self.pool_request if self.database_url else PoolRequest()
        sizes = _sizes(request, workers, self.task_workers, self.publish)
        return replace(
            self,
            workers=workers,
            pg_pool_size=sizes.kept_open,
            pg_max_overflow=sizes.overflow,
            pg_read_connections=sizes.load_table,
        )

    @property
    def backend(self) -> str:
        return "postgres" if self.database_url else "sqlite"

    @property
    def database_url_redacted(self) -> str | None:
        """The PostgreSQL URL without its password, for messages."""
        if self.database_url is None:
            return None
        return redact_url(self.database_url)

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "catalog.db"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        parsed: dict[str, Any] = {}
        groups: dict[str, dict[str, Any]] = {"": {}, "publish": {}, "auth": {}, "pool": {}}
        for setting in SETTINGS:
            name = PREFIX + setting.name
            value: Any = setting.kind(env.get(name, setting.default), name, parsed)
            parsed[setting.name] = value
            values = value if len(setting.fields) > 1 else (value,)
            for path, part in zip(setting.fields, values, strict=True):
                group, _, attribute = path.rpartition(".")
                groups[group][attribute] = part
        publish = PublishSettings(**groups["publish"])
        pool_request = PoolRequest(**groups["pool"])
        fields = groups[""]
        # The embedded SQLite store has no pools: the PostgreSQL settings are only parsed.
        sizes = _sizes(
            pool_request if fields["database_url"] else PoolRequest(),
            fields["workers"],
            fields["task_workers"],
            publish,
        )
        return cls(
            **fields,
            publish=publish,
            auth=AuthSettings(**groups["auth"]),
            pool_request=pool_request,
            pg_pool_size=sizes.kept_open,
            pg_max_overflow=sizes.overflow,
            pg_read_connections=sizes.load_table,
        )

    def eventsourcing_env(self) -> dict[str, str]:
        """The explicit env for the eventsourcing application (never taken from os.environ)."""
        env = {
            "AGGREGATE_CACHE_MAXSIZE": str(self.aggregate_cache_size),
            "AGGREGATE_CACHE_FASTFORWARD": "y",
            "DEEPCOPY_FROM_AGGREGATE_CACHE": "y",
            "IS_SNAPSHOTTING_ENABLED": "y",
            "CREATE_TABLE": "y",
        }
        if self.database_url is None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            env |= {
                "PERSISTENCE_MODULE": "eventsourcing.sqlite",
                "SQLITE_DBNAME": str(self.sqlite_path),
                "SQLITE_LOCK_TIMEOUT": "30",
                "APPLICATION_RECORDER_TOPIC": "icelog.projections.recorders:InlineSQLiteRecorder",
            }
            return env
        env |= postgres_env(self.database_url)
        env |= {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_POOL_SIZE": str(self.pg_pool_size),
            "POSTGRES_MAX_OVERFLOW": str(self.pg_max_overflow),
            "POSTGRES_LOCK_TIMEOUT": str(self.pg_lock_timeout_seconds),
            "POSTGRES_CONNECT_TIMEOUT": "10",
            "APPLICATION_RECORDER_TOPIC": "icelog.projections.recorders:InlinePostgresRecorder",
        }
        return env

"""Settings: the only place that reads the environment (prefix ICELOG_)."""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from icelog.api.connection_budget import BudgetError, PoolRequest, PoolSizes, pool_sizes
from icelog.domain.errors import BadRequestError
from icelog.domain.locations import Location
from icelog.domain.user_ids import parse_provider_entry
from icelog.projections.secrets import SecretKeyError, parse_key

PREFIX = "ICELOG_"


class SettingsError(ValueError):
    """A setting is missing or malformed; the server refuses to start."""


def _bool(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "no", "n", "off"):
        return False
    raise SettingsError(f"{name} must be true or false, got {value!r}")


MAX_PORT = 65535


def _int(value: str, name: str, minimum: int = 0) -> int:
    try:
        number = int(value)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {value!r}") from None
    if number < minimum:
        raise SettingsError(f"{name} must be >= {minimum}, got {number}")
    return number


def _port(value: str) -> int:
    """ICELOG_PORT: 0 to 65535 (a larger number would listen elsewhere, modulo 65536)."""
    number = _int(value, PREFIX + "PORT", 0)
    if number > MAX_PORT:
        raise SettingsError(f"{PREFIX}PORT must be <= {MAX_PORT}, got {number}")
    return number


def _float(value: str, name: str, minimum: float = 0.0) -> float:
    try:
        number = float(value)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {value!r}") from None
    if not number >= minimum:  # also refuses NaN
        raise SettingsError(f"{name} must be >= {minimum}, got {value}")
    return number


def _optional_int(value: str, name: str, minimum: int) -> int | None:
    return None if not value.strip() else _int(value.strip(), name, minimum)


def _pool_request(get: Any) -> PoolRequest:
    """The pool settings as given; unset ones are sized by api/connection_budget.py."""
    return PoolRequest(
        max_connections=_optional_int(
            get("PG_MAX_CONNECTIONS", ""), PREFIX + "PG_MAX_CONNECTIONS", 1
        ),
        pool_size=_optional_int(get("PG_POOL_SIZE", ""), PREFIX + "PG_POOL_SIZE", 1),
        max_overflow=_optional_int(get("PG_MAX_OVERFLOW", ""), PREFIX + "PG_MAX_OVERFLOW", 0),
        read_connections=_optional_int(
            get("PG_READ_CONNECTIONS", ""), PREFIX + "PG_READ_CONNECTIONS", 1
        ),
    )


def _log_format(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in ("text", "json"):
        raise SettingsError(f"{PREFIX}LOG_FORMAT must be text or json, got {value!r}")
    return lowered


def _checked_key(value: str, name: str) -> str:
    # The format check lives with the cipher; settings refuse a bad key before the
    # server starts, and never print it.
    try:
        parse_key(value)
    except SecretKeyError as exc:
        raise SettingsError(f"{name}: {exc}") from None
    return value


def _secrets_key(value: str, *, postgres: bool) -> str | None:
    """The storage-credentials key. Required on PostgreSQL (shared by every replica); the
    embedded default keeps a generated key file in the data directory instead."""
    if not value.strip():
        if postgres:
            raise SettingsError(
                f"{PREFIX}SECRETS_KEY is required with PostgreSQL: 32 random bytes, base64 "
                "(openssl rand -base64 32); it encrypts storage credentials"
            )
        return None
    return _checked_key(value.strip(), PREFIX + "SECRETS_KEY")


def _database_url(value: str) -> str | None:
    """ICELOG_DATABASE_URL: a postgresql:// URL naming a database, or unset (SQLite).
    A mistake is said here, as a configuration error, and never by echoing the URL: an
    unencoded '/' in the password makes part of it the "port" or the path."""
    url = value.strip() or None
    if url is None:
        return None
    parsed = urlparse(url)
    if parsed.scheme not in ("postgresql", "postgres"):
        raise SettingsError(
            f"{PREFIX}DATABASE_URL must be a postgresql:// URL (got scheme "
            f"{parsed.scheme!r}); leave it unset for the embedded SQLite store"
        )
    if not parsed.path.strip("/"):
        raise SettingsError(f"{PREFIX}DATABASE_URL must name a database")
    try:
        # libpq's multi-host form (`h1:5432,h2:5432`, for failover) is libpq's to parse.
        if "," not in parsed.netloc.rpartition("@")[2]:
            parsed.port  # noqa: B018 - parsing it is the check
    except ValueError:
        raise SettingsError(
            f"{PREFIX}DATABASE_URL: its port is not a number from 0 to 65535 (a '/', '?', "
            "'#' or '@' in the user or password must be percent-encoded)"
        ) from None
    return url


def redact_url(url: str) -> str:
    """A database URL without its password, in the user part or as a `password` query
    parameter (libpq takes both)."""
    parsed = urlparse(url)
    netloc = parsed.netloc
    if parsed.password is not None:
        # The hosts part as written (one host, an IPv6 one, or libpq's several), so that
        # nothing is parsed that could fail or move a piece of the password elsewhere.
        userinfo, _, hosts = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{hosts}"
    query = "&".join(
        f"{name}=***" if unquote(name).strip().lower() == "password" else part
        for part in parsed.query.split("&")
        if part
        for name in [part.partition("=")[0]]
    )
    return parsed._replace(netloc=netloc, query=query).geturl()


def _read_url(value: str, *, primary: str | None) -> str | None:
    """ICELOG_DATABASE_READ_URL: a PostgreSQL replica for the read models (optional)."""
    url = value.strip() or None
    if url is None:
        return None
    if primary is None:
        raise SettingsError(
            f"{PREFIX}DATABASE_READ_URL needs {PREFIX}DATABASE_URL (the primary): a read "
            "replica only exists for PostgreSQL"
        )
    parsed = urlparse(url)
    if parsed.scheme not in ("postgresql", "postgres") or not parsed.path.strip("/"):
        raise SettingsError(
            f"{PREFIX}DATABASE_READ_URL must be a postgresql:// URL naming a database "
            f"(got scheme {parsed.scheme!r})"
        )
    return url


def _file_roots(value: str) -> tuple[str, ...]:
    """ICELOG_FILE_WAREHOUSE_ROOTS: comma-separated directories (`/data/lake` or
    `file:///data/lake`) below which `file` warehouses may be created."""
    roots = []
    for item in value.split(","):
        if not item.strip():
            continue
        try:
            root = Location.parse(item.strip(), PREFIX + "FILE_WAREHOUSE_ROOTS entry")
        except BadRequestError as exc:
            raise SettingsError(exc.message) from None
        if root.scheme != "file":
            raise SettingsError(f"{PREFIX}FILE_WAREHOUSE_ROOTS entries must be directories")
        roots.append(str(root))
    return tuple(roots)


SINKS = ("nats", "kafka")
_NATS_TOKEN = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
_STREAM_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_KAFKA_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


@dataclass(frozen=True)
class PublishSettings:
    """Change-event relays (see docs/events.md)."""

    run_in_serve: tuple[str, ...] = ()
    source: str = "urn:icelog:catalog"
    batch_size: int = 500
    lease_seconds: float = 10.0
    nats_urls: tuple[str, ...] = ("nats://127.0.0.1:4222",)
    nats_stream: str = "ICELOG"
    nats_subject_prefix: str = "icelog"
    nats_duplicate_window_seconds: float = 120.0
    kafka_bootstrap_servers: str | None = None
    kafka_topic: str = "icelog-events"
    kafka_config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_env(cls, get: Any) -> PublishSettings:
        run = tuple(x.strip() for x in get("PUBLISH", "").split(",") if x.strip())
        for sink in run:
            if sink not in SINKS:
                raise SettingsError(f"{PREFIX}PUBLISH: unknown sink {sink!r} (use nats, kafka)")
        prefix = get("NATS_SUBJECT_PREFIX", "icelog")
        if not _NATS_TOKEN.match(prefix):
            raise SettingsError(
                f"{PREFIX}NATS_SUBJECT_PREFIX must be dot-separated tokens of letters, digits, "
                f"'-' or '_' (no wildcards), got {prefix!r}"
            )
        stream = get("NATS_STREAM", "ICELOG")
        if not _STREAM_NAME.match(stream):
            raise SettingsError(f"{PREFIX}NATS_STREAM must be letters, digits, '-', '_'")
        topic = get("KAFKA_TOPIC", "icelog-events")
        if not _KAFKA_TOPIC.match(topic):
            raise SettingsError(f"{PREFIX}KAFKA_TOPIC is not a valid Kafka topic name: {topic!r}")
        raw_config = get("KAFKA_CONFIG", "") or "{}"
        try:
            kafka_config = json.loads(raw_config)
        except json.JSONDecodeError:
            raise SettingsError(f"{PREFIX}KAFKA_CONFIG must be a JSON object") from None
        if not isinstance(kafka_config, dict):
            raise SettingsError(f"{PREFIX}KAFKA_CONFIG must be a JSON object")
        bootstrap = get("KAFKA_BOOTSTRAP_SERVERS", "").strip() or None
        if "kafka" in run and bootstrap is None:
            raise SettingsError(f"{PREFIX}KAFKA_BOOTSTRAP_SERVERS is required to publish to Kafka")
        urls = tuple(u.strip() for u in get("NATS_URL", "nats://127.0.0.1:4222").split(","))
        if not all(u.startswith(("nats://", "tls://")) for u in urls if u):
            raise SettingsError(f"{PREFIX}NATS_URL must be nats:// or tls:// URL(s)")
        return cls(
            run_in_serve=run,
            source=get("EVENTS_SOURCE", "urn:icelog:catalog") or "urn:icelog:catalog",
            batch_size=_int(get("PUBLISH_BATCH_SIZE", "500"), PREFIX + "PUBLISH_BATCH_SIZE", 1),
            lease_seconds=_float(
                get("PUBLISH_LEASE_SECONDS", "10"), PREFIX + "PUBLISH_LEASE_SECONDS", 1.0
            ),
            nats_urls=tuple(u for u in urls if u),
            nats_stream=stream,
            nats_subject_prefix=prefix,
            nats_duplicate_window_seconds=_float(
                get("NATS_DUPLICATE_WINDOW_SECONDS", "120"),
                PREFIX + "NATS_DUPLICATE_WINDOW_SECONDS",
                1.0,
            ),
            kafka_bootstrap_servers=bootstrap,
            kafka_topic=topic,
            kafka_config=kafka_config,
        )


@dataclass(frozen=True)
class AuthSettings:
    """Authentication (docs/auth.md). No provider: every caller is anonymous and may do
    everything (`allow-all`), which the server refuses off loopback unless
    `ICELOG_ALLOW_UNAUTHENTICATED=true`."""

    # ICELOG_OPENID_PROVIDER_URI: one or more (comma-separated) OpenID providers, each with
    # `/.well-known/openid-configuration`; the other settings apply to all of them. Each
    # entry is `<uri>` (the default provider: user ids `oidc~<subject>`, at most one) or
    # `<key>=<uri>` (user ids `<key>~<subject>`; ADR 0019).
    provider_uris: tuple[str, ...] = ()
    provider_keys: tuple[str | None, ...] = ()  # one per provider_uris entry; None: default
    audiences: tuple[str, ...] = ()  # ICELOG_OPENID_AUDIENCE: a token needs one of them
    additional_issuers: tuple[str, ...] = ()  # ICELOG_OPENID_ADDITIONAL_ISSUERS
    subject_claims: tuple[str, ...] = ()  # ICELOG_OPENID_SUBJECT_CLAIM (default: oid, sub)
    leeway_seconds: int = 60  # ICELOG_OPENID_LEEWAY_SECONDS: clock skew for exp / nbf
    allow_unauthenticated: bool = False  # ICELOG_ALLOW_UNAUTHENTICATED
    metrics_require_token: bool = False  # ICELOG_METRICS_REQUIRE_TOKEN
    # ICELOG_CONSOLE_CLIENT_ID: the provider's public client the web console logs in with
    # (authorization code + PKCE); default: the first audience, else `icelog`.
    console_client_id: str = "icelog"
    # ICELOG_TOKEN_RATE_PER_MINUTE: token endpoint requests per client address and minute
    # (0: no limit).
    token_rate_per_minute: int = 120
    # ICELOG_CONSOLE_INSECURE_COOKIES: console cookies without `Secure`, for a console used
    # over plain http (development on localhost only).
    console_insecure_cookies: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.provider_uris)

    @classmethod
    def from_env(cls, get: Any) -> AuthSettings:
        keys, providers = _providers(_list(get("OPENID_PROVIDER_URI", "")))
        audiences = _list(get("OPENID_AUDIENCE", ""))
        return cls(
            provider_uris=providers,
            provider_keys=keys,
            audiences=audiences,
            additional_issuers=_list(get("OPENID_ADDITIONAL_ISSUERS", "")),
            subject_claims=_list(get("OPENID_SUBJECT_CLAIM", "")),
            leeway_seconds=_int(
                get("OPENID_LEEWAY_SECONDS", "60"), PREFIX + "OPENID_LEEWAY_SECONDS"
            ),
            allow_unauthenticated=_bool(
                get("ALLOW_UNAUTHENTICATED", "false"), PREFIX + "ALLOW_UNAUTHENTICATED"
            ),
            metrics_require_token=_bool(
                get("METRICS_REQUIRE_TOKEN", "false"), PREFIX + "METRICS_REQUIRE_TOKEN"
            ),
            console_client_id=get("CONSOLE_CLIENT_ID", "") or (audiences or ("icelog",))[0],
            console_insecure_cookies=_bool(
                get("CONSOLE_INSECURE_COOKIES", "false"), PREFIX + "CONSOLE_INSECURE_COOKIES"
            ),
            token_rate_per_minute=_int(
                get("TOKEN_RATE_PER_MINUTE", "120"), PREFIX + "TOKEN_RATE_PER_MINUTE", 0
            ),
        )


def _providers(entries: tuple[str, ...]) -> tuple[tuple[str | None, ...], tuple[str, ...]]:
    """The keys and URIs of `[<key>=]<uri>` entries: at most one without a key (the
    default provider), keys unique (ADR 0019)."""
    keys: list[str | None] = []
    uris: list[str] = []
    for entry in entries:
        try:
            key, uri = parse_provider_entry(entry)
        except ValueError as exc:
            raise SettingsError(f"{PREFIX}OPENID_PROVIDER_URI: {exc}") from None
        parsed = urlparse(uri)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise SettingsError(f"{PREFIX}OPENID_PROVIDER_URI must be http(s) URLs: {uri!r}")
        if key in keys:
            what = "more than one provider without a key (the default provider)"
            if key is not None:
                what = f"the provider key {key!r} twice"
            raise SettingsError(
                f"{PREFIX}OPENID_PROVIDER_URI names {what}: give each further provider its own "
                "key as <key>=<uri> (docs/auth.md)"
            )
        keys.append(key)
        uris.append(uri.rstrip("/"))
    return tuple(keys), tuple(uris)


def _proxies(value: str) -> tuple[str, ...]:
    """ICELOG_FORWARDED_ALLOW_IPS: `*`, or IP addresses and networks (CIDR)."""
    entries = _list(value)
    for entry in entries:
        if entry == "*":
            continue
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise SettingsError(
                f"{PREFIX}FORWARDED_ALLOW_IPS must list IP addresses or networks (or *): {entry!r}"
            ) from None
    return entries


def _list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


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
    data_dir: Path
    database_url: str | None
    host: str
    port: int
    default_warehouse: bool
    default_warehouse_location: str
    # One process's pools (api/connection_budget.py): the write side's pool keeps
    # `pg_pool_size` connections open and grows by up to `pg_max_overflow`; the loadTable
    # reader has `pg_read_connections`.
    pg_pool_size: int
    pg_max_overflow: int
    pg_read_connections: int
    pg_lock_timeout_seconds: int
    aggregate_cache_size: int
    metadata_cache_bytes: int
    idempotency_lifetime_seconds: int
    log_level: str
    # Observability and limits (docs/operations.md "Metrics, health, logs, limits").
    log_format: str = "text"  # ICELOG_LOG_FORMAT: text | json
    max_request_body_bytes: int = 32 * 1024 * 1024  # ICELOG_MAX_REQUEST_BODY_MB
    request_timeout_seconds: float = 30.0  # ICELOG_REQUEST_TIMEOUT_SECONDS; 0 = none
    task_workers: int = 1
    task_poll_interval_seconds: float = 2.0
    task_lease_seconds: float = 30.0
    task_max_attempts: int = 5
    task_retry_backoff_seconds: float = 5.0
    purge_delete_rate: float = 0.0
    publish: PublishSettings = field(default_factory=PublishSettings)
    audit_chain_interval_seconds: float = 1.0
    audit_anchor_interval_seconds: float = 300.0
    secrets_key: str | None = None
    secrets_old_keys: tuple[str, ...] = ()
    skip_storage_validation: bool = False
    # Replicas (docs/operations.md "Replicas and migrations"): an optional read-only
    # PostgreSQL URL (a streaming replica) for the read models; writes and the aggregates
    # commands load always use ICELOG_DATABASE_URL.
    database_read_url: str | None = None
    # Containment (docs/security.md): what one read of a metadata file may cost, where
    # `file` warehouses may live, which S3 endpoints warehouses may name.
    max_metadata_file_bytes: int = 64 * 1024 * 1024  # ICELOG_MAX_METADATA_FILE_MB
    storage_read_timeout_seconds: float = 30.0  # ICELOG_STORAGE_READ_TIMEOUT_SECONDS
    file_warehouse_roots: tuple[str, ...] = ()  # ICELOG_FILE_WAREHOUSE_ROOTS
    s3_endpoint_hosts: tuple[str, ...] = ()  # ICELOG_S3_ENDPOINT_HOSTS
    # Fault injection for tests: die (as under kill -9) right after the n-th table commit
    # lands, before it is answered. 0: never.
    fault_exit_after_commits: int = 0  # ICELOG_FAULT_EXIT_AFTER_COMMITS
    # The Iceberg events API's window (docs/events.md): older events answer 410 Gone there
    # (the log itself keeps them). 0: keep everything.
    events_retention_days: float = 0.0  # ICELOG_EVENTS_RETENTION_DAYS
    # ICELOG_FORWARDED_ALLOW_IPS: the proxies (addresses or networks, comma-separated; `*`:
    # any) whose X-Forwarded-For / X-Forwarded-Proto `icelog serve` believes. Empty (the
    # default): nobody's; the client address is the connection's peer (docs/operations.md).
    forwarded_allow_ips: tuple[str, ...] = ()
    auth: AuthSettings = field(default_factory=AuthSettings)
    # The pool settings as given, and the worker processes of this `icelog serve` that
    # share ICELOG_PG_MAX_CONNECTIONS (ICELOG_SERVE_WORKERS: set by `serve --workers`).
    pool_request: PoolRequest = field(default_factory=PoolRequest)
    workers: int = 1

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

        def get(name: str, default: str) -> str:
            return env.get(PREFIX + name, default)

        data_dir = Path(get("DATA_DIR", ".icelog")).expanduser().absolute()
        url = _database_url(get("DATABASE_URL", ""))
        location = get("DEFAULT_WAREHOUSE_LOCATION", "") or f"file://{data_dir / 'warehouse'}"
        task_workers = _int(get("TASK_WORKERS", "1"), PREFIX + "TASK_WORKERS")
        publish = PublishSettings.from_env(get)
        pool_request = _pool_request(get)
        workers = _int(get("SERVE_WORKERS", "1"), PREFIX + "SERVE_WORKERS", 1)
        # The embedded SQLite store has no pools: the PostgreSQL settings are only parsed.
        sizes = _sizes(pool_request if url else PoolRequest(), workers, task_workers, publish)
        return cls(
            data_dir=data_dir,
            database_url=url,
            host=get("HOST", "127.0.0.1"),
            port=_port(get("PORT", "8181")),
            default_warehouse=_bool(get("DEFAULT_WAREHOUSE", "true"), PREFIX + "DEFAULT_WAREHOUSE"),
            default_warehouse_location=location,
            pg_pool_size=sizes.kept_open,
            pg_max_overflow=sizes.overflow,
            pg_read_connections=sizes.load_table,
            pool_request=pool_request,
            workers=workers,
            pg_lock_timeout_seconds=_int(
                get("PG_LOCK_TIMEOUT_SECONDS", "5"), PREFIX + "PG_LOCK_TIMEOUT_SECONDS"
            ),
            aggregate_cache_size=_int(
                get("AGGREGATE_CACHE_SIZE", "10000"), PREFIX + "AGGREGATE_CACHE_SIZE"
            ),
            metadata_cache_bytes=_int(get("METADATA_CACHE_MB", "64"), PREFIX + "METADATA_CACHE_MB")
            * 1024
            * 1024,
            idempotency_lifetime_seconds=_int(
                get("IDEMPOTENCY_LIFETIME_SECONDS", "1800"),
                PREFIX + "IDEMPOTENCY_LIFETIME_SECONDS",
                1,
            ),
            log_level=get("LOG_LEVEL", "info"),
            log_format=_log_format(get("LOG_FORMAT", "text")),
            max_request_body_bytes=_int(
                get("MAX_REQUEST_BODY_MB", "32"), PREFIX + "MAX_REQUEST_BODY_MB", 1
            )
            * 1024
            * 1024,
            request_timeout_seconds=_float(
                get("REQUEST_TIMEOUT_SECONDS", "30"), PREFIX + "REQUEST_TIMEOUT_SECONDS"
            ),
            task_workers=task_workers,
            task_poll_interval_seconds=_float(
                get("TASK_POLL_INTERVAL_SECONDS", "2"), PREFIX + "TASK_POLL_INTERVAL_SECONDS", 0.05
            ),
            task_lease_seconds=_float(
                get("TASK_LEASE_SECONDS", "30"), PREFIX + "TASK_LEASE_SECONDS", 1.0
            ),
            task_max_attempts=_int(get("TASK_MAX_ATTEMPTS", "5"), PREFIX + "TASK_MAX_ATTEMPTS", 1),
            task_retry_backoff_seconds=_float(
                get("TASK_RETRY_BACKOFF_SECONDS", "5"), PREFIX + "TASK_RETRY_BACKOFF_SECONDS"
            ),
            purge_delete_rate=_float(get("PURGE_DELETE_RATE", "0"), PREFIX + "PURGE_DELETE_RATE"),
            publish=publish,
            audit_chain_interval_seconds=_float(
                get("AUDIT_CHAIN_INTERVAL_SECONDS", "1"), PREFIX + "AUDIT_CHAIN_INTERVAL_SECONDS"
            ),
            audit_anchor_interval_seconds=_float(
                get("AUDIT_ANCHOR_INTERVAL_SECONDS", "300"),
                PREFIX + "AUDIT_ANCHOR_INTERVAL_SECONDS",
            ),
            secrets_key=_secrets_key(get("SECRETS_KEY", ""), postgres=url is not None),
            secrets_old_keys=tuple(
                _checked_key(k.strip(), PREFIX + "SECRETS_OLD_KEYS")
                for k in get("SECRETS_OLD_KEYS", "").split(",")
                if k.strip()
            ),
            skip_storage_validation=_bool(
                get("SKIP_STORAGE_VALIDATION", "false"), PREFIX + "SKIP_STORAGE_VALIDATION"
            ),
            database_read_url=_read_url(get("DATABASE_READ_URL", ""), primary=url),
            max_metadata_file_bytes=_int(
                get("MAX_METADATA_FILE_MB", "64"), PREFIX + "MAX_METADATA_FILE_MB", 1
            )
            * 1024
            * 1024,
            events_retention_days=_float(
                get("EVENTS_RETENTION_DAYS", "0"), PREFIX + "EVENTS_RETENTION_DAYS"
            ),
            storage_read_timeout_seconds=_float(
                get("STORAGE_READ_TIMEOUT_SECONDS", "30"),
                PREFIX + "STORAGE_READ_TIMEOUT_SECONDS",
                0.1,
            ),
            file_warehouse_roots=_file_roots(get("FILE_WAREHOUSE_ROOTS", "")),
            fault_exit_after_commits=_int(
                get("FAULT_EXIT_AFTER_COMMITS", "0"), PREFIX + "FAULT_EXIT_AFTER_COMMITS"
            ),
            forwarded_allow_ips=_proxies(get("FORWARDED_ALLOW_IPS", "")),
            auth=AuthSettings.from_env(get),
            s3_endpoint_hosts=tuple(
                host.strip().lower()
                for host in get("S3_ENDPOINT_HOSTS", "").split(",")
                if host.strip()
            ),
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
        parsed = urlparse(self.database_url)
        if not parsed.path.strip("/"):
            raise SettingsError(f"{PREFIX}DATABASE_URL must name a database")
        env |= {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": unquote(parsed.path.strip("/")),
            "POSTGRES_HOST": parsed.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(parsed.port or 5432),
            "POSTGRES_USER": unquote(parsed.username or os.environ.get("PGUSER", "postgres")),
            "POSTGRES_PASSWORD": unquote(parsed.password or ""),
            "POSTGRES_POOL_SIZE": str(self.pg_pool_size),
            "POSTGRES_MAX_OVERFLOW": str(self.pg_max_overflow),
            "POSTGRES_LOCK_TIMEOUT": str(self.pg_lock_timeout_seconds),
            "POSTGRES_CONNECT_TIMEOUT": "10",
            "APPLICATION_RECORDER_TOPIC": "icelog.projections.recorders:InlinePostgresRecorder",
        }
        return env

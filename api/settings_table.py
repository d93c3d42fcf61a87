"""Every setting once: its environment variable (after the prefix ICELOG_), the field it
sets, its kind (type and bounds), its default and what it does. `Settings.from_env`
parses the environment by this table, and scripts/settings_doc.py renders it as the
settings reference, docs/settings.md.

Entries are parsed in this order; one that depends on another (a read replica's URL on
the primary's) comes after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from icelog.api import settings_kinds as k

MB = 1024 * 1024
MAX_PORT = 65535


@dataclass(frozen=True)
class Setting:
    name: str  # without the prefix
    # The field it sets: a Settings attribute, or `publish.`/`auth.`/`pool.` one of the
    # publishing, authentication or pool request's; several when the value is a tuple
    # of theirs.
    fields: tuple[str, ...]
    kind: k.Kind
    default: str  # the text an unset variable stands for
    doc: str
    section: str
    shown: str | None = None  # the default as the reference says it, when not `default`

    def default_text(self) -> str:
        """The default as the settings reference says it."""
        if self.shown is not None:
            return self.shown
        return f"`{self.default}`" if self.default else "unset"


def _s(
    name: str,
    field: str,
    kind: k.Kind,
    default: str,
    doc: str,
    section: str,
    shown: str | None = None,
) -> Setting:
    return Setting(name, tuple(field.split(",")), kind, default, doc, section, shown)


STORE = "Database and data"
LISTEN = "Listening and requests"
AUTH = "Authentication"
POOLS = "PostgreSQL connections"
CACHES = "Caches and idempotency"
TASKS = "Background tasks"
EVENTS = "Change events"
STORAGE = "Storage access and containment"
AUDIT = "Audit"
LOGS = "Logs"

SETTINGS: tuple[Setting, ...] = (
    _s(
        "DATA_DIR",
        "data_dir",
        k.Custom(k.data_dir, "directory"),
        ".icelog",
        "embedded SQLite database (`catalog.db`) and the default warehouse",
        STORE,
        "`./.icelog`",
    ),
    _s(
        "DATABASE_URL",
        "database_url",
        k.Custom(k.primary_url, "URL"),
        "",
        "`postgresql://user:password@host:5432/db` selects PostgreSQL (percent-encode a `/`, "
        "`?`, `#` or `@` in the user or password)",
        STORE,
        "unset (SQLite)",
    ),
    _s(
        "DEFAULT_WAREHOUSE_LOCATION",
        "default_warehouse_location",
        k.Custom(k.warehouse_location, "URL"),
        "",
        "the default warehouse's storage root",
        STORE,
        "`file://<data dir>/warehouse`",
    ),
    _s(
        "TASK_WORKERS",
        "task_workers",
        k.Int(),
        "1",
        "task worker threads (expiration, purge) per `icelog serve` / `icelog tasks run` "
        "process (0: none in `serve`); see [lifecycle.md](lifecycle.md)",
        TASKS,
    ),
    _s(
        "PUBLISH",
        "publish.run_in_serve",
        k.Custom(k.sinks, "list of `nats`, `kafka`"),
        "",
        "relays that `icelog serve` runs: `nats`, `kafka` or `nats,kafka`",
        EVENTS,
    ),
    _s(
        "EVENTS_SOURCE",
        "publish.source",
        k.Text(or_default="urn:icelog:catalog"),
        "urn:icelog:catalog",
        "the CloudEvents `source`",
        EVENTS,
    ),
    _s(
        "PUBLISH_BATCH_SIZE",
        "publish.batch_size",
        k.Int(1),
        "500",
        "events read and sent per batch",
        EVENTS,
    ),
    _s(
        "PUBLISH_LEASE_SECONDS",
        "publish.lease_seconds",
        k.Float(1.0),
        "10",
        "a relay's lease on its sink: another relay takes over this long after the holder "
        "stopped renewing it",
        EVENTS,
    ),
    _s(
        "NATS_URL",
        "publish.nats_urls",
        k.Custom(k.nats_urls, "list of URLs"),
        "nats://127.0.0.1:4222",
        "NATS server(s), comma-separated, `nats://` or `tls://`",
        EVENTS,
    ),
    _s(
        "NATS_STREAM",
        "publish.nats_stream",
        k.Custom(k.stream, "name"),
        "ICELOG",
        "JetStream stream (letters, digits, `-`, `_`)",
        EVENTS,
    ),
    _s(
        "NATS_SUBJECT_PREFIX",
        "publish.nats_subject_prefix",
        k.Custom(k.subject_prefix, "dot-separated tokens"),
        "icelog",
        "NATS subject prefix: dot-separated tokens, no wildcards",
        EVENTS,
    ),
    _s(
        "NATS_DUPLICATE_WINDOW_SECONDS",
        "publish.nats_duplicate_window_seconds",
        k.Float(1.0),
        "120",
        "duplicate window of the stream when the relay creates it",
        EVENTS,
    ),
    _s(
        "KAFKA_BOOTSTRAP_SERVERS",
        "publish.kafka_bootstrap_servers",
        k.Custom(k.kafka_servers, "`host:port,…`"),
        "",
        "Kafka brokers; required for the `kafka` sink",
        EVENTS,
    ),
    _s(
        "KAFKA_TOPIC",
        "publish.kafka_topic",
        k.Custom(k.kafka_topic, "Kafka topic"),
        "icelog-events",
        "Kafka topic",
        EVENTS,
    ),
    _s(
        "KAFKA_CONFIG",
        "publish.kafka_config",
        k.Custom(k.kafka_config, "JSON object"),
        "{}",
        "more librdkafka producer settings, as a JSON object",
        EVENTS,
    ),
    _s(
        "PG_MAX_CONNECTIONS",
        "pool.max_connections",
        k.Int(1, optional=True),
        "",
        "the most PostgreSQL connections one `icelog serve` opens, shared by its `--workers`; "
        'see "Connection budget" in [operations.md](operations.md)',
        POOLS,
        "unset: what each process needs (12 with the defaults)",
    ),
    _s(
        "PG_POOL_SIZE",
        "pool.pool_size",
        k.Int(1, optional=True),
        "",
        "the write side's pool per process: connections kept open",
        POOLS,
        "`2` (sized from the budget)",
    ),
    _s(
        "PG_MAX_OVERFLOW",
        "pool.max_overflow",
        k.Int(0, optional=True),
        "",
        "the write side's pool per process: more connections under load",
        POOLS,
        "`6` (sized from the budget)",
    ),
    _s(
        "PG_READ_CONNECTIONS",
        "pool.read_connections",
        k.Int(1, optional=True),
        "",
        "connections of the async loadTable reader per process",
        POOLS,
        "`4` (sized from the budget)",
    ),
    _s(
        "SERVE_WORKERS",
        "workers",
        k.Int(1),
        "1",
        "the processes of this `icelog serve` that share `ICELOG_PG_MAX_CONNECTIONS` (set by "
        "`serve --workers`)",
        POOLS,
    ),
    _s(
        "HOST",
        "host",
        k.Text(),
        "127.0.0.1",
        "listen address (`--host`); without an identity provider only a loopback address (or "
        "`ICELOG_ALLOW_UNAUTHENTICATED=true`)",
        LISTEN,
    ),
    _s("PORT", "port", k.Int(0, MAX_PORT), "8181", "listen port (`--port`)", LISTEN),
    _s(
        "DEFAULT_WAREHOUSE",
        "default_warehouse",
        k.Bool(),
        "true",
        "create the `default` warehouse in the default project on start",
        STORE,
    ),
    _s(
        "PG_LOCK_TIMEOUT_SECONDS",
        "pg_lock_timeout_seconds",
        k.Int(),
        "5",
        "how long a statement waits for a lock, so that a stuck transaction cannot stall "
        "every writer (`0`: forever)",
        POOLS,
    ),
    _s(
        "AGGREGATE_CACHE_SIZE",
        "aggregate_cache_size",
        k.Int(),
        "10000",
        "aggregates kept in memory (always fast-forwarded from the log)",
        CACHES,
    ),
    _s(
        "METADATA_CACHE_MB",
        "metadata_cache_bytes",
        k.Int(scale=MB),
        "64",
        "rendered metadata documents cached per process, by table version (MB)",
        CACHES,
    ),
    _s(
        "IDEMPOTENCY_LIFETIME_SECONDS",
        "idempotency_lifetime_seconds",
        k.Int(1),
        "1800",
        "how long an `Idempotency-Key` outcome is replayed (advertised in `/v1/config`)",
        CACHES,
    ),
    _s(
        "LOG_LEVEL",
        "log_level",
        k.Text(),
        "info",
        "server log level (`warning` turns the access log off)",
        LOGS,
    ),
    _s(
        "LOG_FORMAT",
        "log_format",
        k.Custom(k.log_format, "`text` or `json`"),
        "text",
        "one line per record on stderr, as text or as a JSON object",
        LOGS,
    ),
    _s(
        "MAX_REQUEST_BODY_MB",
        "max_request_body_bytes",
        k.Int(1, scale=MB),
        "32",
        "a larger request body is answered 413 before any handler acts (MB)",
        LISTEN,
    ),
    _s(
        "REQUEST_TIMEOUT_SECONDS",
        "request_timeout_seconds",
        k.Float(),
        "30",
        "a request still unanswered after this long gets 503 (reads) or 504 (writes; "
        "`CommitStateUnknownException` for commits); `0`: none",
        LISTEN,
    ),
    _s(
        "TASK_POLL_INTERVAL_SECONDS",
        "task_poll_interval_seconds",
        k.Float(0.05),
        "2",
        "how often an idle worker looks for due tasks (a drop in the same process wakes it "
        "at once)",
        TASKS,
    ),
    _s(
        "TASK_LEASE_SECONDS",
        "task_lease_seconds",
        k.Float(1.0),
        "30",
        "how long a silent worker keeps a task before another takes it over",
        TASKS,
    ),
    _s(
        "TASK_MAX_ATTEMPTS",
        "task_max_attempts",
        k.Int(1),
        "5",
        "attempts before a task is given up",
        TASKS,
    ),
    _s(
        "TASK_RETRY_BACKOFF_SECONDS",
        "task_retry_backoff_seconds",
        k.Float(),
        "5",
        "first retry delay, doubled per attempt",
        TASKS,
    ),
    _s(
        "PURGE_DELETE_RATE",
        "purge_delete_rate",
        k.Float(),
        "0",
        "files deleted per second per purge, to spare the storage (`0`: unlimited)",
        TASKS,
    ),
    _s(
        "AUDIT_CHAIN_INTERVAL_SECONDS",
        "audit_chain_interval_seconds",
        k.Float(),
        "1",
        "how often `serve` extends the audit hash chain and the event index (`0`: off)",
        AUDIT,
    ),
    _s(
        "AUDIT_ANCHOR_INTERVAL_SECONDS",
        "audit_anchor_interval_seconds",
        k.Float(),
        "300",
        "how often `serve` records the chain's head as an event (`0`: off)",
        AUDIT,
    ),
    _s(
        "SECRETS_KEY",
        "secrets_key",
        k.Custom(k.secrets_key, "32 bytes, base64"),
        "",
        "encrypts storage credentials (`openssl rand -base64 32`); **required with "
        "PostgreSQL**, the same on every replica; see [storage.md](storage.md)",
        STORAGE,
        "unset (SQLite: generated into `<data dir>/secrets.key`)",
    ),
    _s(
        "SECRETS_OLD_KEYS",
        "secrets_old_keys",
        k.Custom(k.old_keys, "list of keys"),
        "",
        "previous keys, still read until `icelog secrets rotate` re-encrypts under the current one",
        STORAGE,
    ),
    _s(
        "SKIP_STORAGE_VALIDATION",
        "skip_storage_validation",
        k.Bool(),
        "false",
        "skip the storage access check when a warehouse's storage or credential is created "
        "or changed",
        STORAGE,
    ),
    _s(
        "DATABASE_READ_URL",
        "database_read_url",
        k.Custom(k.replica_url, "URL"),
        "",
        "a PostgreSQL read replica for read-model queries and loadTable (read-your-writes "
        "then depends on replica lag); see [operations.md](operations.md)",
        STORE,
    ),
    _s(
        "MAX_METADATA_FILE_MB",
        "max_metadata_file_bytes",
        k.Int(1, scale=MB),
        "64",
        "largest metadata, manifest-list or manifest file the server reads, and of a gzip "
        "file's contents (MB)",
        STORAGE,
    ),
    _s(
        "EVENTS_RETENTION_DAYS",
        "events_retention_days",
        k.Float(),
        "0",
        "window of the Iceberg events API (`POST …/events`); older positions answer 410, the "
        "log keeps every event (`0`: everything)",
        EVENTS,
    ),
    _s(
        "STORAGE_READ_TIMEOUT_SECONDS",
        "storage_read_timeout_seconds",
        k.Float(0.1),
        "30",
        "how long one read of such a file from S3 may take",
        STORAGE,
    ),
    _s(
        "FILE_WAREHOUSE_ROOTS",
        "file_warehouse_roots",
        k.Custom(k.file_roots, "list of directories"),
        "",
        "when set, `file` warehouses may only be created below these directories (`/data/lake`"
        " or `file:///data/lake`)",
        STORAGE,
    ),
    _s(
        "FORWARDED_ALLOW_IPS",
        "forwarded_allow_ips",
        k.Custom(k.proxies, "list of addresses, networks or `*`"),
        "",
        "the reverse proxies whose `X-Forwarded-For` / `X-Forwarded-Proto` `icelog serve` "
        "believes; unset: nobody's, the client address is the connection's peer",
        LISTEN,
    ),
    _s(
        "OPENID_PROVIDER_URI",
        "auth.provider_keys,auth.provider_uris",
        k.Custom(k.providers, "list of `[<key>=]<uri>`"),
        "",
        "OpenID provider(s) whose bearer tokens callers must send; at most one without a key "
        "(users `oidc~<subject>`), others as `<key>=<uri>`; see [auth.md](auth.md)",
        AUTH,
        "unset (allow-all)",
    ),
    _s(
        "OPENID_AUDIENCE",
        "auth.audiences",
        k.Names(),
        "",
        "a token's `aud` must hold one of them",
        AUTH,
    ),
    _s(
        "OPENID_ADDITIONAL_ISSUERS",
        "auth.additional_issuers",
        k.Names(),
        "",
        "other `iss` values to accept for the provider (Entra ID's v1 and v2 issuers)",
        AUTH,
    ),
    _s(
        "OPENID_SUBJECT_CLAIM",
        "auth.subject_claims",
        k.Names(),
        "",
        "claims tried in order for the user id",
        AUTH,
        "`sub` (Entra ID: `oid`, then `sub`)",
    ),
    _s(
        "OPENID_LEEWAY_SECONDS",
        "auth.leeway_seconds",
        k.Int(),
        "60",
        "clock skew allowed on `exp`, `nbf`, `iat`",
        AUTH,
    ),
    _s(
        "ALLOW_UNAUTHENTICATED",
        "auth.allow_unauthenticated",
        k.Bool(),
        "false",
        "without a provider, listen on a non-loopback address anyway (everyone who reaches "
        "the port may do everything)",
        AUTH,
    ),
    _s(
        "METRICS_REQUIRE_TOKEN",
        "auth.metrics_require_token",
        k.Bool(),
        "false",
        "`/metrics` needs a token too",
        AUTH,
    ),
    _s(
        "CONSOLE_CLIENT_ID",
        "auth.console_client_id",
        k.Custom(k.console_client, "text"),
        "",
        "the provider's public client the web console logs in with (authorization code + "
        "PKCE); see [console.md](console.md)",
        AUTH,
        "the first audience, else `icelog`",
    ),
    _s(
        "CONSOLE_INSECURE_COOKIES",
        "auth.console_insecure_cookies",
        k.Bool(),
        "false",
        "console cookies without `Secure`, for plain-http development only",
        AUTH,
    ),
    _s(
        "TOKEN_RATE_PER_MINUTE",
        "auth.token_rate_per_minute",
        k.Int(),
        "120",
        "token endpoint requests per client address and minute (`0`: no limit)",
        AUTH,
    ),
    _s(
        "S3_ENDPOINT_HOSTS",
        "s3_endpoint_hosts",
        k.Names(lower=True),
        "",
        "when set, storage profiles may only name these endpoint hosts (`host[:port]`): "
        "S3 endpoint / STS, ADLS endpoint / authority host, GCS endpoint / STS / the key's "
        "token URI (the public clouds' own defaults are always allowed)",
        STORAGE,
    ),
)

SECTIONS = (STORE, LISTEN, AUTH, POOLS, CACHES, TASKS, EVENTS, STORAGE, AUDIT, LOGS)

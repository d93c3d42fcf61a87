"""The kinds of value a setting takes (api/settings_table.py): each parses the text of its
environment variable, refusing what is out of bounds with a message naming the variable,
and describes itself for the settings reference (docs/settings.md)."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from icelog.api.database_url import PREFIX, SettingsError, database_url, read_url
from icelog.domain.errors import BadRequestError
from icelog.domain.locations import Location
from icelog.domain.user_ids import parse_provider_entry
from icelog.projections.secrets import SecretKeyError, parse_key

# What a kind's parser receives besides the text and the variable's name: the values of
# the settings parsed before it (by name without the prefix), for the few that depend on
# another (a replica URL needs the primary's).
Parsed = Mapping[str, Any]


def names(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


def _int(value: str, name: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {value!r}") from None
    if number < minimum:
        raise SettingsError(f"{name} must be >= {minimum}, got {number}")
    return number


@dataclass(frozen=True)
class Int:
    """An integer from `minimum` (to `maximum`), times `scale` (MB given, bytes kept);
    `optional`: empty is None (sized elsewhere)."""

    minimum: int = 0
    maximum: int | None = None
    scale: int = 1
    optional: bool = False

    def __call__(self, value: str, name: str, parsed: Parsed) -> int | None:
        if self.optional and not value.strip():
            return None
        number = _int(value.strip() if self.optional else value, name, self.minimum)
        if self.maximum is not None and number > self.maximum:
            raise SettingsError(f"{name} must be <= {self.maximum}, got {number}")
        return number * self.scale

    def describe(self) -> str:
        if self.maximum is not None:
            return f"integer {self.minimum} to {self.maximum}"
        return f"integer ≥ {self.minimum}"


@dataclass(frozen=True)
class Float:
    minimum: float = 0.0

    def __call__(self, value: str, name: str, parsed: Parsed) -> float:
        try:
            number = float(value)
        except ValueError:
            raise SettingsError(f"{name} must be a number, got {value!r}") from None
        if not number >= self.minimum:  # also refuses NaN
            raise SettingsError(f"{name} must be >= {self.minimum}, got {value}")
        return number

    def describe(self) -> str:
        return f"number ≥ {self.minimum:g}"


@dataclass(frozen=True)
class Bool:
    def __call__(self, value: str, name: str, parsed: Parsed) -> bool:
        lowered = value.strip().lower()
        if lowered in ("1", "true", "yes", "y", "on"):
            return True
        if lowered in ("0", "false", "no", "n", "off"):
            return False
        raise SettingsError(f"{name} must be true or false, got {value!r}")

    def describe(self) -> str:
        return "boolean"


@dataclass(frozen=True)
class Text:
    """The text as given; `or_default`: an empty one counts as unset."""

    or_default: str | None = None

    def __call__(self, value: str, name: str, parsed: Parsed) -> str:
        if self.or_default is None:
            return value
        return value or self.or_default

    def describe(self) -> str:
        return "text"


@dataclass(frozen=True)
class Names:
    """Comma-separated items, blanks dropped."""

    lower: bool = False

    def __call__(self, value: str, name: str, parsed: Parsed) -> tuple[str, ...]:
        return tuple(item.lower() for item in names(value)) if self.lower else names(value)

    def describe(self) -> str:
        return "list"


@dataclass(frozen=True)
class Custom:
    """A value with its own rules, said in `kind` for the reference."""

    parse: Callable[[str, str, Parsed], Any]
    kind: str

    def __call__(self, value: str, name: str, parsed: Parsed) -> Any:
        return self.parse(value, name, parsed)

    def describe(self) -> str:
        return self.kind


Kind = Int | Float | Bool | Text | Names | Custom


def data_dir(value: str, name: str, parsed: Parsed) -> Path:
    return Path(value).expanduser().absolute()


def primary_url(value: str, name: str, parsed: Parsed) -> str | None:
    return database_url(value)


def replica_url(value: str, name: str, parsed: Parsed) -> str | None:
    return read_url(value, primary=parsed["DATABASE_URL"])


def warehouse_location(value: str, name: str, parsed: Parsed) -> str:
    return value or f"file://{parsed['DATA_DIR'] / 'warehouse'}"


def log_format(value: str, name: str, parsed: Parsed) -> str:
    lowered = value.strip().lower()
    if lowered not in ("text", "json"):
        raise SettingsError(f"{name} must be text or json, got {value!r}")
    return lowered


def _checked_key(value: str, name: str) -> str:
    # The format check lives with the cipher; settings refuse a bad key before the
    # server starts, and never print it.
    try:
        parse_key(value)
    except SecretKeyError as exc:
        raise SettingsError(f"{name}: {exc}") from None
    return value


def secrets_key(value: str, name: str, parsed: Parsed) -> str | None:
    """Required on PostgreSQL (shared by every replica); the embedded default keeps a
    generated key file in the data directory instead."""
    if not value.strip():
        if parsed["DATABASE_URL"] is not None:
            raise SettingsError(
                f"{name} is required with PostgreSQL: 32 random bytes, base64 "
                "(openssl rand -base64 32); it encrypts storage credentials"
            )
        return None
    return _checked_key(value.strip(), name)


def old_keys(value: str, name: str, parsed: Parsed) -> tuple[str, ...]:
    return tuple(_checked_key(key, name) for key in names(value))


def file_roots(value: str, name: str, parsed: Parsed) -> tuple[str, ...]:
    roots = []
    for item in names(value):
        try:
            root = Location.parse(item, name + " entry")
        except BadRequestError as exc:
            raise SettingsError(exc.message) from None
        if not root.is_local:
            raise SettingsError(f"{name} entries must be directories")
        roots.append(str(root))
    return tuple(roots)


def proxies(value: str, name: str, parsed: Parsed) -> tuple[str, ...]:
    entries = names(value)
    for entry in entries:
        if entry == "*":
            continue
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise SettingsError(
                f"{name} must list IP addresses or networks (or *): {entry!r}"
            ) from None
    return entries


def providers(
    value: str, name: str, parsed: Parsed
) -> tuple[tuple[str | None, ...], tuple[str, ...]]:
    """The keys and URIs of `[<key>=]<uri>` entries: at most one without a key (the
    default provider), keys unique (ADR 0019)."""
    keys: list[str | None] = []
    uris: list[str] = []
    for entry in names(value):
        try:
            key, uri = parse_provider_entry(entry)
        except ValueError as exc:
            raise SettingsError(f"{name}: {exc}") from None
        parsed_uri = urlparse(uri)
        if parsed_uri.scheme not in ("http", "https") or not parsed_uri.hostname:
            raise SettingsError(f"{name} must be http(s) URLs: {uri!r}")
        if key in keys:
            what = "more than one provider without a key (the default provider)"
            if key is not None:
                what = f"the provider key {key!r} twice"
            raise SettingsError(
                f"{name} names {what}: give each further provider its own "
                "key as <key>=<uri> (docs/auth.md)"
            )
        keys.append(key)
        uris.append(uri.rstrip("/"))
    return tuple(keys), tuple(uris)


def console_client(value: str, name: str, parsed: Parsed) -> str:
    audiences: tuple[str, ...] = parsed["OPENID_AUDIENCE"]
    return value or (audiences or ("icelog",))[0]


SINKS = ("nats", "kafka")
_NATS_TOKEN = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
_STREAM_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_KAFKA_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def sinks(value: str, name: str, parsed: Parsed) -> tuple[str, ...]:
    run = names(value)
    for sink in run:
        if sink not in SINKS:
            raise SettingsError(f"{name}: unknown sink {sink!r} (use nats, kafka)")
    return run


def subject_prefix(value: str, name: str, parsed: Parsed) -> str:
    if not _NATS_TOKEN.match(value):
        raise SettingsError(
            f"{name} must be dot-separated tokens of letters, digits, "
            f"'-' or '_' (no wildcards), got {value!r}"
        )
    return value


def stream(value: str, name: str, parsed: Parsed) -> str:
    if not _STREAM_NAME.match(value):
        raise SettingsError(f"{name} must be letters, digits, '-', '_'")
    return value


def kafka_topic(value: str, name: str, parsed: Parsed) -> str:
    if not _KAFKA_TOPIC.match(value):
        raise SettingsError(f"{name} is not a valid Kafka topic name: {value!r}")
    return value


def kafka_config(value: str, name: str, parsed: Parsed) -> dict[str, Any]:
    try:
        config = json.loads(value or "{}")
    except json.JSONDecodeError:
        raise SettingsError(f"{name} must be a JSON object") from None
    if not isinstance(config, dict):
        raise SettingsError(f"{name} must be a JSON object")
    return config


def kafka_servers(value: str, name: str, parsed: Parsed) -> str | None:
    bootstrap = value.strip() or None
    if "kafka" in parsed["PUBLISH"] and bootstrap is None:
        raise SettingsError(f"{name} is required to publish to Kafka")
    return bootstrap


def nats_urls(value: str, name: str, parsed: Parsed) -> tuple[str, ...]:
    urls = tuple(url.strip() for url in value.split(","))
    if not all(url.startswith(("nats://", "tls://")) for url in urls if url):
        raise SettingsError(f"{name} must be nats:// or tls:// URL(s)")
    return tuple(url for url in urls if url)


__all__ = ["PREFIX", "Kind", "SettingsError"]

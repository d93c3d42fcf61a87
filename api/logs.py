"""Logging set-up: one line per record, as JSON (`ICELOG_LOG_FORMAT=json`) or text.

JSON lines carry `time` (UTC, ISO 8601), `level`, `logger`, `message`, the `request_id` of the
request being served (if any) and, for access lines (logger `icelog.access`), `method`,
`route` (the template, e.g. `/catalog/v1/{prefix}/namespaces/{namespace}`), `path` (still
percent-encoded, never the query string), `status`, `duration_ms` and `client`. Nothing
here logs request bodies or headers other than the request id: secrets travel in those.

`configure_logging` replaces the root handler; run uvicorn with `uvicorn_log_options()` so
it neither installs its own handlers nor writes its own access line (that one would carry
the query string).
"""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

FORMATS = ("text", "json")
ACCESS_LOGGER = "icelog.access"

# The id of the request being served; set by the observability middleware and carried into
# the threadpool with the context, so every record made while serving a request names it.
request_id_var: ContextVar[str | None] = ContextVar("icelog_request_id", default=None)

# Extra fields an access line carries, in output order.
ACCESS_FIELDS = ("method", "route", "path", "status", "duration_ms", "client")

_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def _request_id(record: logging.LogRecord) -> str | None:
    found = getattr(record, "request_id", None)
    return found if isinstance(found, str) else request_id_var.get()


class JsonFormatter(logging.Formatter):
    """One JSON object per record (orjson escapes every control character)."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        entry: dict[str, Any] = {
            "time": stamp.replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = _request_id(record)
        if request_id is not None:
            entry["request_id"] = request_id
        for name in ACCESS_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    """The human format, with the request id appended when there is one."""

    def __init__(self) -> None:
        super().__init__(_TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        request_id = _request_id(record)
        if request_id is None:
            return text
        line, newline, rest = text.partition("\n")
        return f"{line} [request_id={request_id}]{newline}{rest}"


class _IcelogHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler this module installed, so configuring twice replaces it."""


def level_number(level: str) -> int:
    """ICELOG_LOG_LEVEL (uvicorn's names; its "trace" is below DEBUG) as a logging level."""
    found = logging.getLevelName("DEBUG" if level.upper() == "TRACE" else level.upper())
    return found if isinstance(found, int) else logging.INFO


def formatter_for(log_format: str) -> logging.Formatter:
    if log_format not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {log_format!r}")
    return JsonFormatter() if log_format == "json" else TextFormatter()


def configure_logging(
    log_format: str = "text", level: str = "info", stream: TextIO | None = None
) -> None:
    """Send every record (ours, uvicorn's, the libraries') to `stream` (stderr) in one
    format. Safe to call more than once (each worker process of `--workers N` calls it)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        # Ours from an earlier call, and basicConfig's default: one handler, one format.
        if isinstance(handler, _IcelogHandler) or type(handler) is logging.StreamHandler:
            root.removeHandler(handler)
    handler = _IcelogHandler(stream or sys.stderr)
    handler.setFormatter(formatter_for(log_format))
    root.addHandler(handler)
    root.setLevel(level_number(level))
    # Uvicorn's loggers: no handlers of their own, so they reach the root handler.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.asgi"):
        found = logging.getLogger(name)
        found.handlers.clear()
        found.propagate = True
    # Except its access line, which carries the query string (ours names the route
    # template). uvicorn writes it whenever that logger has a handler, its own or the
    # root's; `access_log=False` only detaches it in the process that built the Config,
    # not in the worker processes of `--workers N`, which set up logging here.
    access = logging.getLogger("uvicorn.access")
    access.handlers.clear()
    access.propagate = False


def uvicorn_log_options() -> dict[str, Any]:
    """Keyword arguments for `uvicorn.run`: keep the logging set-up above, and no uvicorn
    access line (ours names the route template and never the query string)."""
    return {"log_config": None, "access_log": False}

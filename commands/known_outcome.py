"""Appending a command that wrote metadata files, deciding what becomes of the files from
the append's KNOWN outcome: they are deleted only when the append certainly did not
happen. Tables, views and functions all append this way."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from icelog.commands.application import CatalogApplication
from icelog.commands.group_commit import ConcurrentChange
from icelog.domain.errors import CatalogError, NothingAppendedError, ServiceUnavailableError
from icelog.domain.idempotency import IdempotentReplay
from icelog.domain.ports import FileIO

log = logging.getLogger("icelog.commands")
# Before deciding that an append which failed without a conflict did not land.
RECHECK_AFTER_S = 0.25


def append_known(
    app: CatalogApplication,
    file_io: FileIO | None,
    written: list[str],
    probe: tuple[Any, str],
    *aggregates: Any,
    hints: dict[str, bytes],
    unknown: type[CatalogError] = ServiceUnavailableError,
) -> None:
    """Append, and decide what to do with the files written for it:

    - It landed: done — also when the save failed after the database committed (a
      connection lost on COMMIT, an error after the insert), found by reading the log.
    - A conflict, or a failure after which the log shows the events are not there: the
      files are removed and the error raised (a conflict makes the command start over).
    - The log cannot be read: nobody knows. The files stay — a metadata file the log
      names must never be deleted — and `unknown` is raised (a 5xx: the client must not
      clean up, and reloads to see the outcome).

    `probe` is (an aggregate of the append, the metadata location its new event names):
    with the event's request id, unique to this attempt.
    """
    try:
        app.save_all(*aggregates, hints=hints)
        return
    except (ConcurrentChange, IdempotentReplay, NothingAppendedError) as exc:
        failure: BaseException = exc
        landed: bool | None = (
            _landed_or_unknown(app, *probe) if isinstance(exc, ConcurrentChange) else False
        )
    except BaseException as exc:
        failure = exc
        landed = _landed_or_unknown(app, *probe)
        if landed is False:
            # A connection lost during COMMIT: the database may still be finishing it,
            # and a read from another connection not see it yet. Look once more.
            time.sleep(RECHECK_AFTER_S)
            landed = _landed_or_unknown(app, *probe)
    if landed:
        return
    if landed is None:
        raise unknown(
            "The outcome of this change is unknown (the database did not confirm it): "
            "reload to see whether it was applied"
        ) from failure
    if file_io is not None:
        for location in written:
            with contextlib.suppress(OSError, CatalogError):
                file_io.delete(location)
    raise failure


def append_written(
    app: CatalogApplication,
    file_io: FileIO,
    md_location: str,
    probe: Any,
    *aggregates: Any,
    hint: bytes,
    unknown: type[CatalogError] = ServiceUnavailableError,
) -> None:
    """`append_known` for a command that wrote one metadata file, `md_location`, which
    `probe`'s new event names."""
    append_known(
        app,
        file_io,
        [md_location],
        (probe, md_location),
        *aggregates,
        hints={md_location: hint},
        unknown=unknown,
    )


def _landed_or_unknown(app: CatalogApplication, aggregate: Any, md_location: str) -> bool | None:
    try:
        return _landed(app, aggregate, md_location)
    except Exception:
        log.warning("could not read the log to resolve an append's outcome", exc_info=True)
        return None


def _landed(app: CatalogApplication, aggregate: Any, md_location: str) -> bool:
    """Whether the event this process tried to append as `aggregate`'s current version
    is in the log (compared by the metadata file it names: unique per attempt, or — for
    a register — on a table id that is new per attempt)."""
    version = aggregate.version
    stored = app.recorder.select_events(aggregate.id, gt=version - 1, lte=version)
    if not stored:
        return False
    event = app.mapper.to_domain_event(stored[0])
    return getattr(event, "metadata_location", None) == md_location
